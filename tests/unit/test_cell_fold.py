"""The cell fold: how a cell's verdict and its first reasons come from its repetitions'
verdicts and the guarantee (VIOLATION > UNKNOWN > KNOWN-BUG > EXPECTED-LOSS > NOT-PROVOKED >
PASS), each outcome spelled out."""

from __future__ import annotations

from typing import Any

from analysis.judge import guarantees, outcomes, verdicts
from analysis.judge.outcomes import Verdict


def _rep(verdict: Verdict, n: int, *reasons: str, **more: Any) -> outcomes.RepetitionVerdict:
    return outcomes.RepetitionVerdict(verdict, reasons, None, f"r/{n}", n, **more)


def _guarantee(loss: str) -> guarantees.Guarantee:
    return guarantees.Guarantee(loss, "forbidden", "guaranteed", "the row", "dup", "ord")


def test_the_cell_fold_names_each_outcome_and_the_repetitions_behind_it() -> None:
    outcome = verdicts._cell_outcome
    cp = _guarantee(guarantees.FORBIDDEN)
    violating = _rep(Verdict.VIOLATION, 2, "a", "forbidden b", "c", violations=("forbidden b",))
    plain_violation = _rep(Verdict.VIOLATION, 3, "x", "y")
    assert outcome([_rep(Verdict.PASS, 0, "p"), violating, plain_violation], cp) == (
        Verdict.VIOLATION,
        (
            "2 of 3 repetitions violate the documented guarantee",
            "rep 2: forbidden b",
            "rep 3: x",
            "rep 3: y",
        ),
    )
    lossy = _rep(Verdict.EXPECTED_LOSS, 1, "l1", "l2")
    unknown = _rep(Verdict.UNKNOWN, 4, "u1", "u2")
    assert outcome([lossy, unknown, _rep(Verdict.UNKNOWN, 5, "v")], cp) == (
        Verdict.UNKNOWN,
        (
            "2 of 3 repetitions could not be judged (loss allowed and observed in 1)",
            "rep 4: u1",
            "rep 5: v",
        ),
    )
    assert outcome([unknown], cp) == (
        Verdict.UNKNOWN,
        ("1 of 1 repetitions could not be judged", "rep 4: u1"),
    )
    buggy = _rep(Verdict.KNOWN_BUG, 6, "k1", "known bug KAFKA-1 of Kafka 1.0: k2")
    assert outcome([lossy, buggy, _rep(Verdict.KNOWN_BUG, 7)], cp) == (
        Verdict.KNOWN_BUG,
        (
            "a known bug of this release showed in 2 of 3 repetitions",
            "rep 6: known bug KAFKA-1 of Kafka 1.0: k2",
        ),
    )
    assert outcome([lossy, _rep(Verdict.PASS, 0)], cp) == (
        Verdict.EXPECTED_LOSS,
        ("loss allowed and observed in 1 of 2 repetitions", "rep 1: l1"),
    )
    passed = [_rep(Verdict.PASS, 0, acked=5), _rep(Verdict.PASS, 1, acked=None)]
    assert outcome(passed, cp) == (
        Verdict.PASS,
        ("all 2 repetitions kept every acknowledged message (5 acked); loss forbidden: the row",),
    )
    ap = _guarantee(guarantees.ALLOWED)
    assert outcome(passed, ap) == (
        Verdict.NOT_PROVOKED,
        (
            "loss allowed (the row) but none of 2 repetitions lost an acknowledged message (5 "
            "acked): the faults did not provoke it",
            "to provoke it: more repetitions (`repetitions`), a longer or repeated fault "
            "(`duration_s` of the `faults.schedule` steps, or `faults.generate`), or more traffic "
            "in flight when it hits (`workload.rate`)",
        ),
    )
    assert outcome(passed[:1], cp) == (
        Verdict.PASS,
        (
            "all 1 repetitions kept every acknowledged message (5 acked); loss forbidden: the row",
            "one repetition shows what can happen, not how often: raise `repetitions` for a loss "
            "probability with its interval",
        ),
    )
    assert outcome(passed, None) == (
        Verdict.UNKNOWN,
        ("no documented guarantee could be determined",),
    )
