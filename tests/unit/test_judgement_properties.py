"""Property tests of the judgement over generated runs (tests/unit/generated_runs.py).

Each run directory is reconciled in this process (the Spark task's own body) and judged from
its files, as `kafka-chaos report` would.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from analysis.judge.outcomes import Verdict
from analysis.judge.verdicts import judge_repetition
from analysis.model.results import RunResult
from analysis.spark.reconcile import reconcile_in_process
from harness.rundir.events import load_events
from tests.unit.generated_runs import OK, GeneratedRun, expected_counts, runs, write_run_dir
from tests.unit.verdict_runs import CP as VERDICT_CP

pytestmark = pytest.mark.property

CP = {**VERDICT_CP, "partitions": 8}  # the judge's CP cell, as wide as a generated run
AP = {**CP, "acks": "1", "min_insync_replicas": 1, "enable_idempotence": False}
CONFIGS = {"all": CP, "1": AP, "0": {**AP, "acks": "0"}}
VIOLATION_CLASSES = ("lost", "unseen", "duplicated", "offset_divergent", "reordered")


def _judged(run: GeneratedRun, *, timed_out: bool = False):
    """(RunResult, verdict) of the run as written to a run directory."""
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = write_run_dir(run, Path(tmp) / "run", CONFIGS[run.acks], timed_out=timed_out)
        (result,) = reconcile_in_process([run_dir])
        return result, judge_repetition(result, load_events(run_dir))


def _loss(result: RunResult) -> int:
    """The one loss figure of a complete result."""
    assert result.counts is not None, result.error
    return result.loss


@given(runs(acks="all", complete=True))
def test_loss_under_cp_is_always_a_violation(run: GeneratedRun) -> None:
    # The oracle decides which runs lost something, not the checker: a checker that
    # undercounted would otherwise filter away the very runs that should fail it.
    expected = expected_counts(run)
    assume(expected.get("lost", 0) + expected.get("unseen", 0) > 0)
    result, verdict = _judged(run)
    assert _loss(result) > 0, result.counts
    assert verdict.verdict == Verdict.VIOLATION, verdict.reasons


@given(st.one_of(runs(complete=True), runs(complete=True, healthy=True)))
def test_a_run_without_loss_duplicates_or_rewrites_is_never_a_violation(
    run: GeneratedRun,
) -> None:
    expected = expected_counts(run)
    assume(not any(expected.get(name, 0) for name in VIOLATION_CLASSES))
    _, verdict = _judged(run)
    assert verdict.verdict != Verdict.VIOLATION, verdict.reasons


@given(runs(), st.booleans())
def test_an_incomplete_read_back_is_never_judged_pass_or_violation(
    run: GeneratedRun, missing_file: bool
) -> None:
    """Either readback.parquet is missing or its event says it timed out."""
    run = replace(run, complete=not missing_file)
    _, verdict = _judged(run, timed_out=not missing_file)
    assert verdict.verdict == Verdict.UNKNOWN, verdict.reasons
    assert verdict.reasons


@given(runs())
def test_the_same_run_judged_twice_gives_the_same_verdict(run: GeneratedRun) -> None:
    first_result, first = _judged(run)
    second_result, second = _judged(run)
    assert (first.verdict, first.reasons) == (second.verdict, second.reasons)
    assert replace(first_result, run_dir="") == replace(second_result, run_dir="")


@given(runs(complete=True), st.data())
def test_masking_one_healthy_record_raises_the_loss_by_exactly_one(
    run: GeneratedRun, data: st.DataObject
) -> None:
    """A record whose acknowledged message is read nowhere else, and not below its log start."""
    holders = [r.msg_id for r in run.log]
    candidates = [
        i
        for i, r in enumerate(run.log)
        if holders.count(r.msg_id) == 1
        and any(
            s.msg_id == r.msg_id
            and s.status == OK
            and not (s.offset is not None and s.offset < run.log_start.get(s.partition, 0))
            for s in run.sends
        )
    ]
    assume(candidates)
    masked = data.draw(st.sampled_from(candidates))
    kept = [r for i, r in enumerate(run.log) if i != masked]
    masked_run = replace(
        run,
        log=kept,
        reread=[r for r in run.reread if r != run.log[masked]],
        order=[],
    )
    before, _ = _judged(run)
    after, _ = _judged(masked_run)
    assert _loss(after) == _loss(before) + 1
