"""The sensitivity check: the same Spark job must see records removed from a copy of the
read-back as missing, and a repetition whose checker cannot is UNKNOWN."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from analysis import checker
from analysis.checker import RunInput
from analysis.judge.verdicts import Verdict
from analysis.reconcile import reconcile
from analysis.results import Sensitivity
from tests.unit.test_reconcile import read, sent, write_run


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
    sighted = checker.classify

    def never_unseen(*args):  # a planted bug: messages beyond the last read are ignored
        classes = sighted(*args)
        return classes | {"unseen": np.zeros_like(classes["unseen"])}

    # In this process, not in a Spark worker, so that the planted bug is the one that runs.
    monkeypatch.setattr(checker, "classify", never_unseen)
    run_dir = write_run(tmp_path, "blind", *three_partitions(5))
    facts = checker.check_run(RunInput(run_dir, complete=True, unlocated_acks=False))
    assert facts.sensitivity.passed is False
    assert facts.sensitivity.found < facts.sensitivity.removed


def test_a_failed_sensitivity_check_makes_the_repetition_unknown() -> None:
    from tests.unit.test_verdicts import clean_cp, raw_judge, readback_event, tally_event

    res = {**clean_cp(), "sensitivity": {"removed": 4, "found": 3, "passed": False}}
    v = raw_judge(res, [readback_event(True), tally_event(990)])
    assert v.verdict == Verdict.UNKNOWN
    assert "of 4 acknowledged records removed" in v.reasons[0]
    ok = {**clean_cp(), "sensitivity": {"removed": 4, "found": 4, "passed": True}}
    assert raw_judge(ok, [readback_event(True), tally_event(990)]).verdict == Verdict.PASS
