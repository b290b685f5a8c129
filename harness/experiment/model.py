"""The experiment model: what a YAML experiment file may say, section by section.

Each section is a frozen pydantic model whose fields check themselves (fields.py: strict
numbers with upper bounds from limits.py, fault params from the fault registry); rules.py
checks what relates fields of different sections, on every resolved matrix cell. Loading is
load.py's job, the matrix matrix.py's, and what a cell means to the runner plan.py's."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializeAsAny,
    ValidationInfo,
    field_validator,
    model_validator,
)

from harness.chaos.conditions import Condition, parse_condition
from harness.chaos.faults import FAULT_TYPES, FaultParams, NoParams
from harness.experiment.clients import ClientField, ClientSpec
from harness.experiment.families import DEFAULT_FAMILIES, FAMILY_NAMES
from harness.experiment.fields import (
    BOUND_TARGET,
    HEAL,
    MAX_CONSUMERS,
    MAX_PRODUCERS,
    WHY_CONSUMERS,
    WHY_COUNT,
    WHY_KEYS,
    WHY_LIBRDKAFKA,
    WHY_PARTITIONS,
    WHY_PROCESSING,
    WHY_PRODUCERS,
    WHY_RATE,
    WHY_REPETITIONS,
    WHY_SEED,
    Acks,
    ConfigMap,
    FaultName,
    PartitionIndex,
    ProducerConfig,
    Seconds,
    StepPartition,
    Target,
    TopicConfig,
    check_binding,
    check_condition,
    check_name,
    kafka_release,
    non_empty_image,
    normalise_acks,
    quoted_version,
)
from harness.experiment.problems import RawDocument
from harness.limits import (
    MAX_DURATION_S,
    MAX_PARTITIONS,
    MAX_RATE,
    MAX_REPETITIONS,
    WHY_DURATION,
    at_least,
    at_most,
    number,
    optional_number,
    optional_whole,
    shown,
    whole,
)
from harness.platform.versions import Feature, Mode, default_mode, lacks
from harness.rundir.release import KafkaVersion

__all__ = [
    "Experiment",
    "FaultGenerator",
    "FaultStep",
    "ProducerSpec",
    "WorkloadSpec",
    "workload_duration_s",
]


def _check_family(value: str) -> str:
    if value not in FAMILY_NAMES:
        raise ValueError(f"unknown fault family {shown(value)}; use {', '.join(FAMILY_NAMES)}")
    return value


FamilyName = Annotated[str, AfterValidator(_check_family)]
Weight = Annotated[number, at_least(0), at_most(1_000_000, "a relative weight")]

# --- the model ---------------------------------------------------------------------------------


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class KafkaSpec(_Section):
    """Which Kafka runs and on how many brokers."""

    version: Annotated[
        str | None, BeforeValidator(quoted_version), AfterValidator(kafka_release)
    ] = "4.3.1"
    image: Annotated[str | None, AfterValidator(non_empty_image)] = None
    # kraft: combined broker+controller nodes; kraft-dedicated: 3 controller-only nodes plus
    # the brokers; zookeeper: a ZooKeeper ensemble plus the brokers. None: by version.
    mode: Literal["kraft", "kraft-dedicated", "zookeeper"] | None = None
    zookeeper_nodes: Literal[1, 3] = 1  # ZooKeeper servers, zookeeper mode only
    # static: controller.quorum.voters; dynamic (KIP-853, 3.9+, kraft-dedicated): controllers
    # formatted with their voter set, so remove-controller can change it.
    quorum: Literal["static", "dynamic"] = "static"
    brokers: whole = Field(3, ge=3, le=5)
    broker_config: ConfigMap = Field(default_factory=dict)
    # Server properties of the KRaft controller-only nodes (kraft-dedicated) on top of
    # broker_config: settings a broker refuses, e.g. controller.quorum.auto.join.enable.
    controller_config: ConfigMap = Field(default_factory=dict)

    def effective_mode(self) -> Mode | None:
        """The mode the cluster runs in: the file's, else the version's default (None if the
        version is unknown, as with a prebuilt image and no version)."""
        if self.mode is not None:
            return Mode(self.mode)
        return default_mode(KafkaVersion.parse(self.version)) if self.version else None

    def lacks(self, feature: Feature) -> str | None:
        """Why this version lacks `feature`; None when it has it or the version is unknown."""
        return lacks(KafkaVersion.parse(self.version), feature) if self.version else None


class TopicSpec(_Section):
    """The topic the workload writes, created fresh for every cell."""

    partitions: Annotated[whole, at_most(MAX_PARTITIONS, WHY_PARTITIONS)] = Field(3, ge=1)
    replication_factor: whole = Field(3, ge=1)  # at most kafka.brokers: a rule below
    min_insync_replicas: whole = Field(2, ge=1)  # at most replication_factor: a rule below
    unclean_leader_election: bool = False
    config: TopicConfig = Field(default_factory=dict)


_LIBRDKAFKA_MAX = 2**31 - 1


class ProducerSpec(_Section):
    """The recorder's librdkafka producer; settings that decide durability are fields."""

    acks: Annotated[Acks, BeforeValidator(normalise_acks)] = "all"
    enable_idempotence: bool = False
    max_in_flight: whole = Field(5, ge=1, le=1_000_000)
    retries: Annotated[optional_whole, at_least(0), at_most(_LIBRDKAFKA_MAX, WHY_LIBRDKAFKA)] = None
    linger_ms: whole = Field(5, ge=0, le=900_000)
    request_timeout_ms: whole = Field(5000, ge=1, le=900_000)
    message_timeout_ms: Annotated[whole, at_most(_LIBRDKAFKA_MAX, WHY_LIBRDKAFKA, "ms")] = Field(
        30000, ge=0
    )
    config: ProducerConfig = Field(default_factory=dict)


class TransactionsSpec(_Section):
    """A transactional workload: the messages go out in transactions of `size` messages spread
    round-robin over the partitions; every `abort_every`-th transaction (or each with
    probability `abort_ratio`) is aborted on purpose, the others committed."""

    size: Annotated[whole, at_most(10_000, "a transaction's messages stay in the client")] = Field(
        5, ge=1
    )
    abort_every: Annotated[optional_whole, at_least(2)] = 4
    abort_ratio: Annotated[optional_number, at_least(0), at_most(1, "a probability")] = None
    # The first N transactions are aborted whatever abort_every or abort_ratio say: a schedule
    # aimed at the run's first transactions (KAFKA-20090's need them to end in aborts).
    abort_first: whole = Field(0, ge=0, le=1_000_000)
    # transaction.timeout.ms: how soon the coordinator aborts a transaction left open (the LSO
    # waits for it); librdkafka wants it >= producer.message_timeout_ms.
    timeout_ms: whole = Field(30_000, ge=1_000, le=900_000)
    # Commit an offset of GROUP_ID in every transaction, as consume-transform-produce does:
    # the group coordinator then takes part in each commit. Off by default: librdkafka 2.16's
    # send_offsets_to_transaction was seen blocking past its timeout against Kafka 3.8.1, as
    # librdkafka issues #5456 and #5511 describe (docs/findings/transactions.md), which stalls the
    # workload for good.
    send_offsets: bool = False
    # How the client answers a commit, abort or offer that timed out: retry the same call
    # (KafkaProducer's contract), abort and go on (Jepsen's client, most applications), or
    # reinit (a new client on the same transactional.id). harness/rundir/transactions.py.
    on_timeout: Literal["retry", "abort", "reinit"] = "retry"
    # Consume-transform-produce: each transaction first reads up to `reads` records of the
    # topic (read_committed, within READ_BUDGET_S), journalled, so the cycle check gets wr
    # edges (G1c). librdkafka only. harness/workload/transactions/reads.py.
    reads: Annotated[whole, at_most(10_000, "a transaction's reads are held in memory")] = Field(
        0, ge=0
    )
    # After a transaction that did not commit, move the reader back to where the last
    # committed transaction left it (the group's committed offsets with send_offsets), as
    # Kafka's exactly-once example does; false keeps its position, as a client left alone
    # does unless a rebalance happens (KAFKA-17582). Only with reads.
    rewind_on_abort: bool = True
    # Transactions committed on the transactional.id before the workload starts, each holding
    # only an offset of the group kchaos-age (no record of the topic, nothing journalled):
    # under transaction version 2 every commit raises the producer epoch by one, so the
    # workload's first transaction runs at producer epoch age_commits + 1 (its
    # initTransactions raises it once more), near the limit of 32,767 that KAFKA-19367 and
    # KAFKA-20090 need. Java clients from 4.0 on Kafka from 4.0 only.
    age_commits: Annotated[whole, at_most(32_766, "the producer epoch's limit is 32,767")] = Field(
        0, ge=0
    )


class NeighboursSpec(_Section):
    """Groups sharing the workload group's coordinator (harness.workload.neighbours): `groups`
    groups on its `__consumer_offsets` partition, each committing an offset of every one of
    the `partitions` partitions of the topic kchaos-neighbours before the workload. While it
    runs, `monitors` connections ask their coordinator for all of their offsets again and
    again (lag monitors, keeping the broker that answers until it refuses), and every
    `commit_interval_s` (0: never) one group commits again through every broker. A busy
    coordinator: its partition's events queue behind theirs."""

    groups: Annotated[whole, at_most(5_000, "each group is a commit before the workload")] = Field(
        100, ge=1
    )
    partitions: Annotated[whole, at_most(2_000, "the topic is created on the cluster")] = Field(
        100, ge=1
    )
    monitors: Annotated[whole, at_most(16, "each reads every offset, megabytes a request")] = Field(
        1, ge=0
    )
    commit_interval_s: number = Field(1.0, ge=0)


class WorkloadSpec(_Section):
    """How much the producers send: at `rate` for `duration_s` seconds or `count` messages.

    `rate` and `count` are totals over the `producers` (each sends its share: rate / producers,
    and count split as evenly as whole messages allow), so changing `producers` keeps the load
    on the cluster; `keys`, `message_bytes` and `duration_s` hold for each producer, which sends
    to `keys` keys of its own. `producers` > 1 runs each producer in its own OS process with
    its own journal.
    """

    rate: Annotated[
        optional_number, at_least(0, exclusive=True), at_most(MAX_RATE, WHY_RATE, "messages/s")
    ] = 2000
    duration_s: Annotated[
        optional_number, at_least(0, exclusive=True), at_most(MAX_DURATION_S, WHY_DURATION, "s")
    ] = 60
    count: Annotated[optional_whole, at_least(1), at_most(MAX_RATE * MAX_DURATION_S, WHY_COUNT)] = (
        None
    )
    # The value carries the message id and per-key sequence the read-back parses.
    message_bytes: whole = Field(100, ge=32, le=1_000_000)
    keys: Annotated[whole, at_most(1_000_000, WHY_KEYS)] = Field(16, ge=1)
    producers: Annotated[whole, at_most(MAX_PRODUCERS, WHY_PRODUCERS)] = Field(1, ge=1)
    # A consumer group of this many member processes reads while the faults run (0: none);
    # `consumer_commit` says when each member commits (harness.rundir.records.CommitMode), and
    # after the final heal the group has `consumer_catch_up_s` to commit up to the end.
    consumers: Annotated[whole, at_most(MAX_CONSUMERS, WHY_CONSUMERS)] = Field(0, ge=0)
    consumer_commit: Literal["auto", "after-process", "before-process"] = "after-process"
    consumer_catch_up_s: Seconds = Field(60, gt=0)
    # The liveness bound: no progress for longer than this (outside the faults) while records
    # the group could read exist is `stuck` (None: timeouts.stuck_bound_s, from the session).
    consumer_stuck_s: Seconds | None = Field(None, gt=0)
    # Simulated work per message before it counts as processed (0: none); keep
    # consumers × 1000 / consumer_processing_ms above the rate, or the group falls behind.
    consumer_processing_ms: Annotated[number, at_most(100, WHY_PROCESSING, "ms")] = Field(0, ge=0)
    # How long the group coordinator waits for a member's heartbeat (the harness's members;
    # SESSION_TIMEOUT_MS when None): longer than a fault keeps a member from its coordinator,
    # and the coordinator keeps the member through it.
    consumer_session_timeout_ms: Annotated[
        optional_whole,
        at_least(6_000),
        at_most(300_000, "a dead member holds its partitions this long"),
    ] = None
    neighbours: NeighboursSpec | None = None  # None: the group alone on its coordinator
    transactions: TransactionsSpec | None = None  # None: plain sends, no transactions
    # Which client sends (harness.experiment.clients): librdkafka, java:<version>, or a command.
    client: ClientField = Field(default_factory=ClientSpec)


class FaultStep(_Section):
    """One step of a schedule, run in file order.

    It waits until `at_s` seconds after the workload start (None: no wait), then until its
    `after` condition holds (at most `timeout_s`), then acts: injects `fault` on `target` and
    heals it `duration_s` later, or leaves it active without a duration (until the step
    `fault: heal, target: "@name"`, or the final heal). `as` binds the resolved nodes to a
    name that later steps target as `@name` and conditions read. With `every_s` the step
    repeats for the workload's whole duration (soak.py expands it into plain steps).
    """

    model_config = ConfigDict(populate_by_name=True)

    at_s: Annotated[Seconds | None, Field(ge=0)] = None
    fault: FaultName
    target: Target
    partition: StepPartition = 0
    duration_s: Annotated[Seconds | None, Field(gt=0)] = None
    as_: Annotated[str | None, AfterValidator(check_binding), Field(alias="as")] = None
    after: Annotated[str | None, AfterValidator(check_condition)] = None
    timeout_s: Seconds = Field(60, gt=0)  # how long `after` may take before the step fails
    # Injected again at at_s + k * every_s while that is before the workload's end, each
    # repetition healed after duration_s: a soak schedule (rules in soak.py).
    every_s: Annotated[Seconds | None, Field(gt=0)] = None
    # Typed by `fault`'s own model; SerializeAsAny dumps that model's fields into spec.json.
    params: SerializeAsAny[FaultParams] = Field(default_factory=NoParams, validate_default=True)

    @model_validator(mode="before")
    @classmethod
    def _whole_cluster_target(cls, data: Any) -> Any:
        # A fault given as a list or mapping is reported by the fault field, not hashed here.
        fault_name = data.get("fault") if isinstance(data, dict) else None
        if not isinstance(fault_name, str) or fault_name not in FAULT_TYPES:
            return data
        fault = FAULT_TYPES[data["fault"]]
        try:
            params = fault.parse_params(data.get("params"))
        except ValueError:
            return data  # the params field reports it
        return {**data, "target": "all"} if fault.hits_whole_cluster(params) else data

    @field_validator("params", mode="before")
    @classmethod
    def _params_for_kind(cls, value: Any, info: ValidationInfo) -> FaultParams:
        kind = info.data.get("fault")
        if kind is None:  # the fault is unknown and reported; its params cannot be checked
            return NoParams()
        if kind == HEAL:
            if value is not None and not isinstance(value, NoParams) and value != {}:
                raise ValueError("a heal step takes no params (it ends the named fault)")
            return NoParams()
        return FAULT_TYPES[kind].parse_params(value)

    @property
    def heals(self) -> bool:
        """True for a `fault: heal` step, which ends the fault bound to its @name target."""
        return self.fault == HEAL

    @property
    def bound_target(self) -> str | None:
        """The name of an `@name` target, None for any other target."""
        match = BOUND_TARGET.match(self.target)
        return match.group(1) if match else None

    @property
    def partition_binding(self) -> str | None:
        """The name of an `@name` partition (the one that node led), None for any other."""
        given = self.partition
        return given[1:] if isinstance(given, str) and given.startswith("@") else None

    @property
    def condition(self) -> Condition | None:
        """The parsed `after` condition (validated when the step was)."""
        return None if self.after is None else parse_condition(self.after)

    @property
    def repeats(self) -> bool:
        """True for a step with `every_s`, which stands for all its repetitions."""
        return self.every_s is not None

    @property
    def end_s(self) -> float | None:
        """Seconds after the workload start at which this fault is healed, when planned so."""
        if self.at_s is None or self.duration_s is None:
            return None
        return self.at_s + self.duration_s


class FaultGenerator(_Section):
    """A random schedule, in one of two modes.

    uniform: exponential gaps, uniform kinds (`faults`), targets and durations. generic: each
    step drawn from a fault family (`families` allowed, `weights` between them), its kind,
    role, partition, params, duration and hold drawn around the cell's timeouts (generic.py).
    The gaps (from a heal to the next fault) have the mean `mean_interval_s`, or the mean
    that keeps a fault in force `duty_cycle` of the time (soak.py; uniform mode only).
    """

    mode: Literal["uniform", "generic"] = "uniform"
    mean_interval_s: Annotated[Seconds | None, Field(gt=0)] = None
    duty_cycle: Annotated[
        optional_number,
        at_least(0, exclusive=True),
        at_most(1, "the fraction of the workload's time a fault is in force"),
    ] = None
    faults: list[FaultName] = Field(default_factory=list)  # uniform: required (rules.py)
    targets: list[Target] = Field(default_factory=list)  # uniform: required (rules.py)
    duration_s: tuple[Seconds, Seconds] | None = None  # uniform: required (rules.py)
    partition: PartitionIndex = 0
    # The params of every drawn step of a kind, e.g. {delay: {direction: in, delay_ms: 6000}}
    # (a kind left out runs with its defaults); checked as a schedule step's params are.
    params: dict[FaultName, RawDocument] = Field(default_factory=dict)
    # generic: the families drawn (None: every one but corruption) and their relative weights
    # (a family left out weighs 1).
    families: Annotated[list[FamilyName] | None, Field(min_length=1)] = None
    weights: dict[FamilyName, Weight] = Field(default_factory=dict)
    # generic: each schedule draws from its own half of the menu (generic.swarm); at most
    # `overlap` drawn faults act at once, as bound faults with heal steps (generic.py).
    swarm: bool = False
    overlap: int = Field(1, ge=1, le=3)

    @model_validator(mode="after")
    def _params_of_drawn_kinds(self) -> FaultGenerator:
        for kind, given in self.params.items():
            if kind not in self.faults:
                raise ValueError(
                    f"params for {kind}, which faults does not draw; add it to faults or "
                    "remove its params"
                )
            try:
                FAULT_TYPES[kind].parse_params(given)
            except ValueError as exc:
                raise ValueError(f"params of {kind}: {exc}") from None
        return self

    @property
    def allowed_families(self) -> tuple[str, ...]:
        """The families a generic generator may draw from: `families`, else the default."""
        return tuple(dict.fromkeys(self.families)) if self.families else DEFAULT_FAMILIES

    @property
    def mean_gap_s(self) -> float:
        """The mean gap between a heal and the next fault: mean_interval_s, or what duty_cycle
        makes it, mean duration x (1 - duty_cycle) / duty_cycle, so that the mean duration
        over the mean duration plus the mean gap is duty_cycle (0 for 1: back to back)."""
        if self.mean_interval_s is not None:
            return self.mean_interval_s
        if self.duty_cycle is None or self.duration_s is None:
            raise ValueError("faults.generate needs mean_interval_s or duty_cycle")
        low, high = self.duration_s
        return (low + high) / 2 * (1 - self.duty_cycle) / self.duty_cycle

    @field_validator("duration_s")
    @classmethod
    def _ordered(cls, value: tuple[float, float] | None) -> tuple[float, float] | None:
        if value is None:
            return value
        low, high = value
        if not 0 < low <= high:
            raise ValueError(f"must be [min, max] with 0 < min <= max (got [{low:g}, {high:g}])")
        return value


class FaultsSpec(_Section):
    """What the nemesis does: an explicit schedule or a generated one, then a final heal."""

    schedule: list[FaultStep] = Field(default_factory=list)
    generate: FaultGenerator | None = None
    final_heal_timeout_s: Seconds = Field(60, gt=0)
    # How long an explicit schedule goes on after the workload ends, its producers closed
    # (0: the workload's end ends it): faults that must strike after the last write, such
    # as an election on a partition nobody writes again. The consumer group and the sampler
    # go on meanwhile; the final heal follows the schedule's end or this bound.
    after_workload_s: Seconds = Field(0, ge=0)
    # Role steps spare nodes other faults hold (but packet faults that share one: share_node),
    # or are skipped (Nemesis): a generated schedule's rule, which its replay (a shrunk file)
    # needs too.
    disjoint: bool = False

    @property
    def acts_disjoint(self) -> bool:
        """Whether the nemesis runs these steps disjoint: asked, or generated."""
        return self.disjoint or self.generate is not None


class Experiment(_Section):
    """A whole experiment file; after `expand`, each cell holds one with an empty matrix."""

    name: Annotated[str, AfterValidator(check_name)]
    description: str = ""
    kafka: KafkaSpec = Field(default_factory=KafkaSpec)
    topic: TopicSpec = Field(default_factory=TopicSpec)
    producer: ProducerSpec = Field(default_factory=ProducerSpec)
    workload: WorkloadSpec = Field(default_factory=WorkloadSpec)
    faults: FaultsSpec = Field(default_factory=FaultsSpec)
    seed: Annotated[whole, at_least(-(2**63)), at_most(2**63 - 1, WHY_SEED)] = 42
    repetitions: Annotated[whole, at_most(MAX_REPETITIONS, WHY_REPETITIONS)] = Field(1, ge=1)
    matrix: RawDocument = Field(default_factory=dict)

    _source: str = PrivateAttr(default="<dict>")

    def fsyncs_each_message(self) -> bool:
        """Whether every append is fsynced before it is acknowledged: the topic's
        flush.messages is 1, or the topic leaves it out and the brokers'
        log.flush.interval.messages is 1 (a topic setting overrides the brokers' default)."""
        flush = self.topic.config.get("flush.messages")
        if flush is None:
            flush = self.kafka.broker_config.get("log.flush.interval.messages")
        return flush is not None and str(flush).strip() == "1"


def workload_duration_s(workload: WorkloadSpec) -> float | None:
    """Seconds the workload runs: duration_s, else count/rate; None when not bounded in time."""
    if workload.duration_s is not None:
        return workload.duration_s
    if workload.count is not None and workload.rate is not None:
        return workload.count / workload.rate
    return None
