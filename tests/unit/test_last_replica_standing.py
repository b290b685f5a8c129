"""KIP-966's last replica standing, and its part 2 on releases with ELR: the leader's unflushed
tail lost while the replicas that held the data were down, then that leader elected again
(analysis/judge/mechanisms.py, PARTITION_EVIDENCE)."""

from __future__ import annotations

from typing import Any

import pytest

from analysis.judge.outcomes import Verdict
from tests.unit.test_mechanisms import ROLES, end, judged, judged_with_logs, sample, start
from tests.unit.verdict_runs import CP


def last_replica_events() -> list[dict[str, Any]]:
    """The followers stopped cleanly and back first; the leader's power lost, back later."""
    return [
        start(5, [2, 3], fault="stop", fault_id=1),
        sample(7, [(0, 1, [1])]),
        start(8, [1], fault="power-loss", fault_id=2, partitions=[{**ROLES[0], "isr": [1]}]),
        end(10, 1),
        end(23, 2),
        sample(25, [(0, 1, [1])]),
    ]


@pytest.mark.parametrize(("version", "verdict"), [("3.9.1", "KNOWN-BUG"), ("4.3.1", "VIOLATION")])
def test_the_last_replica_standing_is_known_before_elr(version: str, verdict: str):
    config = {**CP, "enable_idempotence": False, "kafka_version": version, "fault_class": "mixed"}
    rep = judged(config, last_replica_events(), p0=300)
    assert rep.verdict == verdict
    if verdict == "KNOWN-BUG":
        (reason,) = [r for r in rep.reasons if "KIP-966" in r]
        assert (
            "(fixed in 4.1.0)" in reason and "replicas [2, 3] stopped cleanly at t=5.0 s" in reason
        )
        assert (
            # The roles the nemesis read at the hit, the newest reading of them.
            "the ISR was [1] under leader 1 at t=8.0 s; fault 2 (power-loss) took that "
            "leader's unflushed tail at t=8.0 s; it came back at t=23.0 s and led" in reason
        )


def kafka_fsync_events(*, other_isr_member_down: bool = True) -> list[dict[str, Any]]:
    """redpanda-data/kafka-fsync: a follower killed, the ISR [1, 2] frozen (ZooKeeper down),
    then its follower and its leader killed and ten bytes cut off the leader's segment."""
    down = [start(15, [2], fault="kill", fault_id=3)] if other_isr_member_down else []
    return [
        start(5, [3], fault="kill", fault_id=1),
        sample(10, [(0, 1, [1, 2])]),
        start(13, [1], fault="kill", fault_id=4),
        start(
            14,
            [1],
            fault="truncate",
            fault_id=5,
            class_kind="power-loss",
            partitions=[{**ROLES[0], "isr": [1, 2]}],
        ),
        *down,
        end(30, 4),
        sample(32, [(0, 1, [1])]),
        end(35, 1),
        end(45, 3),
        end(46, 5),
    ]


@pytest.mark.parametrize(("version", "verdict"), [("3.4.0", "KNOWN-BUG"), ("4.3.1", "VIOLATION")])
def test_a_killed_isr_and_a_cut_leader_segment_is_the_last_replica_standing(
    version: str, verdict: str
):
    config = {**CP, "enable_idempotence": False, "kafka_version": version, "fault_class": "mixed"}
    rep = judged(config, kafka_fsync_events(), p0=1)
    assert rep.verdict == verdict
    if verdict == "KNOWN-BUG":
        (reason,) = [r for r in rep.reasons if "KIP-966" in r]
        assert "replicas [3] killed at t=5.0 s; replicas [2] killed at t=15.0 s" in reason
        assert "the ISR was [1, 2] under leader 1 at t=14.0 s; fault 5 (truncate)" in reason
        assert "it came back at t=30.0 s and led" in reason


UNCLEAN_LAST_KNOWN = (
    "[2026] INFO [QuorumController id=101] Replayed PartitionRecord for new partition chaos-0 "
    "with PartitionRegistration(isr=[1, 2, 3], elr=[], lastKnownElr=[], leader=1)\n"
    "[2026] INFO [QuorumController id=101] UNCLEAN partition change for chaos-0 with topic ID "
    "x: isr: [] -> [1], leader: -1 -> 1, elr: [2] -> [], lastKnownElr: [1] -> []\n"
)


@pytest.mark.parametrize(("log", "verdict"), [(UNCLEAN_LAST_KNOWN, "KNOWN-BUG"), ("", "VIOLATION")])
def test_on_elr_releases_the_last_known_leader_elected_uncleanly_is_kip_966_part_2(
    tmp_path, log: str, verdict: str
):
    """With ELR, only the controller's unclean election of the last known leader explains it."""
    config = {**CP, "enable_idempotence": False, "kafka_version": "4.3.1", "fault_class": "mixed"}
    rep = judged_with_logs(
        tmp_path, {"controller-101.log": log}, config, kafka_fsync_events(), p0=1
    )
    assert rep.verdict == verdict
    if verdict == "KNOWN-BUG":
        (reason,) = [r for r in rep.reasons if "KIP-966 part 2" in r]
        assert "(open upstream: no release fixes it yet)" in reason
        assert "it came back at t=30.0 s and led; the controller: controller-101: " in reason
        assert "lastKnownElr: [1] -> []" in reason


def test_a_cut_leader_that_never_led_again_is_no_known_bug():
    """Another replica led after it came back: the cut tail is not what Kafka kept."""
    events = [*kafka_fsync_events()[:-5], end(30, 4), sample(32, [(0, 2, [2])])]
    config = {**CP, "enable_idempotence": False, "kafka_version": "3.4.0", "fault_class": "mixed"}
    assert judged(config, events, p0=1).verdict == Verdict.VIOLATION


def test_a_cut_leader_segment_while_another_isr_member_runs_is_no_known_bug():
    """The other ISR member was up: it could have led, so nothing documented explains it."""
    config = {**CP, "enable_idempotence": False, "kafka_version": "3.4.0", "fault_class": "mixed"}
    rep = judged(config, kafka_fsync_events(other_isr_member_down=False), p0=1)
    assert rep.verdict == Verdict.VIOLATION


def test_the_last_replica_standing_counts_stopped_leaders_too():
    """The clean stop also hit p1's leader (leadership moved to node 1 cleanly)."""
    events = [
        start(5, [2, 3], fault="stop", fault_id=1),
        sample(7, [(1, 1, [1])]),
        start(8, [1], fault="power-loss", fault_id=2, partitions=[
            {**ROLES[1], "leader": 1, "isr": [1]}
        ]),
        end(20, 2),
        sample(22, [(1, 1, [1])]),
    ]  # fmt: skip
    config = {**CP, "enable_idempotence": False, "kafka_version": "3.9.1", "fault_class": "mixed"}
    assert judged(config, events, p1=80).verdict == Verdict.KNOWN_BUG


def disk_halted_events() -> list[dict[str, Any]]:
    """The followers' log directories fail (they halt), the ISR shrinks to the leader, whose
    unflushed tail a power loss takes; it comes back and leads."""
    return [
        start(5, [2, 3], fault="disk-full", fault_id=1, class_kind="disk-error"),
        sample(7, [(0, 1, [1])]),
        start(8, [1], fault="lose-unsynced", fault_id=2, class_kind="power-loss",
              partitions=[{**ROLES[0], "isr": [1]}]),
        end(10, 1),
        end(23, 2),
        sample(25, [(0, 1, [1])]),
    ]  # fmt: skip


@pytest.mark.parametrize("version", ["0.10.2.2", "3.9.1"])
def test_followers_halted_by_their_disks_leave_the_last_replica_standing(version: str):
    """KIP-966, also before 0.11, where a leader change alone would read as KAFKA-1211: the
    tail went with the last leader's page cache, not with a truncation to its watermark."""
    config = {**CP, "enable_idempotence": False, "kafka_version": version, "fault_class": "mixed"}
    rep = judged(config, disk_halted_events(), p0=300)
    assert rep.verdict == Verdict.KNOWN_BUG
    (reason,) = [r for r in rep.reasons if "KIP-966" in r]
    assert "replicas [2, 3] halted by a failing log directory at t=5.0 s" in reason
    assert not any("KAFKA-1211" in r for r in rep.reasons)


def sampler_blind_events(*, snapshot_error: str | None = None) -> list[dict[str, Any]]:
    """KIP-966's kafka-fsync search on 3.4.0 (seed 2, first chunk): leader 3 paused at 45 s,
    follower 2 killed at 46 s; node 1 then led alone, and a torn write took its tail at 52 s.
    With every broker paused or down the sampler read nothing from 54 s until node 1, back at
    115 s, led again; its last reading (54 s) still showed leader 3. Only the nemesis' roles at
    the torn write (`snapshot_error`: it could not read them, and repeated older ones) show
    node 1 leading alone."""
    alone = [{**ROLES[0], "leader": 1, "isr": [1]}]
    torn = start(52, [1], fault="torn-write", fault_id=3, class_kind="power-loss",
                 partitions=alone)  # fmt: skip
    if snapshot_error:
        torn["partitions_error"] = snapshot_error
    return [
        sample(44, [(0, 3, [2, 3, 1])]),
        start(45, [3], fault="pause", fault_id=1),
        start(46, [2], fault="kill", fault_id=2),
        sample(51, [(0, 3, [2, 3, 1])]),
        torn,
        end(110, 2),
        end(113, 1),
        end(115, 3),
        sample(117, [(0, 1, [1])]),
        sample(118, [(0, 1, [1, 3, 2])]),
    ]


def test_the_nemesis_roles_at_the_hit_show_the_last_replica_standing_the_sampler_missed():
    config = {**CP, "enable_idempotence": False, "kafka_version": "3.4.0", "fault_class": "mixed"}
    rep = judged(config, sampler_blind_events(), p0=1)
    assert rep.verdict == "KNOWN-BUG", rep.reasons
    (reason,) = [r for r in rep.reasons if "KIP-966" in r]
    assert "replicas [2] killed at t=46.0 s; the ISR was [1] under leader 1 at t=52.0 s" in reason
    # Roles the nemesis could not read are no reading: the sampler's stale leader 3 stands.
    stale = judged(config, sampler_blind_events(snapshot_error="timed out"), p0=1)
    assert stale.verdict == "VIOLATION", stale.reasons


def follower_first_events(*, mates_stay_up: bool = False) -> list[dict[str, Any]]:
    """A discovery run on 0.10.2.2: follower 1 of p0 (leader 2, ISR [2, 1, 3]) loses its
    unflushed tail (torn-write) and restarts later; followers 3 and then leader 2 are stopped
    cleanly 3.5 and 4.6 s after, before the cluster dropped node 1 from the ISR; node 1 comes
    back first, alone, and leads. With `mates_stay_up`, nodes 2 and 3 are back before it."""
    back = 10 if mates_stay_up else 60
    return [
        sample(-1, [(0, 2, [2, 1, 3])]),
        start(0, [1], fault="torn-write", fault_id=1, class_kind="power-loss",
              partitions=[{**ROLES[0], "leader": 2, "isr": [2, 1, 3]}]),
        start(3.5, [3], fault="stop", fault_id=2,
              partitions=[{**ROLES[0], "leader": 2, "isr": [2, 1, 3]}]),
        start(4.6, [2], fault="stop", fault_id=3,
              partitions=[{**ROLES[0], "leader": 2, "isr": [2, 1]}]),
        end(back, 2),
        end(back, 3),
        end(40, 1),
        sample(43, [(0, 1, [1])]),
    ]  # fmt: skip


def test_an_isr_follower_that_lost_its_tail_and_came_back_alone_is_the_last_replica_standing():
    """Not KAFKA-1211: the follower did not truncate to its high watermark, its tail went with
    its page cache; it was the only member of the ISR to come back, so Kafka elected it (what
    KIP-966's ELR prevents), on any release before ELR."""
    config = {
        **CP,
        "enable_idempotence": False,
        "kafka_version": "0.10.2.2",
        "fault_class": "mixed",
    }
    rep = judged(config, follower_first_events(), p0=5)
    assert rep.verdict == Verdict.KNOWN_BUG
    (reason,) = [r for r in rep.reasons if "KIP-966" in r]
    assert "took ISR member [1]'s unflushed tail" in reason and "came back" in reason
    assert not any("KAFKA-1211" in r for r in rep.reasons)


def test_a_follower_that_lost_its_tail_while_its_isr_mates_were_up_is_not_the_last_standing():
    """Nodes 2 and 3 were back before node 1: it could refetch its tail, so KIP-966 does not
    explain a loss; a leader change after the hit is KAFKA-1211's evidence on 0.10.2.2."""
    config = {
        **CP,
        "enable_idempotence": False,
        "kafka_version": "0.10.2.2",
        "fault_class": "mixed",
    }
    rep = judged(config, follower_first_events(mates_stay_up=True), p0=5)
    assert not any("KIP-966" in r for r in rep.reasons)


@pytest.mark.parametrize("sampled_after_final_heal", [True, False])
def test_a_last_replica_whose_own_restart_failed_leads_after_the_final_heal(
    sampled_after_final_heal: bool,
):
    """kafka-fsync's 3.4.0 cell as a pinned replay met it: both followers killed, the leader,
    alone in the ISR, loses its page cache and is brought back 3 s later, before its old
    ZooKeeper session expired, so it exits at once; it returns at the final heal, after the
    workload, and leads with an empty log. The sampler records on through the read-back's wait
    for a full ISR so that the judge sees it lead; a run whose samples stopped at the heal
    shows no leader after the hit, and the loss has no mechanism (VIOLATION)."""
    config = {**CP, "enable_idempotence": False, "kafka_version": "3.4.0", "fault_class": "mixed"}
    events = [
        start(1.0, [1], fault="kill", fault_id=1),
        start(1.2, [3], fault="kill", fault_id=2),
        sample(8, [(0, 2, [2])]),
        start(
            18,
            [2],
            fault="lose-unsynced",
            fault_id=3,
            class_kind="power-loss",
            partitions=[{**ROLES[0], "leader": 2, "isr": [2]}],
        ),
        end(20.8, 3),
        end(23, 1),
        sample(30, [(0, None, [2])]),
        end(84, 2),
        sample(180, [(0, None, [2])]),
        *([sample(183, [(0, 2, [2, 1, 3])])] if sampled_after_final_heal else []),
    ]
    rep = judged(config, events, p0=93)
    if not sampled_after_final_heal:
        assert rep.verdict == Verdict.VIOLATION
        return
    assert rep.verdict == Verdict.KNOWN_BUG
    (reason,) = [r for r in rep.reasons if "KIP-966" in r]
    assert "the ISR was [2] under leader 2 at t=18.0 s" in reason and "and led" in reason
