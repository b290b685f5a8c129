"""The `high_watermark([P]) <op> N` clause of an `after:` condition: it compares the partition's
high watermark, which the nemesis reads (ListOffsets) only for a condition that asks; while the
partition's leader does not say, the clause is unknown and the step keeps waiting, whichever
way it is negated."""

from __future__ import annotations

import operator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.chaos.conditions import ClusterView, ConditionError, parse_condition

OPS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
       ">": operator.gt, ">=": operator.ge}  # fmt: skip


def _view(high_watermarks: dict[int, int]) -> ClusterView:
    return ClusterView({0: 1, 1: 2}, {0: [1, 2], 1: [2]}, frozenset({1, 2, 3}), {}, {}, 1.0,
                       high_watermarks=high_watermarks)  # fmt: skip


@given(
    st.dictionaries(st.integers(0, 2), st.integers(0, 50), max_size=3),
    st.sampled_from(sorted(OPS)),
    st.integers(0, 50),
    st.none() | st.integers(0, 2),
    st.booleans(),
    st.integers(0, 2),
)
def test_the_clause_compares_the_partitions_high_watermark(
    hws: dict[int, int], op: str, n: int, partition: int | None, negated: bool, step_p: int
) -> None:
    named = "" if partition is None else str(partition)
    text = f"{'not ' if negated else ''}high_watermark({named}) {op} {n}"
    condition = parse_condition(text)
    p = step_p if partition is None else partition
    # The oracle: unknown (unmet) without a reading of P; else the comparison, negated if asked.
    expected = p in hws and (OPS[op](hws[p], n) != negated)
    assert (condition.unmet(_view(hws), step_p) == []) is expected
    assert condition.calls("high_watermark")


CLAUSES = ["isr_size(0) == 1", "has_leader()", "leader_changed(1)", "high_watermark(0) >= 1",
           "not high_watermark() == 0", "after_s(3)", "registered(@a)"]  # fmt: skip


@given(st.lists(st.lists(st.sampled_from(CLAUSES), min_size=1, max_size=3), min_size=1, max_size=3))
def test_a_condition_calls_the_functions_its_clauses_name(alternatives: list[list[str]]) -> None:
    condition = parse_condition(" or ".join(" and ".join(a) for a in alternatives))
    for fn in ("high_watermark", "leader_changed", "isr_size", "in_isr"):
        # The oracle: some clause's text, without its negation, begins with the function.
        named = any(c.removeprefix("not ").startswith(f"{fn}(") for a in alternatives for c in a)
        assert condition.calls(fn) is named


def test_without_metadata_the_clause_is_unknown() -> None:
    blind = ClusterView.unanswered({}, since_previous_s=3.0)
    for text in ("high_watermark(0) >= 0", "not high_watermark(0) >= 1"):
        assert parse_condition(text).unmet(blind, 0) == [text]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("high_watermark(0)", "needs a comparison"),
        ("high_watermark(@x) >= 1", "must be a number"),
        ("high_watermark(0, 1) >= 1", "at most one partition"),
    ],
)
def test_a_bad_clause_says_what_is_wrong(text: str, fragment: str) -> None:
    with pytest.raises(ConditionError, match=fragment):
        parse_condition(text)
