"""Page caches lost on several replicas within one outage: the judge says UNKNOWN (Kafka
documents loss for that only as a power loss of all), not a known bug whose evidence is only
a leader change, and not a violation."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis.judge.mechanisms import UNSEEN_RESYNC_S
from analysis.judge.outcomes import RepetitionVerdict, Verdict
from kafka_chaos.commands.shrink import bugs_shown
from tests.unit.test_mechanisms import end, judged, sample, start
from tests.unit.verdict_runs import CP

# p0 led by node 3, followed by nodes 1 and 2.
LED_BY_3 = [{"partition": 0, "leader": 3, "isr": [3, 1, 2], "replicas": [3, 1, 2]}]


def cache_lost(t_s: float, node: int, fault_id: int, fault: str) -> dict[str, Any]:
    """A fault of class kind power-loss on `node` (a replica of p0, led by node 3)."""
    return start(t_s, [node], fault=fault, fault_id=fault_id, class_kind="power-loss",
                 partitions=LED_BY_3)  # fmt: skip


def two_caches_lost(*, back_in_isr_at: float | None = None, led_by: int = 1) -> list[dict]:
    """Node 1's page cache torn at 10 s (healed at 12 s, out of the ISR at 13 s), leader
    3's lost at 16 s; node `led_by` leads from 18 s. Node 1 back in the ISR at
    `back_in_isr_at` when given."""
    back = [sample(back_in_isr_at, [(0, 3, [3, 1, 2])])] if back_in_isr_at else []
    return sorted(
        [
            cache_lost(10, 1, 1, "torn-write"),
            end(12, 1),
            sample(13, [(0, 3, [3, 2])]),
            *back,
            cache_lost(16, 3, 2, "lose-unsynced"),
            sample(18, [(0, led_by, [led_by, 2])]),
            end(20, 2),
        ],
        key=lambda e: e["ts_us"],
    )


def config(version: str, **extra: Any) -> dict[str, Any]:
    return {**CP, "enable_idempotence": False, "kafka_version": version, "fault_class": "mixed",
            **extra}  # fmt: skip


def test_two_page_caches_lost_in_one_outage_before_0_11_are_unknown_not_kafka_1211():
    """KAFKA-1211's evidence (a leader change) is there too: the run cannot tell them apart."""
    rep = judged(config("0.10.2.2"), two_caches_lost(), p0=2291)
    assert rep.verdict == Verdict.UNKNOWN, rep.reasons
    (reason,) = [r for r in rep.reasons if "page cache" in r]
    assert "fault 1 (torn-write) took the page cache of node(s) [1] at t=10.0 s" in reason
    assert "fault 2 (lose-unsynced) that of node(s) [3] at t=16.0 s" in reason
    assert "KAFKA-1211's evidence is there too" in reason


def test_a_replica_back_in_the_isr_before_the_second_loss_leaves_kafka_1211():
    rep = judged(config("0.10.2.2"), two_caches_lost(back_in_isr_at=14), p0=2291)
    assert rep.verdict == Verdict.KNOWN_BUG
    assert bugs_shown(rep) == {"KAFKA-1211"}


def test_a_bug_named_only_as_doubt_is_not_shown():
    """The UNKNOWN reason quotes KAFKA-1211's evidence; no finding judged it KNOWN-BUG."""
    rep = judged(config("0.10.2.2"), two_caches_lost(), p0=2291)
    assert any("known bug KAFKA-1211 of" in r for r in rep.reasons)
    assert rep.known_bugs == () and bugs_shown(rep) == frozenset()


def test_a_known_bug_beside_an_unknown_finding_is_still_shown():
    rep = RepetitionVerdict(
        Verdict.UNKNOWN,
        ("consumer group: 1 stuck", "known bug KAFKA-20634 of Kafka 4.3.0 (fixed in 4.3.1)"),
        None,
        known_bugs=("known bug KAFKA-20634 of Kafka 4.3.0 (fixed in 4.3.1)",),
    )
    assert bugs_shown(rep) == {"KAFKA-20634"}


@pytest.mark.parametrize("fsync", [True, False])
def test_with_every_append_fsynced_a_lost_page_cache_explains_nothing(fsync: bool):
    rep = judged(config("3.9.1", fsync_each_message=fsync), two_caches_lost(), p0=5)
    assert rep.verdict == (Verdict.VIOLATION if fsync else Verdict.UNKNOWN)


def test_when_a_replica_that_kept_its_cache_leads_the_loss_is_not_theirs():
    rep = judged(config("3.9.1"), two_caches_lost(led_by=2), p0=5)
    assert rep.verdict == Verdict.VIOLATION


def test_the_same_replica_losing_its_cache_twice_is_not_several():
    events = [cache_lost(10, 3, 1, "torn-write"), end(12, 1), cache_lost(14, 3, 2, "lose-unsynced"),
              sample(18, [(0, 3, [3, 2])]), end(20, 2)]  # fmt: skip
    assert judged(config("3.9.1"), events, p0=5).verdict == Verdict.VIOLATION


def resynced_at(samples: list[tuple[float, bool]], hit_s: float, healed_s: float) -> float | None:
    """The oracle, as a walk over node 1's ISR membership in time order: after its hit it is
    behind; a sample without it marks it seen out; a sample after its heal and after being
    seen out that shows it in is when it is back. Never seen out: a minute after the heal."""
    seen_out = False
    for t, in_isr in samples:
        if t < hit_s:
            continue
        if not in_isr:
            seen_out = True
        elif seen_out and t > healed_s:
            return t
    return None if seen_out else healed_s + UNSEEN_RESYNC_S


@given(
    heal_after=st.floats(0.5, 20),
    second_after=st.floats(0.5, 120),
    memberships=st.lists(st.tuples(st.floats(0.1, 120), st.booleans()), max_size=6),
)
def test_unknown_exactly_when_the_second_loss_comes_before_the_first_is_back_in_sync(
    heal_after: float, second_after: float, memberships: list[tuple[float, bool]]
):
    """On 3.9.1 no known bug explains it: UNKNOWN when the oracle says the losses overlap,
    else VIOLATION. Node 1 leads once the second loss has hit."""
    hit, healed, second = 10.0, 10.0 + heal_after, 10.0 + second_after
    isr_samples = sorted((10.0 + dt, in_isr) for dt, in_isr in memberships)
    events = [
        cache_lost(hit, 1, 1, "torn-write"),
        end(healed, 1),
        *(sample(t, [(0, 3, [3, 1, 2] if in_isr else [3, 2])]) for t, in_isr in isr_samples),
        cache_lost(second, 3, 2, "lose-unsynced"),
        sample(second + 0.001, [(0, 1, [1, 2])]),
    ]
    events.sort(key=lambda e: e["ts_us"])
    back = resynced_at([*isr_samples, (second + 0.001, True)], hit, healed)
    together = back is None or second < back
    rep = judged(config("3.9.1"), events, p0=5)
    assert rep.verdict == (Verdict.UNKNOWN if together else Verdict.VIOLATION), rep.reasons
