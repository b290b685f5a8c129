"""The fault families the generic nemesis draws from: every fault kind of the registry, grouped
by the layer it acts on.

A family is what an experiment file weighs and allows (`faults.generate.families`, `weights`);
generic.py draws each step's kind, target, timings and params within a family. This module is
data only: the model validates family names against it, generic.py draws from it, and
tests/unit/test_generic_nemesis.py holds every registry kind to exactly one family.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = [
    "DEFAULT_FAMILIES",
    "FAMILIES",
    "FAMILY_NAMES",
    "KIND_TARGETS",
    "REQUEST_PATHS",
    "ROLE_REQUESTS",
    "Family",
    "RequestPath",
    "family_of",
]


@dataclass(frozen=True)
class Family:
    """One family: the fault kinds it draws and the target roles each step may aim at."""

    name: str
    meaning: str
    kinds: tuple[str, ...]
    targets: tuple[str, ...]


# The roles a fault on one or more nodes may aim at; the validator drops those the cell lacks
# (a coordinator without transactions, a controller follower in zookeeper mode, ...).
NODE_ROLES: Final = (
    "leader",
    "follower",
    "followers",
    "successor",
    "controller",
    "controller-follower",
    "txn-coordinator",
    "group-coordinator",
    "random",
)

FAMILIES: Final[tuple[Family, ...]] = (
    Family(
        "process",
        "the broker process killed (SIGKILL), stopped (SIGTERM, controlled shutdown) or paused",
        ("kill", "stop", "pause"),
        NODE_ROLES,
    ),
    Family(
        "partition",
        "the target cut off from the other brokers, from the metadata quorum, or from everyone",
        ("partition",),
        NODE_ROLES,
    ),
    Family(
        "requests",
        "requests chosen by Kafka API key held on arrival at the target, or lost with the rest "
        "of their connection, on the client, broker-to-broker or controller path, on a share "
        "of the connections",
        ("delay", "drop-requests"),
        tuple(
            [
                "leader",
                "follower",
                "controller",
                "controller-follower",
                "txn-coordinator",
                "group-coordinator",
            ]
        ),
    ),
    Family(
        "packets",
        "the target's packets delayed, reordered, duplicated or dropped, to one kind of peer, "
        "or its bandwidth cut",
        ("delay", "reorder", "duplicate", "loss", "slow"),
        NODE_ROLES,
    ),
    Family(
        "disk",
        "the target's log directory slow, failing fsync, or full",
        ("slow-disk", "fsync-error", "disk-full"),
        NODE_ROLES,
    ),
    Family(
        "crash",
        "power loss: the target's unsynced writes undone (whole or torn) before SIGKILL, or "
        "every broker killed or powered off at once",
        ("lose-unsynced", "torn-write", "kill-all", "power-loss"),
        NODE_ROLES,
    ),
    Family(
        "membership",
        "the replica set or the KRaft quorum changed: a replica dropped or moved, a controller "
        "removed (dynamic quorum), a rolling restart",
        ("reassign", "remove-controller", "rolling-restart"),
        ("leader", "follower", "controller", "controller-follower", "all"),  # by KIND_TARGETS
    ),
    Family(
        "consumers",
        "a member of the workload's consumer group killed, paused or made to rebalance",
        ("consumer-kill", "consumer-pause", "consumer-rebalance"),
        ("consumer",),
    ),
    Family(
        "cascade",
        "two to all of one partition's replicas down one after another (followers then leader, "
        "or leader, successor, then any replica left), by the node faults of the process, "
        "partition and crash families allowed beside it (half the time one cause for all: a "
        "power loss takes the last one's page cache and kills the others), at most one taking "
        "its page cache, then back in a random order",
        (),  # its kinds are those families' (generic.cascade_menu)
        ("leader", "follower", "successor", "replica"),
    ),
    Family(
        "corruption",
        "a log file's tail cut or one bit flipped (not drawn unless listed: its outcome is not "
        "a documented guarantee)",
        ("truncate", "flip"),
        NODE_ROLES,
    ),
)
FAMILY_NAMES: Final = tuple(family.name for family in FAMILIES)
# The kinds whose targets are not their family's: a whole-cluster fault aims at `all`, a
# reassignment at the partition's replicas, a quorum change at one controller.
KIND_TARGETS: Final[dict[str, tuple[str, ...]]] = {
    "kill-all": ("all",),
    "power-loss": ("all",),
    "rolling-restart": ("all",),
    "reassign": ("leader", "follower"),
    "remove-controller": ("controller", "controller-follower"),
}
# The families drawn when the file lists none: all but corruption, which no guarantee covers.
DEFAULT_FAMILIES: Final = tuple(name for name in FAMILY_NAMES if name != "corruption")


@dataclass(frozen=True)
class RequestPath:
    """One path requests travel: who sends them (the shaper's `from`), the roles they arrive at,
    the API keys (shape.REQUESTS names) that travel it, and the timeouts a request held on it
    races (timeouts.cell_timeouts names): its sender's, and those the cluster keeps meanwhile."""

    name: str
    senders: tuple[str, ...]
    targets: tuple[str, ...]
    requests: tuple[str, ...]
    waits: tuple[str, ...]


REQUEST_PATHS: Final[tuple[RequestPath, ...]] = (
    RequestPath(
        "client-to-broker",
        ("clients",),
        ("leader", "follower", "txn-coordinator", "group-coordinator"),
        tuple(
            [
                "Produce",
                "Fetch",
                "ListOffsets",
                "Metadata",
                "OffsetCommit",
                "OffsetFetch",
                "FindCoordinator",
                "JoinGroup",
                "Heartbeat",
                "LeaveGroup",
                "SyncGroup",
                "InitProducerId",
                "AddPartitionsToTxn",
                "AddOffsetsToTxn",
                "EndTxn",
                "TxnOffsetCommit",
            ]
        ),
        # The client's request, socket and delivery timeouts; the coordinator's transaction
        # timeout and the group's session run on while a transaction's or a member's request
        # is held.
        (
            "request.timeout.ms",
            "socket.timeout.ms",
            "message.timeout.ms",
            "transaction.timeout.ms",
            "session.timeout.ms",
        ),
    ),
    RequestPath(
        "broker-to-broker",
        ("brokers",),
        ("leader", "follower", "txn-coordinator", "group-coordinator"),
        ("Fetch", "OffsetForLeaderEpoch", "WriteTxnMarkers", "AddPartitionsToTxn"),
        # A follower's fetch held past the lag bound leaves the ISR; a commit waits on that
        # replication; markers and a verification held race the transaction's timeout.
        ("replica.lag.time.max.ms", "offsets.commit.timeout.ms", "transaction.timeout.ms"),
    ),
    RequestPath(
        "controller",
        ("brokers", "controllers"),
        ("controller", "controller-follower"),
        tuple(
            [
                "Fetch",
                "Vote",
                "BeginQuorumEpoch",
                "EndQuorumEpoch",
                "AlterPartition",
                "BrokerRegistration",
                "BrokerHeartbeat",
            ]
        ),
        # Heartbeats race the broker's session, the quorum's fetches and votes its own
        # timeouts, an ISR change the lag bound.
        (
            "broker.session.timeout.ms",
            "controller.quorum.fetch.timeout.ms",
            "controller.quorum.election.timeout.ms",
            "zookeeper.session.timeout.ms",
            "replica.lag.time.max.ms",
        ),
    ),
)


# The requests of a path that reach a role as that role (by path name and role): the
# transaction coordinator's own requests, the group coordinator's, a partition leader's.
# One broker often plays several roles, so the others still reach it: the generic nemesis
# draws a role's own requests more often, never only them.
ROLE_REQUESTS: Final[dict[tuple[str, str], tuple[str, ...]]] = {
    ("client-to-broker", "leader"): ("Produce", "Fetch", "ListOffsets"),
    ("client-to-broker", "follower"): ("Metadata", "FindCoordinator"),
    ("client-to-broker", "txn-coordinator"): (
        "InitProducerId",
        "AddPartitionsToTxn",
        "AddOffsetsToTxn",
        "EndTxn",
    ),
    ("client-to-broker", "group-coordinator"): (
        "OffsetCommit",
        "OffsetFetch",
        "JoinGroup",
        "Heartbeat",
        "LeaveGroup",
        "SyncGroup",
        "TxnOffsetCommit",
    ),
    ("broker-to-broker", "leader"): ("Fetch", "OffsetForLeaderEpoch", "WriteTxnMarkers"),
    ("broker-to-broker", "txn-coordinator"): ("AddPartitionsToTxn",),
}


def family_of(kind: str, params: dict[str, object] | None = None) -> str:
    """The family a step of `kind` belongs to; a delay with `requests` is the requests family."""
    if kind == "delay":
        return "requests" if (params or {}).get("requests") else "packets"
    if kind == "drop-requests":
        return "requests"
    for family in FAMILIES:
        if kind in family.kinds:
            return family.name
    raise KeyError(f"fault {kind!r} is in no family")
