"""A run reconciled in shards gives what the run checked whole gives.

Two levels, both against the whole-run check on generated runs (tests/unit/generated_runs.py):
- in this process, the run's tables are split by shard in the test (each acked row's holder
  found with a plain dict over the read-back), checked shard by shard and merged: many runs,
  many shard counts, no Spark;
- through Spark (analysis.spark.shards): the joins, the timeline, the order check and the
  cogroup; every result, field for field, equals the whole-run result, and its counts equal the
  oracle's.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.checks.messages import RunInput, check_run
from analysis.checks.messages.columns import ACKED_COLUMNS, NO_ID, READBACK_COLUMNS, Acked, Reads
from analysis.checks.messages.facts import RunFacts
from analysis.checks.messages.index import Holders, Index, Progress
from analysis.checks.messages.shard import Reordering, SendFacts, check_shard, merge
from analysis.checks.messages.timeline import send_facts
from analysis.model.anomalies import AnomalyName
from analysis.spark.reconcile import reconcile, reconcile_in_process
from analysis.spark.shards import shard_count
from harness.rundir import layout
from tests.unit.generated_runs import GeneratedRun, expected_counts, runs, write_run_dir

pytestmark = pytest.mark.property


def _split(table: pa.Table, shards: int) -> list[pa.Table]:
    """The table's rows by shard, as the test computes it: msg_id mod shards, null to 0."""
    ids = table["msg_id"].to_pylist()
    shard = [0 if i is None else i % shards for i in ids]
    return [table.filter(pa.array([s == k for s in shard], pa.bool_())) for k in range(shards)]


def _holders(acked: pa.Table, reads: pa.Table) -> Holders:
    """Per acked row, whether a record sits at its (partition, offset), and its msg_id."""
    at = {
        (p, o): m
        for p, o, m in zip(
            reads["partition"].to_pylist(),
            reads["offset"].to_pylist(),
            reads["msg_id"].to_pylist(),
            strict=True,
        )
    }
    slots = list(zip(acked["partition"].to_pylist(), acked["offset"].to_pylist(), strict=True))
    held = [slot in at for slot in slots]
    held_by = [NO_ID if at.get(slot) is None else at[slot] for slot in slots]
    return Holders(np.array(held, dtype=bool), np.array(held_by, dtype=np.int64))


def _sharded(run_dir: Path, run: RunInput) -> RunFacts:
    """The run's facts from its shards, split in the test and merged by `merge`."""
    acked = pq.read_table(run_dir / layout.ACKED, columns=list(ACKED_COLUMNS))
    reads = pq.read_table(run_dir / layout.READBACK, columns=list(READBACK_COLUMNS))
    whole = Index.build(Acked.of(acked), Reads.of(reads))
    progress = Progress.of(whole, run, hidden=None)
    facts = check_run(run)  # the order check is not sharded here: take the whole run's
    reordering = Reordering(
        facts.counts[AnomalyName.REORDERED], facts.examples[AnomalyName.REORDERED]
    )
    seconds, counts, contract = send_facts(Acked.of(acked))
    shards = [
        check_shard(Acked.of(a), Reads.of(r), _holders(a, reads), run, progress)
        for a, r in zip(_split(acked, run.shards), _split(reads, run.shards), strict=True)
    ]
    return merge(SendFacts(seconds, counts, contract), shards, reordering)


def _comparable(facts: RunFacts) -> RunFacts:
    """The facts without zero counts and empty example lists (a run with no shard names none)."""
    return RunFacts(
        seconds=facts.seconds,
        counts={k: v for k, v in facts.counts.items() if v},
        contract={k: v for k, v in facts.contract.items() if v},
        loss_by_partition=facts.loss_by_partition,
        divergence_by_partition=facts.divergence_by_partition,
        examples={k: list(v) for k, v in facts.examples.items() if v},
        missing=facts.missing,
        sensitivity=facts.sensitivity,
    )


@given(runs(complete=True), st.integers(1, 7))
def test_shards_merged_give_the_whole_runs_facts(run: GeneratedRun, shards: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = write_run_dir(run, Path(tmp) / "run")
        checked = RunInput(
            run_dir,
            complete=True,
            unlocated_acks=not run.located,
            log_start=run.log_start,
            shards=shards,
        )
        assert _comparable(_sharded(run_dir, checked)) == _comparable(check_run(checked))


@given(st.integers(0, 10**9), st.integers(1, 10**7))
def test_shard_count_bounds_the_rows_per_shard(rows: int, shard_rows: int) -> None:
    shards = shard_count(rows, shard_rows)
    assert shards >= 1
    assert rows <= shards * shard_rows
    assert shards == 1 or rows > (shards - 1) * shard_rows


# A Spark job per run per example: a fortieth of the profile's budget (5 in CI).
@settings(max_examples=max(5, settings.default.max_examples // 40))
@given(st.lists(runs(max_partitions=3), min_size=1, max_size=3), st.integers(1, 6))
def test_the_sharded_spark_job_gives_the_whole_runs_results(
    spark, batch: list[GeneratedRun], shard_rows: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        dirs = [write_run_dir(run, Path(tmp) / str(i)) for i, run in enumerate(batch)]
        sharded = reconcile(spark, dirs, shard_rows=shard_rows)
        whole = reconcile_in_process(dirs, shard_rows=shard_rows)
    for run, result, local in zip(batch, sharded, whole, strict=True):
        assert result.status == ("complete" if run.complete else "incomplete"), result.error
        assert result == local
        if run.complete:
            assert {k: v for k, v in result.counts.items() if v} == {
                k: v for k, v in expected_counts(run).items() if v
            }
