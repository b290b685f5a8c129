"""A run checked as Spark DataFrame operations (analysis.spark.messages) gives what the
one-process check gives.

On generated runs (tests/unit/generated_runs.py), through Spark with a chunk size of 1 to 6
rows, so that most runs take the DataFrame path: every result, field for field, equals the
one-process result (reconcile_in_process), and its counts equal the oracle's.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.spark.reconcile import reconcile, reconcile_in_process
from tests.unit.generated_runs import GeneratedRun, expected_counts, runs, write_run_dir

pytestmark = pytest.mark.property


# A Spark job per run per example: a fortieth of the profile's budget (5 in CI).
@settings(max_examples=max(5, settings.default.max_examples // 40))
@given(st.lists(runs(max_partitions=3), min_size=1, max_size=3), st.integers(1, 6))
def test_the_dataframe_check_gives_the_one_process_results(
    spark, batch: list[GeneratedRun], chunk_rows: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        dirs = [write_run_dir(run, Path(tmp) / str(i)) for i, run in enumerate(batch)]
        checked = reconcile(spark, dirs, chunk_rows=chunk_rows)
        whole = reconcile_in_process(dirs)
    for run, result, local in zip(batch, checked, whole, strict=True):
        assert result.status == ("complete" if run.complete else "incomplete"), result.error
        assert result == local
        if run.complete:
            assert {k: v for k, v in result.counts.items() if v} == {
                k: v for k, v in expected_counts(run).items() if v
            }


@given(st.integers(-(2**70), 2**70))
def test_signed_reads_the_low_64_bits_as_twos_complement(value: int) -> None:
    from analysis.spark.messages import _signed

    # Oracle: the low 64 bits as bytes, read back as a signed long.
    low = (value % 2**64).to_bytes(8, "little")
    assert _signed(value) == int.from_bytes(low, "little", signed=True)


@settings(max_examples=max(5, settings.default.max_examples // 40))
@given(
    st.lists(
        st.one_of(
            st.integers(-(2**63), 2**63 - 1),
            st.sampled_from([0, 1, -1, 2**63 - 1, -(2**63), 996, 997]),
        ),
        min_size=1,
        max_size=50,
    )
)
def test_the_probes_hash_in_spark_is_the_one_process_hash(spark, ids: list[int]) -> None:
    """The probe samples the same messages on both paths: the long-arithmetic splitmix64 and
    its unsigned remainder equal the numpy hash's bits and remainder, for any msg_id."""
    import numpy as np
    from pyspark.sql import functions as F

    from analysis.checks.messages.probe import SENSITIVITY_ONE_IN, _seeded_hash
    from analysis.spark.messages import _session_settings, _splitmix64, _unsigned_mod

    expected = _seeded_hash(np.array(ids, dtype=np.int64))
    frame = spark.createDataFrame([(i, v) for i, v in enumerate(ids)], "i long, v long")
    hashed = _splitmix64(F.col("v"))
    with _session_settings(spark, {"spark.sql.ansi.enabled": "false"}):
        rows = frame.select(
            "i", hashed.alias("bits"), _unsigned_mod(hashed, SENSITIVITY_ONE_IN).alias("mod")
        ).collect()
    got = sorted((row["i"], row["bits"], row["mod"]) for row in rows)
    assert [bits for _, bits, _ in got] == expected.view(np.int64).tolist()
    assert [mod for _, _, mod in got] == (expected % SENSITIVITY_ONE_IN).astype(int).tolist()
