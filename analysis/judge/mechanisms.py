"""Which documented mechanism explains a partition's loss, with the evidence; and the known
loss bugs of old Kafka releases (docs/kafka-reliability.md, "Known loss bugs by version").

The judge asks, for every partition that lost acknowledged messages: what hit it (the roles
its replicas had when each fault began, analysis.judge.history), what the documentation
allows for that, and which mechanism the evidence shows: acks=1 truncation after a leader
fault, an acks=all write acknowledged by a leader alone, an unclean election, a power loss.
A loss the documentation forbids may still be a known bug of the Kafka that ran: then it is
KNOWN-BUG, with the JIRA and the release that fixed it, never EXPECTED-LOSS or VIOLATION.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from analysis.judge.broker_logs import log_evidence
from analysis.judge.guarantees import (
    ALLOWED,
    FORBIDDEN_UNLESS_ISR_SHRANK,
    UNDOCUMENTED,
    guarantee_for,
)
from analysis.judge.history import (
    LEADER,
    WHOLE,
    FaultHit,
    IsrSample,
    LeaderChange,
    PartitionHistory,
    partition_fault_class,
    timeline_t,
)
from analysis.judge.known_bugs import first_shown
from analysis.model.anomalies import CountName
from harness.rundir.config import CellConfig
from harness.rundir.fault_classes import ALL_POWER_LOSS

__all__ = [
    "PARTITION_EVIDENCE",
    "PartitionJudgement",
    "caches_lost",
    "judge_partition",
]

Outcome = Literal["allowed", "known-bug", "unknown", "violation"]
# How brokers log an ISR shrink: the leader's request (every release) and its outcome (2.7+).
ISR_SHRINK_NEEDLES: Final = ("Shrinking ISR", "ISR updated to")
# How an unclean election is logged: the KRaft controller, and the ZooKeeper-mode controller.
UNCLEAN_NEEDLES: Final = ("UNCLEAN partition change", "There's potential data loss")
FAST_FAILOVER_S: Final = 60.0  # two leader changes this close count as successive failovers


@dataclass(frozen=True)
class PartitionJudgement:
    """What the judge concluded about one partition's loss (or rewritten offsets)."""

    partition: int
    fault_class: str  # by the roles its replicas had (analysis.judge.history)
    outcome: Outcome
    reason: str  # the mechanism and its evidence, or why nothing documented explains it
    reference: str | None = None  # a known bug's JIRA (or KIP, for a design fix)


@dataclass(frozen=True)
class _Context:
    """What explanations read besides the partition's history."""

    config: CellConfig
    origin_us: float
    run_dir: str
    topic: str

    def t(self, ts_us: float) -> str:
        """'t=12.0 s' on the run's timeline."""
        return timeline_t(ts_us, self.origin_us)

    def log(self, partition: int, needles: Sequence[str], before: str = "") -> str:
        """The first broker-log line naming the partition and one of `needles`
        (log_evidence), after `before`; '' when none does."""
        line = log_evidence(self.run_dir, self.topic, partition, needles)
        return f"{before}{line}" if line else ""


# ---------------------------------------------------------------------------------------------
# The evidence of the known loss bugs (analysis.judge.known_bugs) in one partition's history


def _moved(history: PartitionHistory, context: _Context) -> str:
    """A leader change to a live replica after some fault hit the partition, unless the last
    replica standing explains it (its tail went with its page cache, not with a truncation
    to its high watermark: KIP-966's evidence, which a leader change also shows)."""
    if _last_replica_standing(history, context):
        return ""
    first_hit = min((h.ts_us for h in history.hits), default=None)
    for change in history.leader_changes:
        if change.new is not None and first_hit is not None and change.ts_us >= first_hit:
            return f"leader moved {change.label} at {context.t(change.ts_us)}"
    return ""


def _moved_twice(history: PartitionHistory, context: _Context) -> str:
    """Two leader changes to live replicas within FAST_FAILOVER_S."""
    moves = [c for c in history.leader_changes if c.new is not None]
    for first, second in itertools.pairwise(moves):
        if (second.ts_us - first.ts_us) / 1e6 <= FAST_FAILOVER_S:
            return (
                f"leader moved {first.label} at {context.t(first.ts_us)}, then "
                f"{second.label} at {context.t(second.ts_us)}"
            )
    return ""


DOWN_KINDS: Final = ("stop", "kill", "power-loss")  # hits that take a replica down
# Hits that take down replicas holding the data: a broker halts when its only log directory
# fails (disk-error), as it does when killed.
TAKEN: Final = {
    "stop": "stopped cleanly",
    "kill": "killed",
    "disk-error": "halted by a failing log directory",
}


def _last_replica_standing(history: PartitionHistory, context: _Context) -> str:
    """A member of the partition's ISR (its leader, or a follower the cluster had not yet
    dropped) lost its unflushed tail (a hit of kind power-loss), the other members went down
    (stopped or killed) before or after, and it came back while every other member of that
    ISR was still down, and led: the only replica Kafka could elect, without the tail the
    others held."""
    for hit in history.hits:
        if hit.kind != "power-loss":
            continue
        led = [s for s in history.samples if s.ts_us <= hit.ts_us and s.leader is not None]
        if hit.at_start is not None and hit.at_start.leader is not None:
            led.append(hit.at_start)  # the freshest reading, where the sampler may have none
        own = set(hit.nodes)
        if not led or not own & ({led[-1].leader} | set(led[-1].isr)):
            continue
        last = led[-1]
        # It came back at the first heal, after the hit, of a fault that had it down (a
        # power loss restarts it at its own heal; a cut file waits for the kill's).
        returned = min(
            (h.healed_us for h in history.hits
             if h.kind in DOWN_KINDS and own & set(h.nodes)
             and h.healed_us is not None and h.healed_us > hit.ts_us),
            default=None,
        )  # fmt: skip
        if returned is None or not any(
            s.ts_us > returned and s.leader in own for s in history.samples
        ):
            continue
        # The replicas that held the data went down before it returned; those of its last
        # ISR were still down then (the others, out of the ISR, could not be elected).
        taken = [
            h for h in history.hits
            if h.kind in TAKEN and set(h.nodes) - own and h.ts_us <= returned
        ]  # fmt: skip
        still_down = {
            n for h in taken if h.healed_us is None or h.healed_us > returned for n in h.nodes
        }
        if taken and set(last.isr) - own <= still_down:
            how = "; ".join(
                f"replicas {list(h.nodes)} {TAKEN[h.kind]} at {context.t(h.ts_us)}" for h in taken
            )
            whose = "that leader's" if last.leader in own else f"ISR member {sorted(own)}'s"
            return (
                f"{how}; the ISR was {list(last.isr)} under leader {last.leader} at "
                f"{context.t(last.ts_us)}; fault {hit.fault_id} ({hit.fault}) took {whose} "
                f"unflushed tail at {context.t(hit.ts_us)}; it came back at "
                f"{context.t(returned)} and led"
            )
    return ""


# With no sample showing a replica out of the ISR after it lost its page cache, it counts as
# not yet back in sync for this long after its heal (a replica refetches its tail in seconds
# at the harness's rates; a minute is the margin the judge allows fast failovers too).
UNSEEN_RESYNC_S: Final = 60.0


def _caches_lost_together(history: PartitionHistory, context: _Context) -> str:
    """Page caches lost on several replicas within one outage: one power-loss hit (a power
    loss of a node, lose-unsynced, torn-write, truncate) on several replicas, one of which
    led before they were back in sync; or such a hit on a replica while another replica
    whose page cache an earlier hit took was not yet back in sync, and one of them led
    afterwards. Kafka documents that losing the page cache of several replicas at once
    exposes its reliance on replicas rather than the disk, and no outcome for that case
    short of a power loss of all: the judge reads it as UNKNOWN. '' when no two such hits
    overlap (a power loss of every broker has its own row)."""
    lost = [h for h in history.hits if h.kind == "power-loss" and h.role != WHOLE]
    for hit in lost:  # one fault on several replicas (torn-write on `followers`, say)
        back = _back_in_sync(history, hit)
        if len(hit.nodes) > 1 and any(
            hit.ts_us < s.ts_us < (back or math.inf) and s.leader in hit.nodes
            for s in history.samples
        ):
            return (
                f"fault {hit.fault_id} ({hit.fault}) took the page cache of nodes "
                f"{list(hit.nodes)} at once at {context.t(hit.ts_us)}; one of them led before "
                "they were back in sync"
            )
    for earlier, later in itertools.combinations(lost, 2):  # hits come in time order
        if set(later.nodes) <= set(earlier.nodes) or later.ts_us < earlier.ts_us:
            continue
        back = _back_in_sync(history, earlier)
        together = set(earlier.nodes) | set(later.nodes)
        led = any(s.ts_us > later.ts_us and s.leader in together for s in history.samples)
        if (back is None or later.ts_us < back) and led:
            return (
                f"fault {earlier.fault_id} ({earlier.fault}) took the page cache of node(s) "
                f"{list(earlier.nodes)} at {context.t(earlier.ts_us)} and fault "
                f"{later.fault_id} ({later.fault}) that of node(s) {list(later.nodes)} at "
                f"{context.t(later.ts_us)}, before the first was back in sync; one of them "
                "led afterwards"
            )
    return ""


def _back_in_sync(history: PartitionHistory, hit: FaultHit) -> float | None:
    """When the replicas `hit` took were back in sync: the first sample after its heal that
    shows them all in the ISR, after one (since the hit) that showed one of them out; when
    no sample showed them out, UNSEEN_RESYNC_S after the heal. None when it was never healed
    or never back."""
    if hit.healed_us is None:
        return None
    nodes = set(hit.nodes)
    after = [s for s in history.samples if s.ts_us >= hit.ts_us]
    out = next((s.ts_us for s in after if not nodes <= set(s.isr)), None)
    if out is None:
        return hit.healed_us + UNSEEN_RESYNC_S * 1e6
    return next(
        (s.ts_us for s in after if s.ts_us > max(out, hit.healed_us) and nodes <= set(s.isr)),
        None,
    )


def _every_cache_lost(history: PartitionHistory) -> tuple[FaultHit, ...]:
    """The power-loss hits that took the page cache of every replica of the partition, each
    before the replicas hit earlier were back in sync: what a power loss of all does to it,
    however many faults it took. () when no such hits cover every replica."""
    lost = [h for h in history.hits if h.kind == "power-loss" and h.role != WHOLE]
    for last in lost:
        open_then = [
            h for h in lost
            if h.ts_us <= last.ts_us
            and ((back := _back_in_sync(history, h)) is None or back > last.ts_us)
        ]  # fmt: skip
        if last.replicas and set(last.replicas) <= {n for h in open_then for n in h.nodes}:
            return tuple(open_then)
    return ()


def caches_lost(history: PartitionHistory, config: CellConfig, origin_us: float) -> str:
    """How the page caches of the partition's replicas were lost together, in words: every
    replica's (a power loss of all, for this partition) or several within one outage
    (_caches_lost_together); '' when neither, or when every append was fsynced."""
    if config.fsync_each_message:
        return ""
    context = _Context(config, origin_us, "", "")
    if every := _every_cache_lost(history):
        hits = ", ".join(f"fault {h.fault_id} ({h.fault}) on {list(h.nodes)}" for h in every)
        return f"the page cache of every replica of p{history.partition} lost ({hits})"
    return _caches_lost_together(history, context)


def _last_known_leader_elected(history: PartitionHistory, context: _Context) -> str:
    """The last replica standing, where the controller logged the unclean election of the
    last known leader (ELR's fallback when no replica is eligible)."""
    standing = _last_replica_standing(history, context)
    if not standing:
        return ""
    line = context.log(history.partition, UNCLEAN_NEEDLES[:1])
    return f"{standing}; the controller: {line}" if "lastKnownElr" in line else ""


# The known bugs whose evidence already accounts for a replica's lost page cache.
TAIL_BUGS: Final = ("KIP-966", "KIP-966 part 2")

# Per loss row of the known-bug table, by reference: what one partition's history must show
# ('' when it does not), given the context.
PARTITION_EVIDENCE: Final[dict[str, Callable[[PartitionHistory, _Context], str]]] = {
    "KAFKA-1211": _moved,
    "KAFKA-6361": _moved_twice,
    "KIP-966": _last_replica_standing,
    "KIP-966 part 2": _last_known_leader_elected,
}


# ---------------------------------------------------------------------------------------------
# Mechanisms where the documentation allows loss


def _unclean_election(history: PartitionHistory) -> LeaderChange | None:
    """A leader change to a replica outside the ISR the previous sample showed."""
    for change in history.leader_changes:
        if change.new is not None and change.isr_before and change.new not in change.isr_before:
            return change
    return None


def _leader_hit_text(history: PartitionHistory, context: _Context) -> str | None:
    hit = next((h for h in history.hits if h.role in (LEADER, WHOLE)), None)
    if hit is None:
        return None
    nodes = ", ".join(str(n) for n in hit.nodes) or "every broker"
    return (
        f"fault {hit.fault_id} ({hit.fault}) hit node {nodes}, leader of p{history.partition}, "
        f"at {context.t(hit.ts_us)}"
    )


def _allowed_mechanism(history: PartitionHistory, context: _Context, cls: str) -> str:
    """The documented mechanism behind an allowed loss, with the evidence found."""
    config = context.config
    p = history.partition
    if config.acks == "0":
        return "acks=0: the producer never waits for the broker to write the message"
    if cls == ALL_POWER_LOSS and (chain := _every_cache_lost(history)):
        faults = ", ".join(
            f"fault {h.fault_id} ({h.fault}) on {list(h.nodes)} at {context.t(h.ts_us)}"
            for h in chain
        )
        return (
            f"the page cache of every replica of p{p} lost ({faults}), none back in sync "
            "before the last: as in a power loss of all, what Kafka had not flushed is gone"
        )
    if cls == ALL_POWER_LOSS:
        hits = [h for h in history.hits if h.kind == "power-loss"]
        when = f" at {context.t(hits[0].ts_us)}" if hits else ""
        return f"power loss{when}: the replicas lost the page cache Kafka had not flushed"
    if config.unclean_leader_election and (change := _unclean_election(history)) is not None:
        return (
            f"unclean election: node {change.new} became leader of p{p} at "
            f"{context.t(change.ts_us)} though the last ISR seen was "
            f"{list(change.isr_before)}; what only the ISR had acknowledged is gone"
        )
    if config.unclean_leader_election and (line := context.log(p, UNCLEAN_NEEDLES)):
        return (
            f"unclean election of p{p}, logged as {line}; what only the ISR had acknowledged "
            "is gone"
        )
    leader_hit = _leader_hit_text(history, context)
    if config.acks == "1" and leader_hit:
        return (
            f"acks=1 truncation{_during_membership_change(history, context)}: {leader_hit}; "
            "what it acknowledged before its followers copied it was truncated once another "
            "replica led"
        )
    if config.unclean_leader_election:
        return f"unclean.leader.election.enable=true while faults hit several replicas of p{p}"
    return leader_hit or f"fault class {cls} of p{p}"


def _during_membership_change(history: PartitionHistory, context: _Context) -> str:
    """' during a reassignment (...)' when a reassign fault moved this partition's replicas,
    and/or ' during a controller quorum change (...)' when the run changed the KRaft quorum's
    voters, naming each and when; '' otherwise. A reassignment hands leadership over and
    changes the replica set and ISR while writes go on, a quorum change moves the metadata
    log's leadership: the membership change is part of the mechanism."""
    moves = [h for h in history.hits if h.kind == "reassign"]
    text = ""
    if moves:
        listed = ", ".join(
            f"fault {h.fault_id} ({h.fault}) moving p{history.partition}'s replicas off node(s) "
            f"{list(h.nodes)} at {context.t(h.ts_us)}"
            for h in moves
        )
        text += f" during a reassignment ({listed})"
    if history.quorum_changes:
        listed = ", ".join(
            f"fault {h.fault_id} ({h.fault}) taking controller(s) {list(h.nodes)} out of the "
            f"voters at {context.t(h.ts_us)}"
            for h in history.quorum_changes
        )
        text += f" during a controller quorum change ({listed})"
    return text


def _isr_alone(history: PartitionHistory) -> tuple[IsrSample, FaultHit] | None:
    """A fault on the leader while the last sample before it showed that leader alone in
    the ISR, with that sample; None when no leader fault found its leader alone."""
    for hit in history.leader_hits():
        before = [s for s in history.samples if s.ts_us < hit.ts_us]
        if before and len(before[-1].isr) == 1:
            alone = before[-1]
            if hit.role == WHOLE or alone.isr[0] in hit.nodes:
                return alone, hit
    return None


# ---------------------------------------------------------------------------------------------
# The judgement of one partition


def judge_partition(
    history: PartitionHistory,
    config: CellConfig,
    *,
    origin_us: float,
    run_dir: str,
    topic: str,
    what: str = "loss",
) -> PartitionJudgement:
    """Judge what partition `history.partition` lost (`what`: loss or rewritten offsets) by
    the roles its replicas had, the documentation, the mechanisms seen and known bugs."""
    context = _Context(config, origin_us, run_dir, topic)
    cls = partition_fault_class(history.hits)
    if _every_cache_lost(history):  # a power loss of all, for this partition's replicas
        cls = ALL_POWER_LOSS
    guarantee = guarantee_for(config.model_copy(update={"fault_class": cls}))
    p = history.partition
    if guarantee.loss == ALLOWED:
        reason = f"{_allowed_mechanism(history, context, cls)} ({guarantee.citation})"
        return PartitionJudgement(p, cls, "allowed", reason)
    if guarantee.loss == UNDOCUMENTED:
        return PartitionJudgement(p, cls, "unknown", f"p{p} ({cls}): {guarantee.citation}")
    if guarantee.loss == FORBIDDEN_UNLESS_ISR_SHRANK and (found := _isr_alone(history)):
        alone, hit = found
        logged = context.log(p, ISR_SHRINK_NEEDLES, "; log: ")
        reason = (
            f"acknowledged by the leader alone: p{p}'s ISR was {list(alone.isr)} at "
            f"{context.t(alone.ts_us)}{logged}, then fault {hit.fault_id} ({hit.fault}) hit "
            f"that leader at {context.t(hit.ts_us)} ({guarantee.citation})"
        )
        return PartitionJudgement(p, cls, "allowed", reason)
    bug = _known_bug(history, context, cls)
    together = "" if config.fsync_each_message else _caches_lost_together(history, context)
    if together and (bug is None or bug.reference not in TAIL_BUGS):
        also = f"; {bug.reference}'s evidence is there too ({bug.reason})" if bug else ""
        reason = (
            f"p{p} ({cls}): {together}: Kafka documents loss for the page cache lost on "
            f"several replicas at once only as a power loss of all{also}; "
            f"{guarantee.citation}"
        )
        return PartitionJudgement(p, cls, "unknown", reason)
    if bug:
        return bug
    roles = "; ".join(
        f"fault {h.fault_id} ({h.fault}) on {h.role} {list(h.nodes) or 'all'} "
        f"at {context.t(h.ts_us)}"
        for h in history.hits
    )
    reason = (
        f"p{p} ({cls}: {roles or 'no fault hit its replicas'}): no documented mechanism "
        f"explains this {what}{_during_membership_change(history, context)}; "
        f"{guarantee.citation}"
    )
    return PartitionJudgement(p, cls, "violation", reason)


def _known_bug(history: PartitionHistory, context: _Context, cls: str) -> PartitionJudgement | None:
    """The first known bug of this Kafka whose evidence the partition (of fault class `cls`)
    shows."""
    version = context.config.kafka_version
    found = first_shown(
        CountName.LOSS,
        version,
        None,
        lambda bug: PARTITION_EVIDENCE[bug.reference](history, context),
    )
    if found is None:
        return None
    bug, evidence = found
    logged = context.log(history.partition, bug.log_needles, "; log: ")
    reason = f"{bug.reason(version)}; p{history.partition}: {evidence}{logged}"
    return PartitionJudgement(history.partition, cls, "known-bug", reason, bug.reference)
