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

from analysis.model.anomalies import LOSS_CLASSES, AnomalyName
from analysis.spark.reconcile import reconcile, reconcile_in_process
from tests.unit.generated_runs import GeneratedRun, expected_counts, runs, write_run_dir

pytestmark = pytest.mark.property


def test_the_probe_shortcut_holds_only_while_loss_is_lost_and_unseen() -> None:
    """The DataFrame probe derives the probe's loss from reads and the log start alone, which
    holds while the loss classes are exactly these two (their rules use nothing else)."""
    assert set(LOSS_CLASSES) == {AnomalyName.LOST, AnomalyName.UNSEEN}


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
