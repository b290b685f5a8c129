"""A class with a JUDGED_BY row naming the order rule is judged as reordering is: a violation
where Kafka guarantees order per partition, counted and allowed where it does not, UNKNOWN
where nothing is documented; the judge needs no code of its own for it."""

from __future__ import annotations

import pytest

from analysis.judge import findings, guarantees
from analysis.judge.guarantees import ALLOWED, FORBIDDEN, UNDOCUMENTED, Guarantee
from analysis.judge.outcomes import Verdict
from analysis.model.anomalies import COUNT_NAMES, AnomalyName
from analysis.model.results import Example

STRICT = Guarantee(FORBIDDEN, FORBIDDEN, "guaranteed", "CIT", "DUP", "ORD")
LOOSE = Guarantee(ALLOWED, ALLOWED, "not-guaranteed", "cit", "dup", "ord")
SILENT = Guarantee(UNDOCUMENTED, UNDOCUMENTED, UNDOCUMENTED, "none", "none", "none")


def test_a_class_with_an_order_row_is_judged_by_the_order_rule(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = AnomalyName.PHANTOM  # any class: its row alone decides how it is judged
    monkeypatch.setitem(guarantees.JUDGED_BY, name, "order")
    counts = dict.fromkeys(COUNT_NAMES, 0) | {name: 2}
    examples = {name: (Example(msg_id=3, partition=1, offset=9),)}
    (strict,) = findings.judge_order(counts, examples, STRICT)
    assert strict.verdict == Verdict.VIOLATION and strict.anomaly == name
    assert strict.reason.startswith("forbidden phantom: 2 phantom")
    assert "msg_id 3 at p1@9" in strict.reason and strict.reason.endswith("ORD")
    (loose,) = findings.judge_order(counts, examples, LOOSE)
    assert loose.verdict == Verdict.PASS and "allowed: ord" in loose.reason
    (silent,) = findings.judge_order(counts, examples, SILENT)
    assert silent.verdict == Verdict.UNKNOWN
    assert findings.judge_order(dict.fromkeys(COUNT_NAMES, 0), {}, STRICT) == []
