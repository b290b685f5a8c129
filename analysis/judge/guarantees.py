"""What Kafka documents about loss, duplicates and order, keyed by configuration and fault.

Every row traces back to docs/kafka-reliability.md (in this repository), section "Expected
outcome per configuration and fault"; its citation quotes the line, so a verdict can say why
it was reached.
The table is data: the first row that matches a (configuration, fault class) pair decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Final, Literal

from analysis.model.anomalies import AnomalyName
from harness.rundir.config import Acks, CellConfig
from harness.rundir.fault_classes import CLASS_KINDS

__all__ = [
    "ALLOWED",
    "CONSUMER_DELIVERY",
    "FORBIDDEN",
    "FORBIDDEN_UNLESS_ISR_SHRANK",
    "JUDGED_BY",
    "LOSS_TABLE",
    "SOURCE",
    "UNDOCUMENTED",
    "DeliveryRule",
    "FaultClass",
    "Guarantee",
    "Setting",
    "delivery_rule",
    "guarantee_for",
]

LossRule = Literal["forbidden", "allowed", "forbidden-unless-isr-shrank", "unknown"]
DuplicateRule = Literal["forbidden", "allowed", "unknown"]
OrderRule = Literal["guaranteed", "not-guaranteed", "unknown"]

FORBIDDEN: Final = "forbidden"
ALLOWED: Final = "allowed"
FORBIDDEN_UNLESS_ISR_SHRANK: Final = "forbidden-unless-isr-shrank"
UNDOCUMENTED: Final = "unknown"  # Kafka documents no outcome: a loss is judged UNKNOWN

SOURCE: Final = "docs/kafka-reliability.md, “Expected outcome per configuration and fault”"

# The <role> of a '<role>-<kind>' fault class: what the target named (harness.experiment.plan).
ROLES: Final = frozenset({
    "leader", "follower", "controller", "controllers", "zookeeper", "random", "node", "all",
    "consumer",
})  # fmt: skip
KINDS: Final = CLASS_KINDS  # the contract's kinds (harness.rundir.fault_classes)
WHOLE_CLUSTER_CLASSES: Final = frozenset({"none", "mixed"})
MAX_MIN_INSYNC: Final = 1_000

DUPLICATES_FORBIDDEN_CITATION: Final = (
    "enable.idempotence=true: “with idempotence on, a duplicate of an acknowledged message "
    "is a violation”"
)
DUPLICATES_ALLOWED_CITATION: Final = (
    "enable.idempotence=false: “Duplicates are allowed without idempotence whenever the "
    "client retries”"
)
ORDER_CITATION: Final = (
    "“Ordering per partition is only guaranteed with idempotence, or with max.in.flight=1”"
)

# The classes judged by one of a Guarantee's rules, beside the classes that have a judgement of
# their own (the loss figure, divergence, duplicates, the consumer group's, the transactions',
# liveness): the rule's field. A class judged like one of these needs only its row here.
JUDGED_BY: Final[dict[AnomalyName, Literal["loss", "order", "order and loss"]]] = {
    # Two messages read at one offset: the log rewritten below the high watermark, which is
    # Jepsen's inconsistent offsets; a violation wherever loss is forbidden, never loss itself.
    AnomalyName.INCONSISTENT_OFFSETS: "loss",
    # Two readers given different messages at one offset (a consumer, a transaction or the
    # read_uncommitted read-back against the read-back, or against each other): the log
    # rewritten between the reads, Jepsen's inconsistent offsets too; judged as the above.
    AnomalyName.INCONSISTENT_READS: "loss",
    # A producer's sends to one partition acknowledged out of send order: Kafka keeps one
    # producer's order per partition only with idempotence or max.in.flight=1, and a log
    # truncated where loss is allowed (power loss, unclean election) hands its offsets to later
    # sends: a violation only where order is guaranteed and loss forbidden.
    AnomalyName.NONMONOTONIC_SEND: "order and loss",
}


@dataclass(frozen=True)
class Guarantee:
    """What the documentation promises for one configuration under one fault class."""

    loss: LossRule
    duplicates: DuplicateRule
    order: OrderRule
    citation: str
    duplicates_citation: str = ""
    order_citation: str = ORDER_CITATION


@dataclass(frozen=True)
class FaultClass:
    """A fault class name split into the role it hits and the kind of fault."""

    name: str
    role: str
    kind: str

    @classmethod
    def parse(cls, name: str) -> FaultClass:
        """Parse `none`, `mixed`, `all-kill` or `<role>-<kind>`; raise ValueError otherwise."""
        if name in WHOLE_CLUSTER_CLASSES:
            return cls(name=name, role=name, kind="")
        role, _, kind = name.partition("-")
        if role not in ROLES or kind not in KINDS:
            raise ValueError(
                f"unknown fault_class {name!r}: expected one of {sorted(WHOLE_CLUSTER_CLASSES)}"
                f" or <role>-<kind> with role in {sorted(ROLES)} and kind in {sorted(KINDS)}; "
                "fix the experiment's fault class or add a row to analysis/judge/guarantees.py"
            )
        return cls(name=name, role=role, kind=kind)


@dataclass(frozen=True)
class Setting:
    """The producer/topic settings the documented guarantees depend on, normalised."""

    acks: Acks
    min_insync_replicas: int
    unclean_leader_election: bool
    enable_idempotence: bool
    max_in_flight: int
    fault: FaultClass
    fsync_each_message: bool = False  # every append fsynced before its acknowledgement

    @classmethod
    def from_config(cls, config: CellConfig) -> Setting:
        """The settings of a cell's config; ConfigError when one the table needs is missing."""
        return cls(
            acks=config.require("acks"),
            min_insync_replicas=config.require("min_insync_replicas"),
            unclean_leader_election=config.require("unclean_leader_election"),
            enable_idempotence=config.require("enable_idempotence"),
            max_in_flight=config.require("max_in_flight"),
            fault=FaultClass.parse(config.require("fault_class")),
            # Absent means Kafka's default: no fsync before the acknowledgement.
            fsync_each_message=bool(config.fsync_each_message),
        )


@dataclass(frozen=True)
class LossRow:
    """One row of the loss table: which settings and fault classes it covers, and the rule."""

    acks: frozenset[str]
    faults: tuple[str, ...]  # glob patterns over fault class names, e.g. "leader-*"
    loss: LossRule
    citation: str
    min_insync: tuple[int, int] = (0, MAX_MIN_INSYNC)  # inclusive range
    unclean: bool | None = None  # None: the row holds whatever unclean election is set to
    fsync: bool | None = None  # None: the row holds whatever the flush settings are

    def matches(self, setting: Setting) -> bool:
        """True when this row covers the setting and its fault class."""
        low, high = self.min_insync
        return (
            setting.acks in self.acks
            and low <= setting.min_insync_replicas <= high
            and self.unclean in (None, setting.unclean_leader_election)
            and self.fsync in (None, setting.fsync_each_message)
            and any(fnmatchcase(setting.fault.name, pattern) for pattern in self.faults)
        )


ACKS_1_OR_ALL: Final = frozenset({"1", "all"})
# Fault classes that take down or cut off several nodes, or may do so over a run.
MULTI_NODE: Final = ("mixed", "all-*", "random-*", "*-partition-groups")
# Fault classes that may land on the current leader without targeting it by name.
MAY_HIT_LEADER: Final = ("mixed", "random-*", "controller-*", "node-*", "all-*")
# Cut off from the other brokers, from everyone, or from the metadata quorum only (then the
# quorum fences it and elects another leader while it still takes writes: the same zombie).
LEADER_CUT_OFF: Final = (
    "leader-partition",
    "leader-isolate",
    "leader-partition-groups",
    "leader-partition-quorum",
)
MIN_INSYNC_1: Final = (0, 1)
MIN_INSYNC_2_PLUS: Final = (2, MAX_MIN_INSYNC)

LOSS_TABLE: Final[tuple[LossRow, ...]] = (
    LossRow(
        acks=frozenset({"0"}),
        faults=("*",),
        loss=ALLOWED,
        citation="acks=0: “success as soon as the bytes are in the socket buffer”; "
        "“loss allowed” in every column of the table",
    ),
    LossRow(
        acks=ACKS_1_OR_ALL,
        faults=("*-corruption",),
        loss=UNDOCUMENTED,
        citation="silent corruption of a replica's files: “Kafka documents no outcome for data "
        "a replica's disk corrupted”",
    ),
    LossRow(
        acks=ACKS_1_OR_ALL,
        faults=("none",),
        loss=FORBIDDEN,
        citation="no fault injected: every “loss allowed” in the table needs a fault, "
        "so none is expected (treated as forbidden)",
    ),
    LossRow(
        acks=ACKS_1_OR_ALL,
        faults=("consumer-*",),
        loss=FORBIDDEN,
        citation="faults on the consumer group alone touch no broker: “Consumer-side delivery” "
        "– what the group processes is judged on its own; the log is held to no fault's rule",
    ),
    LossRow(
        acks=frozenset({"all"}),
        min_insync=MIN_INSYNC_2_PLUS,
        fsync=True,
        faults=("all-power-loss",),
        loss=FORBIDDEN,
        citation="power loss of all with every append fsynced before it is acknowledged "
        "(flush.messages=1 or log.flush.interval.messages=1): “a power loss of all loses "
        "nothing acks=all has acknowledged with min.insync >= 2: each in-sync replica fsyncs "
        "on append, before the leader's high watermark passes the message”",
    ),
    LossRow(
        acks=ACKS_1_OR_ALL,
        faults=("all-power-loss",),
        loss=ALLOWED,
        citation="power loss of all (page cache lost): “loss allowed” in every row; “Kafka "
        "does not fsync by default … Only losing the page cache on several replicas at once "
        "(power loss, kernel crash) exposes that”",
    ),
    LossRow(
        acks=ACKS_1_OR_ALL,
        unclean=True,
        faults=MULTI_NODE,
        loss=ALLOWED,
        citation="unclean.leader.election.enable=true: “every row becomes ‘loss allowed’ once "
        "all ISR members are down and a stale replica comes back first” "
        "(this fault hits several nodes)",
    ),
    LossRow(
        acks=ACKS_1_OR_ALL,
        faults=("controllers-*", "zookeeper-*"),
        loss=FORBIDDEN,
        citation="faults on the metadata quorum alone: “None of the loss mechanisms in this "
        "table applies” (treated as forbidden, like no fault)",
    ),
    LossRow(
        acks=ACKS_1_OR_ALL,
        # The active controller removed from the voters (remove-controller, dedicated
        # controllers only): its role is `controller`, which elsewhere may be a broker.
        faults=("controller-quorum-change",),
        loss=FORBIDDEN,
        citation="a change of the controller quorum's voters is a fault on the metadata quorum "
        "alone: “None of the loss mechanisms in this table applies” (treated as forbidden)",
    ),
    # acks=1: the leader alone acknowledges.
    LossRow(
        acks=frozenset({"1"}),
        faults=("follower-*",),
        loss=FORBIDDEN,
        citation="acks=1, follower kill: “none expected” (treated as forbidden)",
    ),
    LossRow(
        acks=frozenset({"1"}),
        faults=("*-rolling-restart",),
        loss=ALLOWED,
        citation="acks=1, rolling restart (SIGTERM): “loss allowed”",
    ),
    LossRow(
        acks=frozenset({"all"}),
        faults=("*-rolling-restart",),
        loss=FORBIDDEN,
        citation="acks=all (min.insync=1 or 2), rolling restart (SIGTERM): “none”",
    ),
    LossRow(
        acks=frozenset({"1"}),
        faults=LEADER_CUT_OFF,
        loss=ALLOWED,
        citation="acks=1, leader cut off from other brokers: "
        "“loss allowed (zombie leader keeps acking)”",
    ),
    LossRow(
        acks=frozenset({"1"}),
        faults=("leader-*",),
        loss=ALLOWED,
        citation="acks=1, leader kill: “loss allowed”: “If the leader dies or is cut off before "
        "followers copy the batch … the acknowledged message is gone”",
    ),
    LossRow(
        acks=frozenset({"1"}),
        faults=("all-kill",),
        loss=ALLOWED,
        citation="acks=1, all brokers killed at once: “loss allowed”",
    ),
    LossRow(
        acks=frozenset({"1"}),
        faults=MAY_HIT_LEADER,
        loss=ALLOWED,
        citation="acks=1, leader kill: “loss allowed” (this fault may hit the current leader)",
    ),
    # acks=all, min.insync.replicas >= 2: the CP recipe.
    LossRow(
        acks=frozenset({"all"}),
        min_insync=MIN_INSYNC_2_PLUS,
        faults=("all-kill",),
        loss=FORBIDDEN,
        citation="acks=all, min.insync=2, all brokers killed at once: “none expected” "
        "(treated as forbidden; SIGKILL keeps the page cache: power loss is all-power-loss)",
    ),
    LossRow(
        acks=frozenset({"all"}),
        min_insync=MIN_INSYNC_2_PLUS,
        faults=("follower-*",),
        loss=FORBIDDEN,
        citation="acks=all, min.insync=2, follower kill: “none”",
    ),
    LossRow(
        acks=frozenset({"all"}),
        min_insync=MIN_INSYNC_2_PLUS,
        faults=LEADER_CUT_OFF,
        loss=FORBIDDEN,
        citation="acks=all, min.insync=2, leader cut off from other brokers: “none”",
    ),
    LossRow(
        acks=frozenset({"all"}),
        min_insync=MIN_INSYNC_2_PLUS,
        faults=("*",),
        loss=FORBIDDEN,
        citation="acks=all, min.insync=2: “none” under every fault the table lists but power "
        "loss of all (fault class all-power-loss), a leader kill's included",
    ),
    # acks=all, min.insync.replicas=1: acks=all may degrade to "acked by the leader alone".
    LossRow(
        acks=frozenset({"all"}),
        min_insync=MIN_INSYNC_1,
        # A broker halts when its only log directory fails (disk-error): a leader kill.
        faults=("leader-kill", "leader-stop", "leader-power-loss", "leader-disk-error"),
        loss=FORBIDDEN_UNLESS_ISR_SHRANK,
        citation="acks=all, min.insync=1, leader kill: "
        "“none, unless the ISR had already shrunk to the leader”",
    ),
    LossRow(
        acks=frozenset({"all"}),
        min_insync=MIN_INSYNC_1,
        faults=("all-kill",),
        loss=FORBIDDEN_UNLESS_ISR_SHRANK,
        citation="acks=all, min.insync=1, all brokers killed at once: “none expected”; "
        "leader kill: “none, unless the ISR had already shrunk to the leader”",
    ),
    LossRow(
        acks=frozenset({"all"}),
        min_insync=MIN_INSYNC_1,
        faults=(
            "mixed",
            "random-*",
            "controller-kill",
            "controller-stop",
            "controller-power-loss",
            "controller-disk-error",
            "node-kill",
            "node-stop",
            "node-power-loss",
            "node-disk-error",
            "all-stop",
        ),
        loss=FORBIDDEN_UNLESS_ISR_SHRANK,
        citation="acks=all, min.insync=1, leader kill: “none, unless the ISR had already shrunk "
        "to the leader” (this fault may hit the current leader)",
    ),
    LossRow(
        acks=frozenset({"all"}),
        min_insync=MIN_INSYNC_1,
        faults=LEADER_CUT_OFF,
        loss=FORBIDDEN,
        citation="acks=all, min.insync=1, leader cut off from other brokers: “none expected "
        "(ISR change needs the controller)” (treated as forbidden)",
    ),
    LossRow(
        acks=frozenset({"all"}),
        min_insync=MIN_INSYNC_1,
        faults=("follower-*",),
        loss=FORBIDDEN,
        citation="acks=all, min.insync=1, follower kill: “none”",
    ),
    LossRow(
        acks=frozenset({"all"}),
        min_insync=MIN_INSYNC_1,
        faults=("*",),
        loss=FORBIDDEN,
        citation="acks=all, min.insync=1: “none” in every column short of power loss of all "
        "(fault class all-power-loss)",
    ),
)


def loss_row_for(setting: Setting) -> LossRow:
    """The first row of LOSS_TABLE covering `setting`; LookupError when none does."""
    for row in LOSS_TABLE:
        if row.matches(setting):
            return row
    raise LookupError(
        f"no documented guarantee for acks={setting.acks}, "
        f"min.insync={setting.min_insync_replicas}, fault_class={setting.fault.name}: "
        "add a row to analysis/judge/guarantees.py LOSS_TABLE"
    )


def guarantee_for(config: CellConfig) -> Guarantee:
    """The documented guarantee for a cell's config; raises on unknown or missing settings.
    Where Kafka documents no outcome (silent corruption), none for duplicates and order
    either."""
    setting = Setting.from_config(config)
    row = loss_row_for(setting)
    if row.loss == UNDOCUMENTED:  # a corrupted record can read as a duplicate or out of order
        return Guarantee(UNDOCUMENTED, UNDOCUMENTED, UNDOCUMENTED, row.citation, row.citation,
                         row.citation)  # fmt: skip
    idempotent = setting.enable_idempotence
    return Guarantee(
        loss=row.loss,
        duplicates=FORBIDDEN if idempotent else ALLOWED,
        order="guaranteed" if idempotent or setting.max_in_flight == 1 else "not-guaranteed",
        citation=row.citation,
        duplicates_citation=(
            DUPLICATES_FORBIDDEN_CITATION if idempotent else DUPLICATES_ALLOWED_CITATION
        ),
    )


# ---------------------------------------------------------------------------------------------
# The consumer group (workload.consumers): docs/kafka-reliability.md, “Consumer-side delivery”


@dataclass(frozen=True)
class DeliveryRule:
    """What a commit mode lets the consumer group do: skip acknowledged messages in the log
    (consumer_unprocessed) and process a record again (consumer_reprocessed)."""

    unprocessed: Literal["forbidden", "allowed"]
    reprocessed: Literal["forbidden", "allowed"]
    citation: str


# Keyed by harness.rundir.records.CommitMode values.
CONSUMER_DELIVERY: Final[dict[str, DeliveryRule]] = {
    "after-process": DeliveryRule(
        unprocessed=FORBIDDEN,
        reprocessed=ALLOWED,
        citation="commit after processing: “at-least-once: nothing is skipped, but a message "
        "may be processed again after a crash or a rebalance”",
    ),
    "before-process": DeliveryRule(
        unprocessed=ALLOWED,
        reprocessed=FORBIDDEN,
        citation="commit before processing (and process only what was committed): "
        "“at-most-once: messages may be lost but are never redelivered”",
    ),
    "auto": DeliveryRule(
        unprocessed=ALLOWED,
        reprocessed=ALLOWED,
        citation="auto commit with librdkafka's defaults: “the offset is stored when the "
        "message is handed to the application and the stored offsets are committed every "
        "auto.commit.interval.ms, so a crash may skip messages handed over but not yet "
        "processed, and re-deliver those processed since the last commit: neither "
        "at-least-once nor at-most-once”",
    ),
}
# The Java client's auto commit is another contract: KafkaConsumer's documentation says the
# automatic commit inside poll() commits what earlier polls returned, "at-least-once" when the
# application consumes all data returned from each poll before the next call or close. The
# harness's Java member processes every polled batch before it polls again.
JAVA_AUTO_COMMIT: Final = DeliveryRule(
    unprocessed=FORBIDDEN,
    reprocessed=ALLOWED,
    citation="auto commit on the Java client: “the commit inside poll() covers what earlier "
    "polls returned; with every record processed before the next poll or close, "
    "at-least-once” (KafkaConsumer's documentation, “Automatic Offset Committing”)",
)


def delivery_rule(commit: str, members_client: str) -> DeliveryRule | None:
    """The rule of a commit mode for members on `members_client` (the consumers event's
    `client`: "librdkafka" or "java <version>"); None for an unknown mode."""
    if commit == "auto" and members_client.startswith("java"):
        return JAVA_AUTO_COMMIT
    return CONSUMER_DELIVERY.get(commit)


# ---------------------------------------------------------------------------------------------
# The group's liveness and each member's position (docs/kafka-reliability.md, “Consumer
# liveness”): LIVENESS_TABLE in analysis/judge/liveness.py
