"""The shaper's policy against an oracle: holds, order, reordering, drops and duplicates."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.chaos.shaper.policy import Policy, Shape
from tests.examples import examples

arrivals = st.lists(
    st.floats(min_value=0, max_value=1000, allow_nan=False), min_size=1, max_size=200
).map(sorted)
milliseconds = st.floats(min_value=0, max_value=5000, allow_nan=False)
percent = st.floats(min_value=0, max_value=100, allow_nan=False)


@given(arrivals, milliseconds, milliseconds, percent, percent, percent, st.integers(0, 99))
def test_every_packet_leaves_no_earlier_than_it_came_and_held_ones_keep_their_order(
    times, delay, jitter, reorder, duplicate, drop, seed
):
    policy = Policy(Shape(delay, jitter, reorder, duplicate, drop), seed)
    decisions = [policy.decide(t) for t in times]
    held = [(t, d) for t, d in zip(times, decisions, strict=True) if not (d.drop or d.reordered)]
    for t, d in zip(times, decisions, strict=True):
        assert d.release_at >= t
        if d.drop or d.reordered:
            assert d.release_at == t
    # The oracle: a held packet leaves no sooner than delay - jitter after it came, and no
    # later than the latest delay + jitter of any packet that came before it (it waits for them).
    latest_due = -math.inf
    previous = -math.inf
    for t, d in held:
        latest_due = max(latest_due, t + (delay + jitter) / 1000)
        assert d.release_at >= t + max(0.0, delay - jitter) / 1000 - 1e-9
        assert d.release_at <= latest_due + 1e-9
        assert d.release_at >= previous
        previous = d.release_at


@given(arrivals, milliseconds)
def test_without_jitter_each_packet_is_held_exactly_the_delay(times, delay):
    policy = Policy(Shape(delay_ms=delay), seed=1)
    for t in times:
        assert policy.decide(t).release_at == pytest.approx(t + delay / 1000, abs=1e-9)


@given(percent, percent, percent, st.integers(0, 10))
@settings(max_examples=examples(0.15))
def test_shares_match_the_percentages(reorder, duplicate, drop, seed):
    n = 4000
    policy = Policy(Shape(delay_ms=10, reorder_percent=reorder, duplicate_percent=duplicate,
                          drop_percent=drop), seed)  # fmt: skip
    decisions = [policy.decide(float(i)) for i in range(n)]
    dropped = sum(d.drop for d in decisions)
    kept = [d for d in decisions if not d.drop]

    def close(count: int, total: int, p: float) -> bool:
        # Six standard deviations of a binomial count: a false alarm is never seen.
        return abs(count - total * p) <= 6 * math.sqrt(total * p * (1 - p)) + 1

    assert close(dropped, n, drop / 100)
    assert close(sum(d.reordered for d in kept), len(kept), reorder / 100)
    assert close(sum(d.duplicate for d in kept), len(kept), duplicate / 100)


def test_a_seed_gives_the_same_decisions():
    shape = Shape(delay_ms=50, jitter_ms=40, reorder_percent=30, duplicate_percent=20)
    first, second = Policy(shape, 5), Policy(shape, 5)
    assert [first.decide(i / 10) for i in range(100)] == [second.decide(i / 10) for i in range(100)]


@pytest.mark.parametrize(
    "fields",
    [{"delay_ms": -1}, {"jitter_ms": -0.5}, {"drop_percent": 101}, {"reorder_percent": -3}],
)
def test_a_shape_out_of_range_is_refused(fields):
    with pytest.raises(ValueError, match=next(iter(fields))):
        Shape(**fields)


def test_only_duplicates_need_whole_packets():
    assert Shape(duplicate_percent=1).needs_payload
    assert not Shape(delay_ms=100, jitter_ms=5, reorder_percent=50).needs_payload
