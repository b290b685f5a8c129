"""The experiment model: what a YAML experiment file may say, and the rules across its fields.

Each section is a frozen pydantic model whose fields check themselves (strict numbers with
upper bounds from limits.py, fault params from the fault registry); `rule_problems` checks
what relates fields of different sections, on every resolved matrix cell. Loading a file is
load.py's job, the matrix matrix.py's, and what a cell means to the runner plan.py's.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterator
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

from harness.chaos.conditions import Condition, ConditionError, parse_condition
from harness.chaos.faults import FAULT_TYPES, FaultParams, NoParams, is_consumer_target
from harness.experiment.problems import Problem
from harness.limits import (
    MAX_DURATION_S,
    MAX_NAME,
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
from harness.platform.versions import (
    Feature,
    KafkaVersion,
    Mode,
    default_mode,
    lacks,
    mode_refusal,
    version_refusal,
)

__all__ = [
    "COORDINATOR_TARGETS",
    "HEAL",
    "TARGET_ROLES",
    "Experiment",
    "FaultGenerator",
    "FaultStep",
    "FaultsSpec",
    "KafkaSpec",
    "ProducerSpec",
    "Scalar",
    "TopicSpec",
    "TransactionsSpec",
    "WorkloadSpec",
    "rule_problems",
    "workload_duration_s",
]

Acks = Literal["0", "1", "all"]
TARGET_ROLES: tuple[str, ...] = (
    "leader",
    "follower",  # one follower of the partition, chosen with the repetition's seed
    "followers",  # every follower of the partition
    "isr",  # the partition's in-sync followers (the leader excluded)
    "out-of-sync",  # the partition's replicas outside the ISR
    "successor",  # the follower Kafka elects next: the first in-sync one in assignment order
    "controller",  # the active controller, in every mode
    "controllers",  # every KRaft controller (in kraft mode: the combined nodes)
    "zookeeper",  # every ZooKeeper server (zookeeper mode)
    "brokers",  # every broker, as `all`
    "random",
    "all",
    "consumer",  # a member of the consumer group (workload.consumers), chosen with the seed
    # The leader of the __transaction_state partition of the workload's transactional.id, and
    # of the __consumer_offsets partition of its group (workload.transactions only).
    "txn-coordinator",
    "group-coordinator",
)
COORDINATOR_TARGETS: tuple[str, ...] = ("txn-coordinator", "group-coordinator")
Scalar = str | int | float | bool
HEAL = "heal"  # the step `fault: heal, target: "@name"` ends the open fault bound to name
# Targets that name replicas of the step's partition, resolved when the step acts.
PARTITION_TARGETS: tuple[str, ...] = (
    "leader",
    "follower",
    "followers",
    "isr",
    "out-of-sync",
    "successor",
)

_NAME = re.compile(r"^[a-z0-9_-]+$")
_CONFIG_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_NODE_TARGET = re.compile(r"^node:([1-9][0-9]*)$")
_ZOOKEEPER_TARGET = re.compile(r"^zookeeper:([1-9][0-9]*)$")
_BOUND_TARGET = re.compile(r"^@([a-z][a-z0-9_]*)$")
_CONSUMER_TARGET = re.compile(r"^consumer-([0-9]+)$")
_BINDING = re.compile(r"^[a-z][a-z0-9_]*$")
_KAFKA_RELEASE = re.compile(r"^[0-9]+(\.[0-9]+){2,3}$")  # 3.9.0, 4.3.1, 0.10.2.2

WHY_REPETITIONS = (
    "each repetition starts a fresh cluster (~20 s plus the workload), so 10,000 already take "
    "days; split larger campaigns into several runs or CI shards"
)
WHY_PARTITIONS = (
    "the read-back and the analysis go through every partition, and a 3-5 broker test cluster "
    "serves no more usefully"
)
WHY_RATE = (
    "one recorder spends ~5 µs of client CPU per message (bench/recorder_bench.py), so it "
    "could not keep up and would silently fall behind the rate"
)
WHY_KEYS = "the recorder builds every key before the first send"
MAX_PRODUCERS = 64
WHY_PRODUCERS = (
    "each producer is an OS process with its own librdkafka client, threads and connections "
    "to every broker; 64 already oversubscribe a CI machine's cores many times over"
)
MAX_CONSUMERS = 16
WHY_CONSUMERS = (
    "each consumer is an OS process with its own librdkafka client; a group larger than the "
    "topic's partitions leaves members idle anyway"
)
WHY_PROCESSING = (
    "a member processes batches of up to 500 messages between polls, and librdkafka drops it "
    "from the group when a batch outlasts max.poll.interval.ms (300 s)"
)
WHY_COUNT = "1,000,000 messages/s (the rate limit) for 7 days (the duration limit)"
WHY_LIBRDKAFKA = "librdkafka's own maximum"
WHY_SEED = "a 64-bit integer"

# --- field-level checks (no knowledge of other sections) ---------------------------------------


def _check_name(value: str) -> str:
    if len(value) > MAX_NAME:
        raise ValueError(
            f"is {len(value)} characters long; use at most {MAX_NAME} "
            "(it names the run directory, and file names have a length limit)"
        )
    if not _NAME.match(value):
        raise ValueError(
            f"{shown(value)} is not a valid name; use lowercase letters, digits, '-' and '_' "
            "(it names the run directory)"
        )
    return value


def _check_config_value(key: str, item: Any) -> None:
    if isinstance(item, dict):
        # YAML turns `retention: {ms: 1}` into a nested mapping Kafka would never see.
        raise ValueError(f"'{key}' holds a mapping; write it as one dotted key: '{key}.<name>'")
    if not isinstance(item, Scalar):
        raise ValueError(f"'{key}' must be a string, number or boolean (got {shown(item)})")
    if isinstance(item, float) and not math.isfinite(item):
        raise ValueError(f"'{key}' must be a finite number (got {shown(item)})")


def _check_config_map(value: dict[str, Any]) -> dict[str, Any]:
    for key, item in value.items():
        if not isinstance(key, str) or not _CONFIG_KEY.match(key):
            raise ValueError(
                f"{shown(key)} is not a config key; write keys dotted, e.g. retention.ms"
            )
        _check_config_value(key, item)
    return value


def _reject_owned_keys(value: dict[str, Any], owned: dict[str, str]) -> dict[str, Any]:
    for key in value:
        if key in owned:
            raise ValueError(f"'{key}' must not be set here; {owned[key]}")
    return value


def _normalise_acks(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError(f'acks must be "0", "1" or "all" (got {value!r})')
    if isinstance(value, int):
        value = str(value)
    if isinstance(value, str):
        value = value.strip().lower()
        return "all" if value == "-1" else value
    return value


def _quoted_version(value: Any) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool):
        # YAML reads 4.10 as the float 4.1; only a quoted string keeps the version intact.
        raise ValueError(f'YAML read the version as a number; quote it: version: "{value}"')
    return value


def _kafka_release(value: str | None) -> str | None:
    if value is not None and not _KAFKA_RELEASE.match(value):
        raise ValueError(
            f"{shown(value)} is not a Kafka release; write 3 or 4 dot-separated numbers, "
            'e.g. "4.3.1" or "0.10.2.2"'
        )
    return value


def _non_empty_image(value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise ValueError(
            "is empty; give an image reference (e.g. apache/kafka:4.3.1), or null to build "
            "kafka.version locally"
        )
    return value


def _check_target(value: str) -> str:
    if value in TARGET_ROLES or any(
        pattern.match(value)
        for pattern in (_NODE_TARGET, _ZOOKEEPER_TARGET, _BOUND_TARGET, _CONSUMER_TARGET)
    ):
        return value
    raise ValueError(
        f"unknown target {shown(value)}; use {', '.join(TARGET_ROLES)}, node:<id>, "
        "zookeeper:<i>, consumer-<i> or @name (bound by an earlier step's `as:`)"
    )


def _check_binding(value: str | None) -> str | None:
    if value is not None and not _BINDING.match(value):
        raise ValueError(
            f"{shown(value)} is not a name; use lowercase letters, digits and '_', starting "
            "with a letter (later steps write it as @name)"
        )
    return value


def _check_condition(value: str | None) -> str | None:
    if value is not None:
        try:
            parse_condition(value)
        except ConditionError as exc:
            raise ValueError(str(exc)) from None
    return value


def _check_fault(value: str) -> str:
    if value in FAULT_TYPES or value == HEAL:
        return value
    close = difflib.get_close_matches(value, list(FAULT_TYPES), n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    kinds = ", ".join([*FAULT_TYPES, HEAL])
    raise ValueError(f"unknown fault {shown(value)}; {hint}use one of {kinds}")


ConfigMap = Annotated[dict[Any, Any], AfterValidator(_check_config_map)]
Target = Annotated[str, AfterValidator(_check_target)]
FaultName = Annotated[str, AfterValidator(_check_fault)]
Seconds = Annotated[number, at_most(MAX_DURATION_S, WHY_DURATION, "s")]
PartitionIndex = Annotated[
    whole, Field(ge=0), at_most(MAX_PARTITIONS - 1, f"topic.partitions is at most {MAX_PARTITIONS}")
]
# "@name": the partition the nodes bound to name led when they were bound (the lowest).
BoundPartition = Annotated[str, Field(pattern=r"^@[a-z][a-z0-9_]*$")]

_TOPIC_OWNED_KEYS = {
    "min.insync.replicas": "use topic.min_insync_replicas",
    "unclean.leader.election.enable": "use topic.unclean_leader_election",
}
_PRODUCER_OWNED_KEYS = {
    "acks": "use producer.acks",
    "request.required.acks": "use producer.acks",
    "enable.idempotence": "use producer.enable_idempotence",
    "max.in.flight.requests.per.connection": "use producer.max_in_flight",
    "max.in.flight": "use producer.max_in_flight",
    "retries": "use producer.retries",
    "message.send.max.retries": "use producer.retries",
    "linger.ms": "use producer.linger_ms",
    "queue.buffering.max.ms": "use producer.linger_ms",
    "request.timeout.ms": "use producer.request_timeout_ms",
    "message.timeout.ms": "use producer.message_timeout_ms",
    "delivery.timeout.ms": "use producer.message_timeout_ms",
    "bootstrap.servers": "the harness points the producer at the cluster it starts; remove it",
    "metadata.broker.list": "the harness points the producer at the cluster it starts; remove it",
}


# --- the model ---------------------------------------------------------------------------------


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class KafkaSpec(_Section):
    """Which Kafka runs and on how many brokers."""

    version: Annotated[
        str | None, BeforeValidator(_quoted_version), AfterValidator(_kafka_release)
    ] = "4.3.1"
    image: Annotated[str | None, AfterValidator(_non_empty_image)] = None
    # kraft: combined broker+controller nodes; kraft-dedicated: 3 controller-only nodes plus
    # the brokers; zookeeper: a ZooKeeper ensemble plus the brokers. None: by version.
    mode: Literal["kraft", "kraft-dedicated", "zookeeper"] | None = None
    zookeeper_nodes: Literal[1, 3] = 1  # ZooKeeper servers, zookeeper mode only
    brokers: whole = Field(3, ge=3, le=5)
    broker_config: ConfigMap = Field(default_factory=dict)

    def effective_mode(self) -> Mode | None:
        """The mode the cluster runs in: the file's, else the version's default (None if the
        version is unknown, as with a prebuilt image and no version)."""
        if self.mode is not None:
            return Mode(self.mode)
        return default_mode(KafkaVersion.parse(self.version)) if self.version else None


class TopicSpec(_Section):
    """The topic the workload writes, created fresh for every cell."""

    partitions: Annotated[whole, at_most(MAX_PARTITIONS, WHY_PARTITIONS)] = Field(3, ge=1)
    replication_factor: whole = Field(3, ge=1)  # at most kafka.brokers: a rule below
    min_insync_replicas: whole = Field(2, ge=1)  # at most replication_factor: a rule below
    unclean_leader_election: bool = False
    config: ConfigMap = Field(default_factory=dict)

    @field_validator("config")
    @classmethod
    def _no_first_class_keys(cls, value: dict[str, Any]) -> dict[str, Any]:
        return _reject_owned_keys(value, _TOPIC_OWNED_KEYS)


_LIBRDKAFKA_MAX = 2**31 - 1


class ProducerSpec(_Section):
    """The recorder's librdkafka producer; settings that decide durability are fields."""

    acks: Annotated[Acks, BeforeValidator(_normalise_acks)] = "all"
    enable_idempotence: bool = False
    max_in_flight: whole = Field(5, ge=1, le=1_000_000)
    retries: Annotated[optional_whole, at_least(0), at_most(_LIBRDKAFKA_MAX, WHY_LIBRDKAFKA)] = None
    linger_ms: whole = Field(5, ge=0, le=900_000)
    request_timeout_ms: whole = Field(5000, ge=1, le=900_000)
    message_timeout_ms: Annotated[whole, at_most(_LIBRDKAFKA_MAX, WHY_LIBRDKAFKA, "ms")] = Field(
        30000, ge=0
    )
    config: ConfigMap = Field(default_factory=dict)

    @field_validator("config")
    @classmethod
    def _no_first_class_keys(cls, value: dict[str, Any]) -> dict[str, Any]:
        return _reject_owned_keys(value, _PRODUCER_OWNED_KEYS)


class TransactionsSpec(_Section):
    """A transactional workload: the messages go out in transactions of `size` messages spread
    round-robin over the partitions; every `abort_every`-th transaction (or each with
    probability `abort_ratio`) is aborted on purpose, the others committed."""

    size: Annotated[whole, at_most(10_000, "a transaction's messages stay in the client")] = Field(
        5, ge=1
    )
    abort_every: Annotated[optional_whole, at_least(2)] = 4
    abort_ratio: Annotated[optional_number, at_least(0), at_most(1, "a probability")] = None
    # transaction.timeout.ms: how soon the coordinator aborts a transaction left open (the LSO
    # waits for it); librdkafka wants it >= producer.message_timeout_ms.
    timeout_ms: whole = Field(30_000, ge=1_000, le=900_000)
    # Commit an offset of GROUP_ID in every transaction, as consume-transform-produce does:
    # the group coordinator then takes part in each commit. Off by default: librdkafka 2.16's
    # send_offsets_to_transaction was seen blocking past its timeout against Kafka 3.8.1, as
    # librdkafka issues #5456 and #5511 describe (README, "Transactions"), which stalls the
    # workload for good.
    send_offsets: bool = False


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
    # Simulated work per message before it counts as processed (0: none); keep
    # consumers × 1000 / consumer_processing_ms above the rate, or the group falls behind.
    consumer_processing_ms: Annotated[number, at_most(100, WHY_PROCESSING, "ms")] = Field(0, ge=0)
    transactions: TransactionsSpec | None = None  # None: plain sends, no transactions


class FaultStep(_Section):
    """One step of a schedule, run in file order.

    It waits until `at_s` seconds after the workload start (None: no wait), then until its
    `after` condition holds (at most `timeout_s`), then acts: injects `fault` on `target` and
    heals it `duration_s` later, or leaves it active without a duration (until the step
    `fault: heal, target: "@name"`, or the final heal). `as` binds the resolved nodes to a
    name that later steps target as `@name` and conditions read.
    """

    model_config = ConfigDict(populate_by_name=True)

    at_s: Annotated[Seconds | None, Field(ge=0)] = None
    fault: FaultName
    target: Target
    partition: PartitionIndex | BoundPartition = 0
    duration_s: Annotated[Seconds | None, Field(gt=0)] = None
    as_: Annotated[str | None, AfterValidator(_check_binding), Field(alias="as")] = None
    after: Annotated[str | None, AfterValidator(_check_condition)] = None
    timeout_s: Seconds = Field(60, gt=0)  # how long `after` may take before the step fails
    # Typed by `fault`'s own model; SerializeAsAny dumps that model's fields into spec.json.
    params: SerializeAsAny[FaultParams] = Field(default_factory=NoParams, validate_default=True)

    @model_validator(mode="before")
    @classmethod
    def _whole_cluster_target(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("fault") not in FAULT_TYPES:
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
        match = _BOUND_TARGET.match(self.target)
        return match.group(1) if match else None

    @property
    def partition_binding(self) -> str | None:
        """The name of an `@name` partition (the one that node led), None for a number."""
        return self.partition[1:] if isinstance(self.partition, str) else None

    @property
    def condition(self) -> Condition | None:
        """The parsed `after` condition (validated when the step was)."""
        return None if self.after is None else parse_condition(self.after)

    @property
    def end_s(self) -> float | None:
        """Seconds after the workload start at which this fault is healed, when planned so."""
        if self.at_s is None or self.duration_s is None:
            return None
        return self.at_s + self.duration_s


class FaultGenerator(_Section):
    """A random schedule: exponential gaps, uniform kinds, targets and durations."""

    mean_interval_s: Seconds = Field(gt=0)
    faults: list[FaultName] = Field(min_length=1)
    targets: list[Target] = Field(min_length=1)
    duration_s: tuple[Seconds, Seconds]
    partition: PartitionIndex = 0

    @field_validator("duration_s")
    @classmethod
    def _ordered(cls, value: tuple[float, float]) -> tuple[float, float]:
        low, high = value
        if not 0 < low <= high:
            raise ValueError(f"must be [min, max] with 0 < min <= max (got [{low:g}, {high:g}])")
        return value


class FaultsSpec(_Section):
    """What the nemesis does: an explicit schedule or a generated one, then a final heal."""

    schedule: list[FaultStep] = Field(default_factory=list)
    generate: FaultGenerator | None = None
    final_heal_timeout_s: Seconds = Field(60, gt=0)


class Experiment(_Section):
    """A whole experiment file; after `expand`, each cell holds one with an empty matrix."""

    name: Annotated[str, AfterValidator(_check_name)]
    description: str = ""
    kafka: KafkaSpec = Field(default_factory=KafkaSpec)
    topic: TopicSpec = Field(default_factory=TopicSpec)
    producer: ProducerSpec = Field(default_factory=ProducerSpec)
    workload: WorkloadSpec = Field(default_factory=WorkloadSpec)
    faults: FaultsSpec = Field(default_factory=FaultsSpec)
    seed: Annotated[whole, at_least(-(2**63)), at_most(2**63 - 1, WHY_SEED)] = 42
    repetitions: Annotated[whole, at_most(MAX_REPETITIONS, WHY_REPETITIONS)] = Field(1, ge=1)
    matrix: dict[str, Any] = Field(default_factory=dict)

    _source: str = PrivateAttr(default="<dict>")


# --- rules across fields (checked on every resolved cell) -------------------------------------


def workload_duration_s(workload: WorkloadSpec) -> float | None:
    """Seconds the workload runs: duration_s, else count/rate; None when not bounded in time."""
    if workload.duration_s is not None:
        return workload.duration_s
    if workload.count is not None and workload.rate is not None:
        return workload.count / workload.rate
    return None


def _kafka_rules(spec: Experiment) -> Iterator[Problem]:
    kafka = spec.kafka
    if not (kafka.version or kafka.image):
        yield "kafka.version", "set kafka.version (built locally) or kafka.image (prebuilt)"
    if kafka.zookeeper_nodes != 1 and kafka.effective_mode() not in (Mode.ZOOKEEPER, None):
        reason = f"applies to kafka.mode zookeeper only (this cell runs {kafka.effective_mode()})"
        yield "kafka.zookeeper_nodes", reason
    if not kafka.version:
        return  # a prebuilt image of an unknown version: nothing to check it against
    version = KafkaVersion.parse(kafka.version)
    if refusal := version_refusal(version):
        yield "kafka.version", refusal
        return
    if refusal := mode_refusal(version, kafka.effective_mode()):
        yield "kafka.mode", refusal
    if spec.producer.enable_idempotence and (reason := lacks(version, Feature.IDEMPOTENCE)):
        yield "producer.enable_idempotence", f"{reason} Fix: set it false for this version."
    elr_keys = [key for key in kafka.broker_config if "eligible.leader.replicas" in str(key)]
    if elr_keys and (reason := lacks(version, Feature.ELR)):
        yield f"kafka.broker_config.{elr_keys[0]}", f"{reason} Fix: remove it for this version."


def _topic_rules(spec: Experiment) -> Iterator[Problem]:
    topic, brokers = spec.topic, spec.kafka.brokers
    if topic.replication_factor > brokers:
        reason = (
            f"{shown(topic.replication_factor)} replicas need as many brokers but kafka.brokers "
            f"is {brokers}; lower topic.replication_factor or raise kafka.brokers"
        )
        yield "topic.replication_factor", reason
    if topic.min_insync_replicas > topic.replication_factor:
        reason = (
            f"{shown(topic.min_insync_replicas)} is more than topic.replication_factor "
            f"({shown(topic.replication_factor)}), so every acks=all write would be refused; "
            f"use 1..{shown(topic.replication_factor)}"
        )
        yield "topic.min_insync_replicas", reason


def _producer_rules(spec: Experiment) -> Iterator[Problem]:
    producer = spec.producer
    if producer.enable_idempotence and producer.acks != "all":
        reason = (
            f'enable_idempotence requires producer.acks: all (got "{producer.acks}"); '
            "set producer.acks: all or producer.enable_idempotence: false"
        )
        yield "producer.enable_idempotence", reason
    if producer.enable_idempotence and producer.max_in_flight > 5:
        reason = (
            f"enable_idempotence allows at most 5 requests in flight (got "
            f"{producer.max_in_flight}); set producer.max_in_flight to 1..5"
        )
        yield "producer.max_in_flight", reason
    if producer.enable_idempotence and producer.retries == 0:
        reason = (
            "enable_idempotence requires retries > 0; set producer.retries: null "
            "(librdkafka default) or a positive number"
        )
        yield "producer.retries", reason
    if 0 < producer.message_timeout_ms <= producer.linger_ms:
        # librdkafka refuses this combination when the producer is created.
        reason = (
            f"must be greater than producer.linger_ms ({producer.linger_ms}), or 0 for no limit"
        )
        yield "producer.message_timeout_ms", reason


def _workload_rules(spec: Experiment) -> Iterator[Problem]:
    workload = spec.workload
    if (workload.duration_s is None) == (workload.count is None):
        reason = "set exactly one of workload.duration_s and workload.count (the other to null)"
        yield "workload.duration_s", reason
    if workload.count is not None and workload.count < workload.producers:
        reason = (
            f"workload.count ({workload.count}) is below workload.producers "
            f"({workload.producers}); count is the total over all producers, so give each "
            "at least one message or use fewer producers"
        )
        yield "workload.count", reason
    horizon = workload_duration_s(workload)
    if workload.duration_s is None and horizon is not None and horizon > MAX_DURATION_S:
        reason = (
            f"workload.count / workload.rate makes the workload last {horizon:,.0f} s; it must "
            f"last at most {MAX_DURATION_S:,} s: {WHY_DURATION}"
        )
        yield "workload.count", reason


def _transaction_rules(spec: Experiment) -> Iterator[Problem]:
    transactions = spec.workload.transactions
    if transactions is None:
        return
    if transactions.abort_every is not None and transactions.abort_ratio is not None:
        reason = "give workload.transactions.abort_every or abort_ratio, not both (null the other)"
        yield "workload.transactions.abort_ratio", reason
    if spec.workload.producers != 1:
        reason = "a transactional workload runs one producer (one transactional.id); set 1"
        yield "workload.producers", reason
    if spec.producer.acks != "all":
        reason = f'transactions require producer.acks: all (got "{spec.producer.acks}")'
        yield "producer.acks", reason
    if not 0 < spec.producer.message_timeout_ms <= transactions.timeout_ms:
        reason = (
            f"librdkafka requires producer.message_timeout_ms ({spec.producer.message_timeout_ms})"
            f" to be 1..workload.transactions.timeout_ms ({transactions.timeout_ms}); lower it "
            "or raise the transaction timeout"
        )
        yield "producer.message_timeout_ms", reason
    if spec.kafka.version and (
        reason := lacks(KafkaVersion.parse(spec.kafka.version), Feature.TRANSACTIONS)
    ):
        yield "workload.transactions", f"{reason} Fix: use Kafka 0.11 or later."


def _target_rules(
    spec: Experiment, target: str, partition: int | str, where: str
) -> Iterator[Problem]:
    """Check a target against the cluster and topic; `where` is the step's or generator's path."""
    transactions = spec.workload.transactions
    if target in COORDINATOR_TARGETS and transactions is None:
        reason = f"{shown(target)} needs workload.transactions (the coordinator of its ids)"
        yield f"{where}.target", reason
    elif target == "group-coordinator" and transactions and not transactions.send_offsets:
        reason = "group-coordinator needs workload.transactions.send_offsets: true"
        yield f"{where}.target", reason
    brokers, partitions = spec.kafka.brokers, spec.topic.partitions
    mode = spec.kafka.effective_mode()
    zookeeper = _ZOOKEEPER_TARGET.match(target)
    if (zookeeper or target == "zookeeper") and mode not in (Mode.ZOOKEEPER, None):
        reason = f"{shown(target)} needs kafka.mode zookeeper (this cell runs {mode})"
        yield f"{where}.target", reason
    elif zookeeper and int(zookeeper.group(1)) > spec.kafka.zookeeper_nodes:
        count = spec.kafka.zookeeper_nodes
        reason = f"{shown(target)} does not exist: kafka.zookeeper_nodes is {count}"
        yield f"{where}.target", reason
    if target == "controllers" and mode is Mode.ZOOKEEPER:
        reason = "zookeeper mode has one elected controller: target `controller` or `zookeeper`"
        yield f"{where}.target", reason
    node = _NODE_TARGET.match(target)
    if node and int(node.group(1)) > brokers:
        reason = (
            f"{shown(target)} does not exist: kafka.brokers is {brokers}; "
            f"use node:1..node:{brokers}"
        )
        yield f"{where}.target", reason
    if target in PARTITION_TARGETS and isinstance(partition, int) and partition >= partitions:
        reason = (
            f"partition {partition} does not exist: topic.partitions is {partitions}; "
            f"use 0..{partitions - 1}"
        )
        yield f"{where}.partition", reason
    if target in PARTITION_TARGETS[1:] and spec.topic.replication_factor < 2:
        reason = f"{shown(target)} needs topic.replication_factor >= 2; target the leader or a node"
        yield f"{where}.target", reason


def _consumer_target_rules(
    spec: Experiment, faults: list[str], targets: list[str], fault_at: str, target_at: str
) -> Iterator[Problem]:
    """Consumer faults target group members, every other fault targets nodes; a member must
    exist. `fault_at` and `target_at` are the fields' paths."""
    on_members = [f for f in faults if f in FAULT_TYPES and FAULT_TYPES[f].acts_on_consumers]
    on_nodes = [f for f in faults if f in FAULT_TYPES and not FAULT_TYPES[f].acts_on_consumers]
    members = [t for t in targets if is_consumer_target(t)]
    if on_members and spec.workload.consumers == 0:
        reason = (
            f"{on_members[0]} acts on the consumer group, but workload.consumers is 0; "
            "set workload.consumers to the size of the group"
        )
        yield fault_at, reason
    if on_members and len(members) < len(targets):
        node = next(t for t in targets if not is_consumer_target(t))
        reason = (
            f"{on_members[0]} acts on consumer group members: target `consumer` or "
            f"consumer-<i>, not {shown(node)}"
        )
        yield target_at, reason
    if on_nodes and members:
        reason = (
            f"{shown(members[0])} is a consumer group member, which only the consumer faults "
            f"({', '.join(n for n, f in FAULT_TYPES.items() if f.acts_on_consumers)}) act on; "
            f"{on_nodes[0]} acts on brokers"
        )
        yield target_at, reason
    for target in members:
        match = _CONSUMER_TARGET.match(target)
        if match and int(match.group(1)) >= spec.workload.consumers:
            reason = (
                f"{shown(target)} does not exist: workload.consumers is "
                f"{spec.workload.consumers}; use consumer-0..consumer-"
                f"{max(spec.workload.consumers - 1, 0)} or `consumer`"
            )
            yield target_at, reason


def _step_rules(spec: Experiment, index: int, step: FaultStep) -> Iterator[Problem]:
    where = f"faults.schedule[{index}]"
    if not step.heals:
        yield from _consumer_target_rules(
            spec, [step.fault], [step.target], f"{where}.fault", f"{where}.target"
        )
    yield from _target_rules(spec, step.target, step.partition, where)
    if not step.heals:
        fault = FAULT_TYPES[step.fault]
        for field, reason in fault.cluster_problems(step.params, spec.kafka.brokers):
            yield f"{where}.{field}", reason
    yield from _condition_partition_rules(spec, step, where)
    horizon = workload_duration_s(spec.workload)
    bound = "workload.duration_s" if spec.workload.duration_s else "workload.count / rate"
    if horizon is not None and step.end_s is not None and step.end_s >= horizon:
        reason = (
            f"step {index} ends at {step.end_s:g} s (at_s + duration_s), not before the "
            f"workload ends at {horizon:g} s ({bound}); start it earlier, "
            "shorten it, or lengthen the workload"
        )
        yield where, reason
    elif horizon is not None and step.at_s is not None and step.at_s >= horizon:
        reason = f"step {index} starts at {step.at_s:g} s, after the workload ends at {horizon:g} s"
        yield f"{where}.at_s", f"{reason} ({bound}); start it earlier or lengthen the workload"


def _condition_partition_rules(spec: Experiment, step: FaultStep, where: str) -> Iterator[Problem]:
    partitions = spec.topic.partitions
    condition = step.condition
    for partition in condition.partitions if condition else ():
        if partition >= partitions:
            reason = (
                f"the condition {shown(step.after)} reads partition {partition}, which does not "
                f"exist: topic.partitions is {partitions}; use 0..{partitions - 1}"
            )
            yield f"{where}.after", reason


def _sequence_rules(spec: Experiment) -> Iterator[Problem]:
    """What only the order of steps decides: start times, names bound before use, heals."""
    bound: dict[str, int] = {}  # name → the step that bound it
    open_faults: set[str] = set()  # names whose fault has no duration and is not healed yet
    last_at = 0.0
    for index, step in enumerate(spec.faults.schedule):
        where = f"faults.schedule[{index}]"
        if step.at_s is not None:
            if step.at_s < last_at:
                reason = (
                    f"starts at {step.at_s:g} s, before the previous step's {last_at:g} s; steps "
                    "run in file order: list them in the order they happen"
                )
                yield f"{where}.at_s", reason
            last_at = max(last_at, step.at_s)
        used = [step.bound_target] if step.bound_target else []
        used += [step.partition_binding] if step.partition_binding else []
        used += list(step.condition.names) if step.condition else []
        for name in used:
            if name not in bound:
                later = " (it is bound later)" if _binds_later(spec, index, name) else ""
                reason = (
                    f"@{name} is used before any earlier step binds it with `as: {name}`"
                    f"{later}; bind it on an earlier step"
                )
                yield where, reason
        if step.heals:
            yield from _heal_rules(step, where, open_faults, bound)
            continue
        if step.as_ is not None:
            if step.as_ in bound:
                reason = f"{step.as_!r} is already bound by step {bound[step.as_]}; use a new name"
                yield f"{where}.as", reason
            bound[step.as_] = index
            if step.duration_s is None:
                open_faults.add(step.as_)


def _binds_later(spec: Experiment, index: int, name: str) -> bool:
    return any(step.as_ == name for step in spec.faults.schedule[index + 1 :])


def _heal_rules(
    step: FaultStep, where: str, open_faults: set[str], bound: dict[str, int]
) -> Iterator[Problem]:
    name = step.bound_target
    if name is None:
        reason = (
            f"a heal step names the fault it ends as @name (got {shown(step.target)}); bind the "
            "fault's step with `as: name` and leave out its duration_s"
        )
        yield f"{where}.target", reason
    elif name in bound and name not in open_faults:
        reason = (
            f"heals @{name}, but no fault bound to it is still active (the step that bound it "
            "has a duration_s, or an earlier step already healed it): nothing to heal"
        )
        yield f"{where}.target", reason
    open_faults.discard(name or "")
    if step.duration_s is not None or step.as_ is not None:
        yield where, "a heal step takes no duration_s and no `as`; it ends at once"


def _generator_rules(spec: Experiment, plan: FaultGenerator) -> Iterator[Problem]:
    where = "faults.generate"
    if HEAL in plan.faults:
        yield f"{where}.faults", "heal ends a named fault; a generated schedule heals each itself"
    yield from _consumer_target_rules(
        spec, list(plan.faults), list(plan.targets), f"{where}.faults", f"{where}.targets"
    )
    for target in dict.fromkeys(plan.targets):
        if _BOUND_TARGET.match(target):
            yield f"{where}.targets", f"{target}: a generated schedule binds no names"
        yield from _target_rules(spec, target, plan.partition, where)
    horizon = workload_duration_s(spec.workload)
    if horizon is None:
        reason = (
            "a generated schedule needs a time bound: set workload.duration_s, or "
            "workload.rate together with workload.count"
        )
        yield where, reason
    elif plan.duration_s[0] >= horizon:
        reason = (
            f"the shortest fault ({plan.duration_s[0]:g} s) does not fit in the workload "
            f"({horizon:g} s); shorten the faults or lengthen the workload"
        )
        yield f"{where}.duration_s", reason


def _format_rules(spec: Experiment) -> Iterator[Problem]:
    """power-loss cuts logs at record-batch boundaries it reads: message format v2 only."""
    if not spec.kafka.version:
        return
    reason = lacks(KafkaVersion.parse(spec.kafka.version), Feature.RECORD_BATCH_V2)
    if reason is None:
        return
    why = f"{reason} The power-loss model reads v2 record batches. Fix: use Kafka 0.11 or later."
    for index, step in enumerate(spec.faults.schedule):
        if step.fault == "power-loss":
            yield f"faults.schedule[{index}].fault", why
    if spec.faults.generate is not None and "power-loss" in spec.faults.generate.faults:
        yield "faults.generate.faults", why


def _fault_rules(spec: Experiment) -> Iterator[Problem]:
    faults = spec.faults
    if faults.schedule and faults.generate is not None:
        reason = "give either faults.schedule (explicit steps) or faults.generate, not both"
        yield "faults.generate", reason
    for index, step in enumerate(faults.schedule):
        yield from _step_rules(spec, index, step)
    yield from _sequence_rules(spec)
    if faults.generate is not None:
        yield from _generator_rules(spec, faults.generate)
    yield from _format_rules(spec)


def rule_problems(spec: Experiment) -> list[Problem]:
    """Every rule that relates fields of different sections, on a resolved experiment."""
    rules = (
        _kafka_rules,
        _topic_rules,
        _producer_rules,
        _workload_rules,
        _transaction_rules,
        _fault_rules,
    )
    return [problem for rule in rules for problem in rule(spec)]
