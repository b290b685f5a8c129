"""Page caches lost on several replicas within one outage: the judge says UNKNOWN (Kafka
documents loss for that only as a power loss of all), not a known bug whose evidence is only
a leader change, and not a violation."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, example, given
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


def caches_reason(rep: RepetitionVerdict, verdict: Verdict) -> str:
    """The one reason about page caches of a repetition judged `verdict`."""
    assert rep.verdict == verdict, rep.reasons
    (reason,) = [r for r in rep.reasons if "page cache" in r]
    return reason


def test_two_page_caches_lost_in_one_outage_before_0_11_are_unknown_not_kafka_1211():
    """KAFKA-1211's evidence (a leader change) is there too: the run cannot tell them apart."""
    rep = judged(config("0.10.2.2"), two_caches_lost(), p0=2291)
    reason = caches_reason(rep, Verdict.UNKNOWN)
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
    behind; the first sample without it is when it was seen out; a later sample (strictly:
    two samples of one instant have no order), after its heal, that shows it in is when it is
    back. Never seen out: a minute after the heal."""
    seen_out: float | None = None
    for t, in_isr in samples:
        if t < hit_s:
            continue
        if not in_isr and seen_out is None:
            seen_out = t
        elif in_isr and seen_out is not None and t > max(seen_out, healed_s):
            return t
    return None if seen_out is not None else healed_s + UNSEEN_RESYNC_S


# A heal 0.5 to 20 s after the hit, and up to six ISR samples (s after the hit, in or out).
HEALS = st.floats(0.5, 20)
MEMBERSHIPS = st.lists(st.tuples(st.floats(0.1, 120), st.booleans()), max_size=6)


@given(heal_after=HEALS, second_after=st.floats(0.5, 120), memberships=MEMBERSHIPS)
# Seen out and back in one instant, the second loss then too: no order, so not back yet.
@example(heal_after=1.0, second_after=2.0, memberships=[(2.0, False), (2.0, True)])
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


# p0 led by node 2, followed by nodes 3 and 1, as the discovery chunk had it.
LED_BY_2 = [{"partition": 0, "leader": 2, "isr": [2, 3, 1], "replicas": [2, 3, 1]}]


def both_torn(led_at: float, healed: float = 99.0) -> list[dict[str, Any]]:
    """One torn-write on nodes 2 and 3 at once at 42 s (the leader and a follower), healed at
    `healed`; node 3 leads from `led_at`."""
    torn = start(42, [2, 3], fault="torn-write", fault_id=3, class_kind="power-loss",
                 partitions=LED_BY_2)  # fmt: skip
    events = [
        sample(41, [(0, 2, [2, 3, 1])]),
        torn,
        end(healed, 3),
        sample(led_at, [(0, 3, [3, 1])]),
    ]
    return sorted(events, key=lambda e: e["ts_us"])


def test_one_fault_taking_two_replicas_caches_is_unknown_not_kafka_1211():
    """KAFKA-1211's discovery search on 0.10.2.2 (seed 0, fourth chunk): torn-write on the
    followers of p1, nodes 2 and 3, which led and followed p0; node 3 led p0 8 s later and
    220 acknowledged messages of p0 were gone. The judge had named KAFKA-1211 from the leader
    change alone."""
    rep = judged(config("0.10.2.2"), both_torn(led_at=50.5), p0=220)
    reason = caches_reason(rep, Verdict.UNKNOWN)
    assert "fault 3 (torn-write) took the page cache of nodes [2, 3] at once at t=42.0 s" in reason
    assert "KAFKA-1211's evidence is there too" in reason
    assert bugs_shown(rep) == frozenset()


def test_one_fault_on_one_replica_is_not_several():
    torn = start(42, [3], fault="torn-write", fault_id=3, class_kind="power-loss",
                 partitions=LED_BY_2)  # fmt: skip
    events = [torn, end(50, 3), sample(51, [(0, 3, [3, 1])])]
    assert judged(config("3.9.1"), events, p0=5).verdict == Verdict.VIOLATION


@given(heal_after=HEALS, led_after=st.floats(0.2, 120), memberships=MEMBERSHIPS)
def test_unknown_exactly_when_one_of_them_leads_before_both_are_back_in_sync(
    heal_after: float, led_after: float, memberships: list[tuple[float, bool]]
):
    """Nodes 2 and 3 lose their caches at once at 42 s; samples led by node 1 show node 3
    in or out of the ISR (node 2 always in); node 3 leads at `led_after`. On 3.9.1 no known
    bug explains the loss: UNKNOWN when the oracle's walk puts the lead before they were back
    in sync, else VIOLATION."""
    hit, healed, led = 42.0, 42.0 + heal_after, 42.0 + led_after
    isr_samples = sorted((hit + dt, in_isr) for dt, in_isr in memberships)
    assume(all(abs(t - led) > 1e-3 for t, _ in isr_samples))  # no two samples at once
    events = [
        start(hit, [2, 3], fault="torn-write", fault_id=3, class_kind="power-loss",
              partitions=LED_BY_2),
        end(healed, 3),
        *(sample(t, [(0, 1, [1, 2, 3] if in_isr else [1, 2])]) for t, in_isr in isr_samples),
        sample(led, [(0, 3, [3, 2, 1])]),
    ]  # fmt: skip
    events.sort(key=lambda e: e["ts_us"])
    walk = sorted([*isr_samples, (led, True)])
    back = resynced_at(walk, hit, healed)
    rep = judged(config("3.9.1"), events, p0=5)
    before = back is None or led < back
    assert rep.verdict == (Verdict.UNKNOWN if before else Verdict.VIOLATION), rep.reasons


def every_cache_lost(third_after: float = 0.5) -> list[dict[str, Any]]:
    """KIP-966's kafka-fsync search on 3.4.0 (seed 0, seventh chunk): a cascade took the page
    caches of p0's leader (node 3, lose-unsynced) at 16.1 s, of its successor (node 1) 0.3 s
    later and of the third replica (node 2, torn-write) `third_after` s after that; healed at
    80 to 106 s, node 1 led without 1,584 acknowledged messages."""
    second = 16.4
    return sorted(
        [
            cache_lost(16.1, 3, 1, "lose-unsynced"),
            cache_lost(second, 1, 2, "lose-unsynced"),
            cache_lost(second + third_after, 2, 3, "torn-write"),
            sample(40, [(0, 1, [1])]),
            end(80, 2),
            end(82, 3),
            end(106, 1),
        ],
        key=lambda e: e["ts_us"],
    )


def test_every_replicas_cache_lost_in_one_outage_is_a_power_loss_of_all():
    rep = judged(config("3.4.0"), every_cache_lost(), p0=1584)
    reason = caches_reason(rep, Verdict.EXPECTED_LOSS)
    assert "the page cache of every replica of p0 lost (fault 1 (lose-unsynced) on [3]" in reason
    assert "as in a power loss of all" in reason


def test_every_replicas_cache_lost_with_each_append_fsynced_is_still_forbidden():
    """With every append fsynced a power loss of all loses nothing acks=all acknowledged."""
    rep = judged(config("3.4.0", fsync_each_message=True), every_cache_lost(), p0=1584)
    assert rep.verdict == Verdict.VIOLATION, rep.reasons


def test_the_third_cache_lost_after_the_first_two_are_back_is_no_power_loss_of_all():
    """The first two healed at 80 and 82 s and were never seen out of the ISR: back a minute
    after their heals, before a loss at 150 s."""
    rep = judged(config("3.4.0"), every_cache_lost(third_after=150 - 16.4), p0=1584)
    assert rep.verdict != Verdict.EXPECTED_LOSS, rep.reasons


# Up to five power-loss hits on p0's replicas (nodes 3, 1 and 2): each on a non-empty set of
# them, at a time (s), healed some seconds later or never.
CACHE_HITS = st.lists(
    st.tuples(
        st.sets(st.sampled_from([1, 2, 3]), min_size=1),
        st.floats(0, 100),
        st.one_of(st.none(), st.floats(0.5, 100)),
    ),
    min_size=1,
    max_size=5,
)


@given(CACHE_HITS)
def test_expected_loss_exactly_when_the_caches_lost_cover_every_replica_at_one_time(
    hits: list[tuple[set[int], float, float | None]],
) -> None:
    """No sample shows a replica out of the ISR, so each is back in sync a minute after its
    heal (never when not healed). Oracle: at the start of some hit, every replica was hit at or
    before then by a hit not yet back in sync; then the loss is allowed, else not."""
    assume(len({t for _, t, _ in hits}) == len(hits))  # no two hits at one instant
    events: list[dict[str, Any]] = []
    for fault_id, (nodes, t, healed_after) in enumerate(hits, 1):
        events.append(start(t, sorted(nodes), fault="torn-write", fault_id=fault_id,
                            class_kind="power-loss", partitions=LED_BY_3))  # fmt: skip
        if healed_after is not None:
            events.append(end(t + healed_after, fault_id))
    events.sort(key=lambda e: e["ts_us"])

    def open_at(when: float) -> set[int]:
        return {
            n
            for nodes, t, healed_after in hits
            if t <= when and (healed_after is None or when < t + healed_after + UNSEEN_RESYNC_S)
            for n in nodes
        }

    covered = any(open_at(t) == {1, 2, 3} for _, t, _ in hits)
    rep = judged(config("3.9.1"), events, p0=5)
    assert (rep.verdict == Verdict.EXPECTED_LOSS) == covered, rep.reasons
