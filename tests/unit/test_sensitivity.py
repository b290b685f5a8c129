"""The sensitivity check: the same Spark job must see records removed from a copy of the
read-back as missing, and a repetition whose checker cannot is UNKNOWN."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from analysis.checks import messages as checker
from analysis.checks.messages import RunInput, classes
from analysis.judge.outcomes import Verdict
from analysis.model.results import Sensitivity
from analysis.spark.reconcile import reconcile
from tests.unit.reconcile_runs import read, sent, write_run


def three_partitions(n: int) -> tuple[list[dict], list[dict]]:
    """n messages per partition 0..2, each acked and read back at its offset."""
    acked, readback = [], []
    for p in range(3):
        for i in range(n):
            msg_id = p * 100_000 + i
            acked.append(sent(msg_id, i, partition=p))
            readback.append(read(msg_id, i, partition=p))
    return acked, readback


def test_probe_finds_every_removed_record_including_each_tail(spark, tmp_path: Path) -> None:
    acked, readback = three_partitions(3000)
    readback = [r for r in readback if r["msg_id"] != 101_500]  # one real loss in partition 1
    (result,) = reconcile(spark, [write_run(tmp_path, "big", acked, readback)])
    assert result.loss == 1
    check = result.sensitivity
    # Three tails plus about 9000 / 997 sampled records (the seed fixes which).
    assert 3 + 3 <= check.removed <= 3 + 25
    assert check == Sensitivity(removed=check.removed, found=check.removed, passed=True)


def test_a_clean_tiny_run_passes(spark, tmp_path: Path) -> None:
    (result,) = reconcile(spark, [write_run(tmp_path, "tiny", *three_partitions(2))])
    assert result.sensitivity.passed is True
    assert result.sensitivity.removed >= 3  # at least each partition's tail


def test_a_checker_blind_to_the_tail_fails_its_sensitivity_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sighted = classes.classify

    def never_unseen(*args):  # a planted bug: messages beyond the last read are ignored
        classes = sighted(*args)
        return classes | {"unseen": np.zeros_like(classes["unseen"])}

    # In this process, not in a Spark worker, so that the planted bug is the one that runs.
    monkeypatch.setattr(classes, "classify", never_unseen)
    run_dir = write_run(tmp_path, "blind", *three_partitions(5))
    facts = checker.check_run(RunInput(run_dir, complete=True, unlocated_acks=False))
    assert facts.sensitivity.passed is False
    assert facts.sensitivity.found < facts.sensitivity.removed


def test_a_failed_sensitivity_check_makes_the_repetition_unknown() -> None:
    from tests.unit.verdict_runs import clean_cp, raw_judge, readback_event, tally_event

    res = {**clean_cp(), "sensitivity": {"removed": 4, "found": 3, "passed": False}}
    v = raw_judge(res, [readback_event(True), tally_event(990)])
    assert v.verdict == Verdict.UNKNOWN
    assert "of 4 acknowledged records removed" in v.reasons[0]
    ok = {**clean_cp(), "sensitivity": {"removed": 4, "found": 4, "passed": True}}
    assert raw_judge(ok, [readback_event(True), tally_event(990)]).verdict == Verdict.PASS


def test_on_an_empty_read_back_the_probe_does_not_apply_and_never_passes(tmp_path: Path) -> None:
    acked = [sent(m, m, partition=m % 2) for m in range(6)]
    run_dir = write_run(tmp_path, "all-gone", acked, [])
    facts = checker.check_run(RunInput(run_dir, complete=True, unlocated_acks=False))
    assert facts.counts["unseen"] + facts.counts["lost"] == 6
    assert facts.sensitivity == Sensitivity(removed=0, found=0, passed=None)
    assert not facts.sensitivity.applies


def test_total_loss_under_cp_is_a_violation_not_a_failed_probe() -> None:
    from tests.unit.verdict_runs import clean_cp, raw_judge, readback_event, tally_event

    res = clean_cp()
    acked = res["counts"]["acked"]
    res["counts"] |= {"read": 0, "unseen": acked}
    res["loss_by_partition"] = {"0": acked}
    res["sensitivity"] = {"removed": 0, "found": 0, "passed": None}
    v = raw_judge(res, [readback_event(True), tally_event(acked)])
    assert v.verdict == Verdict.VIOLATION
    assert not any("sensitivity" in reason for reason in v.reasons)


@pytest.mark.parametrize(
    ("first", "second", "combined"),
    [
        (Sensitivity.of(3, 3, clean=True), None, Sensitivity(3, 3, True)),
        (
            Sensitivity.of(3, 3, clean=True),
            Sensitivity.of(0, 0, clean=True),
            Sensitivity(3, 3, True),
        ),
        (
            Sensitivity.of(0, 0, clean=True),
            Sensitivity.of(2, 1, clean=True),
            Sensitivity(2, 1, False),
        ),
        (
            Sensitivity.of(0, 0, clean=True),
            Sensitivity.of(0, 0, clean=True),
            Sensitivity(0, 0, None),
        ),
        (
            Sensitivity.of(3, 3, clean=False),
            Sensitivity.of(2, 2, clean=True),
            Sensitivity(5, 5, False),
        ),
        (
            Sensitivity.of(3, 3, clean=True),
            Sensitivity.of(2, 2, clean=True),
            Sensitivity(5, 5, True),
        ),
    ],
)
def test_probes_combine_failing_when_any_fails_and_applying_when_any_applies(
    first: Sensitivity, second: Sensitivity | None, combined: Sensitivity
) -> None:
    assert first & second == combined


def test_the_probe_hides_the_tail_of_each_partition(tmp_path: Path) -> None:
    """The probe hides the last healthy record of each partition: messages 1 and 2^31 + 1 of
    partition 0 give one tail (the later), message 2^31 + 5 of partition 1 another."""
    from analysis.checks.messages.probe import SENSITIVITY_ONE_IN, _seeded_hash

    ids = {0: [1, 2**31 + 1], 1: [2**31 + 5]}
    assert not (_seeded_hash(np.array([1, 2**31 + 1, 2**31 + 5])) % SENSITIVITY_ONE_IN == 0).any()
    t0_us = 1_700_000_000_000_000
    acked = [
        sent(m, i, partition=p, send_us=t0_us + m)
        for p, ms in ids.items()
        for i, m in enumerate(ms)
    ]
    readback = [read(m, i, partition=p) for p, ms in ids.items() for i, m in enumerate(ms)]
    run_dir = write_run(tmp_path, "tails", acked, readback)
    run = RunInput(run_dir, complete=True, unlocated_acks=False)
    assert checker.check_run(run).sensitivity == Sensitivity(2, 2, True)
