"""The words of an experiment file and the checks each field makes on its own.

Fault targets and their patterns, the limits' reasons, the producer and topic settings the
harness owns, and the field validators the models of spec.py attach (none knows another
section: rules.py relates sections).
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field

from harness.chaos.conditions import ConditionError, parse_condition
from harness.chaos.faults import FAULT_TYPES
from harness.experiment.problems import RawDocument
from harness.limits import (
    MAX_DURATION_S,
    MAX_NAME,
    MAX_PARTITIONS,
    WHY_DURATION,
    at_most,
    number,
    shown,
    whole,
)

Acks = Literal["0", "1", "all"]
# Targets that name replicas of the step's partition, resolved when the step acts, with what
# each names (`kafka-chaos list targets` prints these words).
PARTITION_TARGET_MEANINGS: dict[str, str] = {
    "leader": "the leader of the step's partition",
    "follower": "one follower of the step's partition, chosen with the repetition's seed",
    "followers": "every follower of the step's partition",
    "isr": "the in-sync followers of the step's partition (the leader excluded)",
    "out-of-sync": "the replicas of the step's partition outside its ISR",
    "successor": "the follower Kafka elects next: the first in-sync one in assignment order",
    "replica": "one replica of the step's partition, leader or not, chosen with the seed",
}
PARTITION_TARGETS: tuple[str, ...] = tuple(PARTITION_TARGET_MEANINGS)
# The leader of the __transaction_state partition of the workload's transactional.id, and of
# the __consumer_offsets partition of its group (workload.transactions only).
COORDINATOR_TARGET_MEANINGS: dict[str, str] = {
    "txn-coordinator": "the leader of the __transaction_state partition of the workload's "
    "transactional.id",
    "group-coordinator": "the leader of the __consumer_offsets partition of the workload's group",
}
COORDINATOR_TARGETS: tuple[str, ...] = tuple(COORDINATOR_TARGET_MEANINGS)
# Every role a step may target, resolved when the step acts, with what it names.
TARGET_MEANINGS: dict[str, str] = {
    **PARTITION_TARGET_MEANINGS,
    "controller": "the active controller, in every mode",
    "controller-follower": "a KRaft controller other than the active one, chosen with the seed",
    "controllers": "every KRaft controller (in kraft mode: the combined nodes)",
    "zookeeper": "every ZooKeeper server (zookeeper mode)",
    "brokers": "every broker, as `all`",
    "random": "one broker, chosen with the repetition's seed",
    "all": "every broker (and a fault that hits the whole cluster, whatever its target)",
    "consumer": "a member of the consumer group (workload.consumers), chosen with the seed",
    **COORDINATOR_TARGET_MEANINGS,
}
TARGET_ROLES: tuple[str, ...] = tuple(TARGET_MEANINGS)
# The targets a change of the quorum's voters (remove-controller) may name: one controller.
QUORUM_TARGETS: tuple[str, ...] = ("controller", "controller-follower")
Scalar = str | int | float | bool
HEAL = "heal"  # the step `fault: heal, target: "@name"` ends the open fault bound to name

_NAME = re.compile(r"^[a-z0-9_-]+$")
_CONFIG_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
NODE_TARGET = re.compile(r"^node:([1-9][0-9]*)$")
ZOOKEEPER_TARGET = re.compile(r"^zookeeper:([1-9][0-9]*)$")
_BOUND_NAME = "[a-z][a-z0-9_]*"  # what `as:` binds, written @name where it is used
BOUND_TARGET = re.compile(rf"^@({_BOUND_NAME})$")
CONSUMER_TARGET = re.compile(r"^consumer-([0-9]+)$")
_BINDING = re.compile(rf"^{_BOUND_NAME}$")
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
    "each consumer is an OS process with its own client (a JVM with the Java client); a group "
    "larger than the topic's partitions leaves members idle anyway"
)
WHY_PROCESSING = (
    "a member processes batches of up to 500 messages between polls, and librdkafka drops it "
    "from the group when a batch outlasts max.poll.interval.ms (300 s)"
)
WHY_COUNT = "1,000,000 messages/s (the rate limit) for 7 days (the duration limit)"
WHY_LIBRDKAFKA = "librdkafka's own maximum"
WHY_SEED = "a 64-bit integer"


def _matching(pattern: re.Pattern[str], problem: str) -> Callable[[str | None], str | None]:
    """A check of an optional text field: ValueError "<value> <problem>" unless it matches."""

    def check(value: str | None) -> str | None:
        if value is not None and not pattern.match(value):
            raise ValueError(f"{shown(value)} {problem}")
        return value

    return check


kafka_release = _matching(
    _KAFKA_RELEASE,
    'is not a Kafka release; write 3 or 4 dot-separated numbers, e.g. "4.3.1" or "0.10.2.2"',
)
check_binding = _matching(
    _BINDING,
    "is not a name; use lowercase letters, digits and '_', starting with a letter (later steps "
    "write it as @name)",
)
_valid_name = _matching(
    _NAME,
    "is not a valid name; use lowercase letters, digits, '-' and '_' (it names the run directory)",
)


def check_name(value: str) -> str:
    if len(value) > MAX_NAME:
        raise ValueError(
            f"is {len(value)} characters long; use at most {MAX_NAME} "
            "(it names the run directory, and file names have a length limit)"
        )
    _valid_name(value)
    return value


def check_config_map(value: RawDocument) -> dict[str, Scalar]:
    for key, item in value.items():
        if not isinstance(key, str) or not _CONFIG_KEY.match(key):
            raise ValueError(
                f"{shown(key)} is not a config key; write keys dotted, e.g. retention.ms"
            )
        if isinstance(item, dict):
            # YAML turns `retention: {ms: 1}` into a nested mapping Kafka would never see.
            raise ValueError(f"'{key}' holds a mapping; write it as one dotted key: '{key}.<name>'")
        if not isinstance(item, Scalar):
            raise ValueError(f"'{key}' must be a string, number or boolean (got {shown(item)})")
        if isinstance(item, float) and not math.isfinite(item):
            raise ValueError(f"'{key}' must be a finite number (got {shown(item)})")
    return value


def normalise_acks(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError(f'acks must be "0", "1" or "all" (got {value!r})')
    if isinstance(value, int):
        value = str(value)
    if isinstance(value, str):
        value = value.strip().lower()
        return "all" if value == "-1" else value
    return value


def quoted_version(value: Any) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool):
        # YAML reads 4.10 as the float 4.1; only a quoted string keeps the version intact.
        raise ValueError(f'YAML read the version as a number; quote it: version: "{value}"')
    return value


def non_empty_image(value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise ValueError(
            "is empty; give an image reference (e.g. apache/kafka:4.3.1), or null to build "
            "kafka.version locally"
        )
    return value


def check_target(value: str) -> str:
    if value in TARGET_ROLES or any(
        pattern.match(value)
        for pattern in (NODE_TARGET, ZOOKEEPER_TARGET, BOUND_TARGET, CONSUMER_TARGET)
    ):
        return value
    raise ValueError(
        f"unknown target {shown(value)}; use {', '.join(TARGET_ROLES)}, node:<id>, "
        "zookeeper:<i>, consumer-<i> or @name (an earlier step's `as:`)"
    )


def check_condition(value: str | None) -> str | None:
    if value is not None:
        try:
            parse_condition(value)
        except ConditionError as exc:
            raise ValueError(str(exc)) from None
    return value


MAX_FAULT_NAME = 40  # longer than any fault's name by far: an unknown one is not a typo


def check_fault(value: str) -> str:
    if value in FAULT_TYPES or value == HEAL:
        return value
    close = difflib.get_close_matches(value, list(FAULT_TYPES), n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    if len(value) > MAX_FAULT_NAME:  # not a typo: the whole list would only make it longer
        raise ValueError(f"unknown fault {shown(value)}; `kafka-chaos list faults` names them")
    kinds = ", ".join([*FAULT_TYPES, HEAL])
    raise ValueError(f"unknown fault {shown(value)}; {hint}use one of {kinds}")


ConfigMap = Annotated[dict[Any, Any], AfterValidator(check_config_map)]
Target = Annotated[str, AfterValidator(check_target)]
FaultName = Annotated[str, AfterValidator(check_fault)]
Seconds = Annotated[number, at_most(MAX_DURATION_S, WHY_DURATION, "s")]
PartitionIndex = Annotated[
    whole, Field(ge=0), at_most(MAX_PARTITIONS - 1, f"topic.partitions is at most {MAX_PARTITIONS}")
]
# The lowest partition whose leader and successor are not the active controller, read when the
# step acts: a replay strikes a partition whose line of succession the controller stays out of,
# as the run's struck partition's did (nemesis/targets.py, experiment/struck.py).
AWAY_FROM_CONTROLLER = "away-from-controller"
_NAMED_PARTITION = re.compile(rf"^(@{_BOUND_NAME}|{AWAY_FROM_CONTROLLER})$")


def check_step_partition(value: Any) -> Any:
    """A step's partition as written: a number 0..MAX_PARTITIONS-1, "@name" or
    away-from-controller; one ValueError naming the three forms otherwise."""
    if isinstance(value, str) and _NAMED_PARTITION.match(value):
        return value
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_PARTITIONS:
        return value
    raise ValueError(
        f'must be a partition number (0 to {MAX_PARTITIONS - 1}), "@name" (the lowest '
        f"partition the nodes bound to name led) or {AWAY_FROM_CONTROLLER} (got {shown(value)})"
    )


# A step's partition: a number, "@name" or away-from-controller (check_step_partition).
StepPartition = Annotated[int | str, BeforeValidator(check_step_partition)]

# Kafka's names of the settings the topic section holds as fields.
TOPIC_KEY_FIELDS = {
    "min.insync.replicas": "min_insync_replicas",
    "unclean.leader.election.enable": "unclean_leader_election",
}
# Kafka's and librdkafka's names of the settings the producer section holds as fields: the
# name librdkafka is given first (plan.producer_settings, in this order), then the aliases.
PRODUCER_FIELD_KEYS: dict[str, tuple[str, ...]] = {
    "acks": ("acks", "request.required.acks"),
    "enable_idempotence": ("enable.idempotence",),
    "max_in_flight": ("max.in.flight.requests.per.connection", "max.in.flight"),
    "linger_ms": ("linger.ms", "queue.buffering.max.ms"),
    "request_timeout_ms": ("request.timeout.ms",),
    "message_timeout_ms": ("message.timeout.ms", "delivery.timeout.ms"),
    "retries": ("retries", "message.send.max.retries"),
}
PRODUCER_KEY_FIELDS = {key: field for field, keys in PRODUCER_FIELD_KEYS.items() for key in keys}
PRODUCER_OWNED_KEYS = {
    **{key: f"use producer.{field}" for key, field in PRODUCER_KEY_FIELDS.items()},
    **dict.fromkeys(
        ("bootstrap.servers", "metadata.broker.list"),
        "the harness points the producer at the cluster it starts; remove it",
    ),
}


def _refusing(owned: dict[str, str]) -> AfterValidator:
    """A config map's check refusing the keys of `owned`, each with its fix."""

    def check(value: dict[str, Scalar]) -> dict[str, Scalar]:
        for key in value:
            if key in owned:
                raise ValueError(f"'{key}' must not be set here; {owned[key]}")
        return value

    return AfterValidator(check)


TopicConfig = Annotated[
    ConfigMap, _refusing({key: f"use topic.{field}" for key, field in TOPIC_KEY_FIELDS.items()})
]
ProducerConfig = Annotated[ConfigMap, _refusing(PRODUCER_OWNED_KEYS)]
