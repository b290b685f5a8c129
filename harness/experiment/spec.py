"""Experiment files: the validated model, the configuration matrix and the fault schedule.

An experiment is a declarative YAML file validated before anything runs; every mistake a user
can make becomes a SpecError naming the file, the field and the fix. The matrix expands one
experiment into cells (each a fully resolved Experiment), and `schedule_for` turns a cell into
the fault steps the nemesis plays.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import itertools
import random
import re
import types
import typing
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

__all__ = [
    "FAULT_KINDS",
    "PARTITION_MODES",
    "TARGET_ROLES",
    "Cell",
    "Experiment",
    "FaultGenerator",
    "FaultKind",
    "FaultStep",
    "FaultsSpec",
    "KafkaSpec",
    "ProducerSpec",
    "SpecError",
    "TopicSpec",
    "WorkloadSpec",
    "cell_config",
    "expand",
    "fault_class",
    "load_experiment",
    "parse_experiment",
    "producer_settings",
    "schedule_for",
    "topic_settings",
    "workload_duration_s",
]

Acks = Literal["0", "1", "all"]
FaultKind = Literal[
    "kill",
    "stop",
    "pause",
    "partition",
    "loss",
    "slow",
    "kill-all",
    "power-loss",
    "rolling-restart",
]
FAULT_KINDS: tuple[str, ...] = get_args(FaultKind)
TARGET_ROLES: tuple[str, ...] = ("leader", "follower", "controller", "random", "all")
PARTITION_MODES: tuple[str, ...] = ("from-brokers", "full", "groups")
Scalar = str | int | float | bool
Problem = tuple[str, str]  # (field path, reason and fix)

CELL_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9=._-]")
_CELL_NAME_MAX = 200  # well under the 255-byte file-name limit, leaving room for suffixes
_NAME = re.compile(r"^[a-z0-9_-]+$")
_CONFIG_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_NODE_TARGET = re.compile(r"^node:([1-9][0-9]*)$")


class SpecError(ValueError):
    """An experiment a user wrote is invalid; the message names the file, the field and the fix."""

    def __init__(self, message: str, *, source: str = "", problems: Sequence[Problem] = ()):
        super().__init__(message)
        self.source = source
        self.problems = list(problems)


def _spec_error(source: str, problems: Sequence[Problem], headline: str = "invalid experiment"):
    lines = "\n".join(f"  {path}: {reason}" for path, reason in problems)
    return SpecError(f"{source}: {headline}:\n{lines}", source=source, problems=problems)


# --- field-level checks (no knowledge of other sections) ---------------------------------------


def _check_name(value: str) -> str:
    if not _NAME.match(value):
        raise ValueError(
            f"'{value}' is not a valid name; use lowercase letters, digits, '-' and '_' "
            "(it names the run directory)"
        )
    return value


def _check_config_map(value: dict[str, Any]) -> dict[str, Any]:
    for key, item in value.items():
        if not _CONFIG_KEY.match(key):
            raise ValueError(f"'{key}' is not a config key; write keys dotted, e.g. retention.ms")
        if isinstance(item, dict):
            # YAML turns `retention: {ms: 1}` into a nested mapping Kafka would never see.
            raise ValueError(f"'{key}' holds a mapping; write it as one dotted key: '{key}.<name>'")
        if not isinstance(item, Scalar):
            raise ValueError(f"'{key}' must be a string, number or boolean (got {item!r})")
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


def _check_target(value: str) -> str:
    if value in TARGET_ROLES or _NODE_TARGET.match(value):
        return value
    raise ValueError(
        f"unknown target '{value}'; use {', '.join(TARGET_ROLES)} or node:<id> (id 1..brokers)"
    )


ConfigMap = Annotated[dict[str, Any], AfterValidator(_check_config_map)]
Target = Annotated[str, AfterValidator(_check_target)]

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

# Fault params: which keys each kind takes and the defaults filled in, so the nemesis and
# spec.json always see the values actually used.
_PARAM_KEYS: dict[str, tuple[str, ...]] = {
    "partition": ("mode", "groups"),
    "loss": ("percent",),
    "slow": ("rate_kbit", "delay_ms"),
    "stop": ("timeout_s",),
    "power-loss": ("window_s",),
    "rolling-restart": ("timeout_s", "rejoin_timeout_s"),
}
_PARAM_DEFAULTS: dict[str, dict[str, Any]] = {
    "partition": {"mode": "from-brokers"},
    "loss": {"percent": 30},
    "slow": {"rate_kbit": 256},
    "stop": {"timeout_s": 60},
    "power-loss": {"window_s": 30},  # Linux writes dirty pages back after 30 s
    "rolling-restart": {"timeout_s": 60, "rejoin_timeout_s": 60},
}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_groups(groups: Any) -> None:
    shape = "params.groups must be a list of lists of node ids, e.g. [[1], [2, 3]]"
    if not isinstance(groups, list) or not groups:
        raise ValueError(shape)
    seen: set[int] = set()
    for group in groups:
        if not isinstance(group, list) or not group:
            raise ValueError(shape)
        for node in group:
            if not _is_whole(node) or node < 1:
                raise ValueError(f"{shape} (got {node!r})")
            if node in seen:
                raise ValueError(f"node {node} appears in two params.groups; list it once")
            seen.add(node)


def _check_partition_params(params: dict[str, Any]) -> None:
    mode = params["mode"]
    if mode not in PARTITION_MODES:
        raise ValueError(f"params.mode '{mode}' is unknown; use {', '.join(PARTITION_MODES)}")
    if mode == "groups":
        if "groups" not in params:
            raise ValueError("params.mode groups needs params.groups, e.g. [[1], [2, 3]]")
        _check_groups(params["groups"])
    elif "groups" in params:
        raise ValueError("params.groups is only used with params.mode: groups; remove it")


def _check_loss_params(params: dict[str, Any]) -> None:
    percent = params["percent"]
    if not _is_number(percent) or not 1 <= percent <= 100:
        raise ValueError(f"params.percent must be a number from 1 to 100 (got {percent!r})")


def _check_slow_params(params: dict[str, Any]) -> None:
    # tc takes whole kbit/s and milliseconds.
    rate = params["rate_kbit"]
    if not _is_whole(rate) or rate < 1:
        raise ValueError(f"params.rate_kbit must be a whole number >= 1 (got {rate!r})")
    delay = params.get("delay_ms")
    if delay is not None and (not _is_whole(delay) or delay < 0):
        raise ValueError(f"params.delay_ms must be a whole number >= 0 (got {delay!r})")


def _check_stop_params(params: dict[str, Any]) -> None:
    timeout = params["timeout_s"]
    if not _is_whole(timeout) or timeout < 1:
        raise ValueError(
            f"params.timeout_s (seconds to shut down before SIGKILL) must be a whole number "
            f">= 1 (got {timeout!r})"
        )


def _check_power_loss_params(params: dict[str, Any]) -> None:
    window = params["window_s"]
    if window is not None and (not _is_number(window) or window < 0):
        raise ValueError(
            "params.window_s (seconds of unflushed writes lost; null = all since the last "
            f"flush) must be a number >= 0 or null (got {window!r})"
        )


def _check_rolling_restart_params(params: dict[str, Any]) -> None:
    _check_stop_params(params)
    rejoin = params["rejoin_timeout_s"]
    if not _is_number(rejoin) or rejoin <= 0:
        raise ValueError(
            "params.rejoin_timeout_s (seconds a restarted node may take to rejoin the ISR "
            f"before the next goes down) must be a number > 0 (got {rejoin!r})"
        )


_PARAM_CHECKS = {
    "power-loss": _check_power_loss_params,
    "rolling-restart": _check_rolling_restart_params,
    "partition": _check_partition_params,
    "loss": _check_loss_params,
    "slow": _check_slow_params,
    "stop": _check_stop_params,
}


def _normalise_params(kind: str, params: dict[str, Any]) -> dict[str, Any]:
    allowed = _PARAM_KEYS.get(kind, ())
    for key in params:
        if key not in allowed:
            takes = f"it takes {', '.join(allowed)}" if allowed else "it takes no params"
            raise ValueError(f"unknown param '{key}' for fault {kind}; {takes}")
    merged = {**_PARAM_DEFAULTS.get(kind, {}), **params}
    if kind in _PARAM_CHECKS:
        _PARAM_CHECKS[kind](merged)
    return merged


def _hits_whole_cluster(kind: Any, params: Any) -> bool:
    """True for faults whose target is meaningless: they always act on every broker."""
    groups = kind == "partition" and isinstance(params, dict) and params.get("mode") == "groups"
    return kind == "kill-all" or groups


# --- the model ---------------------------------------------------------------------------------


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class KafkaSpec(_Section):
    """Which Kafka runs and on how many brokers."""

    version: Annotated[str | None, BeforeValidator(_quoted_version)] = "4.3.1"
    image: str | None = None
    brokers: int = Field(3, ge=3, le=5)
    broker_config: ConfigMap = Field(default_factory=dict)


class TopicSpec(_Section):
    """The topic the workload writes, created fresh for every cell."""

    partitions: int = Field(3, ge=1)
    replication_factor: int = Field(3, ge=1)
    min_insync_replicas: int = Field(2, ge=1)
    unclean_leader_election: bool = False
    config: ConfigMap = Field(default_factory=dict)

    @field_validator("config")
    @classmethod
    def _no_first_class_keys(cls, value: dict[str, Any]) -> dict[str, Any]:
        return _reject_owned_keys(value, _TOPIC_OWNED_KEYS)


class ProducerSpec(_Section):
    """The recorder's librdkafka producer; settings that decide durability are fields."""

    acks: Annotated[Acks, BeforeValidator(_normalise_acks)] = "all"
    enable_idempotence: bool = False
    max_in_flight: int = Field(5, ge=1, le=1_000_000)
    retries: int | None = Field(None, ge=0)
    linger_ms: int = Field(5, ge=0, le=900_000)
    request_timeout_ms: int = Field(5000, ge=1, le=900_000)
    message_timeout_ms: int = Field(30000, ge=0)
    config: ConfigMap = Field(default_factory=dict)

    @field_validator("config")
    @classmethod
    def _no_first_class_keys(cls, value: dict[str, Any]) -> dict[str, Any]:
        return _reject_owned_keys(value, _PRODUCER_OWNED_KEYS)


class WorkloadSpec(_Section):
    """How much the producer sends: at `rate` for `duration_s` seconds or `count` messages."""

    rate: float | None = Field(2000, gt=0)
    duration_s: float | None = Field(60, gt=0)
    count: int | None = Field(None, ge=1)
    # The value carries the message id and per-key sequence the read-back parses.
    message_bytes: int = Field(100, ge=32, le=1_000_000)
    keys: int = Field(16, ge=1)


class FaultStep(_Section):
    """One fault: injected `at_s` seconds after the workload starts, healed `duration_s` later."""

    at_s: float = Field(ge=0)
    fault: FaultKind
    target: Target
    partition: int = Field(0, ge=0)
    duration_s: float = Field(gt=0)
    params: dict[str, Any] = Field(default_factory=dict, validate_default=True)

    @model_validator(mode="before")
    @classmethod
    def _whole_cluster_target(cls, data: Any) -> Any:
        if isinstance(data, dict) and _hits_whole_cluster(data.get("fault"), data.get("params")):
            return {**data, "target": "all"}
        return data

    @field_validator("params")
    @classmethod
    def _params_for_kind(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        kind = info.data.get("fault")
        return value if kind is None else _normalise_params(kind, value)

    @property
    def end_s(self) -> float:
        """Seconds after the workload start at which this fault is healed."""
        return self.at_s + self.duration_s


class FaultGenerator(_Section):
    """A random schedule: exponential gaps, uniform kinds, targets and durations."""

    mean_interval_s: float = Field(gt=0)
    faults: list[FaultKind] = Field(min_length=1)
    targets: list[Target] = Field(min_length=1)
    duration_s: tuple[float, float]
    partition: int = Field(0, ge=0)

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
    final_heal_timeout_s: float = Field(60, gt=0)


class Experiment(_Section):
    """A whole experiment file; after `expand`, each cell holds one with an empty matrix."""

    name: Annotated[str, AfterValidator(_check_name)]
    description: str = ""
    kafka: KafkaSpec = Field(default_factory=KafkaSpec)
    topic: TopicSpec = Field(default_factory=TopicSpec)
    producer: ProducerSpec = Field(default_factory=ProducerSpec)
    workload: WorkloadSpec = Field(default_factory=WorkloadSpec)
    faults: FaultsSpec = Field(default_factory=FaultsSpec)
    seed: int = 42
    repetitions: int = Field(1, ge=1)
    matrix: dict[str, Any] = Field(default_factory=dict)

    _source: str = PrivateAttr(default="<dict>")


@dataclass(frozen=True)
class Cell:
    """One point of the matrix: its name, its axis values and the resolved experiment."""

    name: str
    axes: dict[str, str]
    spec: Experiment
    index: int


# --- rules across fields (checked on every resolved cell) -------------------------------------


def workload_duration_s(workload: WorkloadSpec) -> float | None:
    """Seconds the workload runs: duration_s, else count/rate; None when not bounded in time."""
    if workload.duration_s is not None:
        return workload.duration_s
    if workload.count is not None and workload.rate is not None:
        return workload.count / workload.rate
    return None


def _kafka_rules(spec: Experiment) -> Iterator[Problem]:
    if not (spec.kafka.version or spec.kafka.image):
        yield "kafka.version", "set kafka.version (built locally) or kafka.image (prebuilt)"


def _topic_rules(spec: Experiment) -> Iterator[Problem]:
    topic, brokers = spec.topic, spec.kafka.brokers
    if topic.replication_factor > brokers:
        reason = (
            f"{topic.replication_factor} replicas need as many brokers but kafka.brokers is "
            f"{brokers}; lower topic.replication_factor or raise kafka.brokers"
        )
        yield "topic.replication_factor", reason
    if topic.min_insync_replicas > topic.replication_factor:
        reason = (
            f"{topic.min_insync_replicas} is more than topic.replication_factor "
            f"({topic.replication_factor}), so every acks=all write would be refused; "
            f"use 1..{topic.replication_factor}"
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


def _target_rules(spec: Experiment, target: str, partition: int, where: str) -> Iterator[Problem]:
    """Check a target against the cluster and topic; `where` is the step's or generator's path."""
    brokers, partitions = spec.kafka.brokers, spec.topic.partitions
    node = _NODE_TARGET.match(target)
    if node and int(node.group(1)) > brokers:
        reason = f"{target} does not exist: kafka.brokers is {brokers}; use node:1..node:{brokers}"
        yield f"{where}.target", reason
    if target in ("leader", "follower") and partition >= partitions:
        reason = (
            f"partition {partition} does not exist: topic.partitions is {partitions}; "
            f"use 0..{partitions - 1}"
        )
        yield f"{where}.partition", reason
    if target == "follower" and spec.topic.replication_factor < 2:
        reason = "a follower needs topic.replication_factor >= 2; target the leader or a node"
        yield f"{where}.target", reason


def _group_rules(spec: Experiment, step: FaultStep, where: str) -> Iterator[Problem]:
    groups = step.params.get("groups", []) if step.fault == "partition" else []
    if not groups:
        return
    brokers = spec.kafka.brokers
    listed = set(itertools.chain.from_iterable(groups))
    for node in sorted(listed):
        if node > brokers:
            yield (
                f"{where}.params.groups",
                f"node {node} does not exist: kafka.brokers is {brokers}",
            )
    # Nodes in no group form one more group; a partition needs at least two sides.
    if len(groups) + (len(listed) < brokers) < 2:
        reason = "all brokers are in one group, so nothing is cut; list at least two groups"
        yield f"{where}.params.groups", reason


def _step_rules(spec: Experiment, index: int, step: FaultStep) -> Iterator[Problem]:
    where = f"faults.schedule[{index}]"
    yield from _target_rules(spec, step.target, step.partition, where)
    yield from _group_rules(spec, step, where)
    duration = spec.workload.duration_s
    if duration is not None and step.end_s >= duration:
        reason = (
            f"step {index} ends at {step.end_s:g} s (at_s + duration_s), not before the "
            f"workload ends at {duration:g} s (workload.duration_s); start it earlier, "
            "shorten it, or lengthen the workload"
        )
        yield where, reason


def _generator_rules(spec: Experiment, plan: FaultGenerator) -> Iterator[Problem]:
    where = "faults.generate"
    for target in dict.fromkeys(plan.targets):
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


def _fault_rules(spec: Experiment) -> Iterator[Problem]:
    faults = spec.faults
    if faults.schedule and faults.generate is not None:
        reason = "give either faults.schedule (explicit steps) or faults.generate, not both"
        yield "faults.generate", reason
    for index, step in enumerate(faults.schedule):
        yield from _step_rules(spec, index, step)
    if faults.generate is not None:
        yield from _generator_rules(spec, faults.generate)


def _rule_problems(spec: Experiment) -> list[Problem]:
    """Every rule that relates fields of different sections, on a resolved experiment."""
    rules = (_kafka_rules, _topic_rules, _producer_rules, _workload_rules, _fault_rules)
    return [problem for rule in rules for problem in rule(spec)]


# --- readable pydantic errors ------------------------------------------------------------------


def _dotted(loc: Sequence[str | int]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


def _unwrap(annotation: Any) -> Any:
    """Strip Annotated and `X | None` so the underlying field type can be inspected."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            members = [arg for arg in get_args(annotation) if arg is not type(None)]
            if len(members) != 1:
                return annotation
            annotation = members[0]
        else:
            return annotation


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _model_at(loc: Sequence[str | int]) -> type[BaseModel] | None:
    """The model class that holds the keys at `loc`, or None when `loc` is not inside a model."""
    model: type[BaseModel] = Experiment
    for part in loc:
        if isinstance(part, int):
            continue
        field_info = model.model_fields.get(part)
        if field_info is None:
            return None
        annotation = _unwrap(field_info.annotation)
        if get_origin(annotation) is list:
            annotation = _unwrap(get_args(annotation)[0])
        if not _is_model(annotation):
            return None
        model = annotation
    return model


def _unknown_key(loc: Sequence[str | int]) -> str:
    key = str(loc[-1])
    model = _model_at(loc[:-1])
    if model is None:
        return f"unknown key '{key}'; remove it"
    allowed = list(model.model_fields)
    close = difflib.get_close_matches(key, allowed, n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    return f"unknown key '{key}'; {hint}allowed here: {', '.join(allowed)}"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _explain(error: Any) -> str:
    loc, kind = tuple(error["loc"]), error["type"]
    if kind == "extra_forbidden":
        return _unknown_key(loc)
    if kind == "missing":
        return "required; add this key"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"must be a mapping of keys to values (got {_short(error['input'])})"
    message = error["msg"].removeprefix("Value error, ")
    if kind == "value_error":
        return message
    return f"{message} (got {_short(error['input'])})"


def _pydantic_problems(error: ValidationError) -> list[Problem]:
    return [(_dotted(item["loc"]) or "(document)", _explain(item)) for item in error.errors()]


# --- matrix ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _OverrideTarget:
    """Where a dotted override path lands in the experiment."""

    fields: tuple[str, ...]  # model fields from the top down to the overridden one
    kind: Literal["section", "map", "value"]
    key: str | None = None  # key inside a free-form config map; None = the whole field


_NOT_OVERRIDABLE = ("name", "matrix")


def _resolve_override(path: str) -> _OverrideTarget:
    """Map a dotted path onto the model; raise ValueError saying why it does not exist."""
    parts = path.split(".")
    if parts[0] in _NOT_OVERRIDABLE:
        raise ValueError(f"'{parts[0]}' cannot be set by the matrix")
    model: type[BaseModel] = Experiment
    for depth, part in enumerate(parts):
        walked = tuple(parts[: depth + 1])
        if part not in model.model_fields:
            here = ".".join(parts[:depth]) or "the top level"
            close = difflib.get_close_matches(part, list(model.model_fields), n=1)
            hint = (
                f"did you mean '{'.'.join((*parts[:depth], close[0]))}'?"
                if close
                else f"fields of {here}: {', '.join(model.model_fields)}"
            )
            raise ValueError(f"'{path}' does not exist: {here} has no '{part}'; {hint}")
        annotation = _unwrap(model.model_fields[part].annotation)
        rest = parts[depth + 1 :]
        if _is_model(annotation):
            if not rest:
                return _OverrideTarget(walked, "section")
            model = annotation
        elif get_origin(annotation) is dict:
            # Config maps hold dotted keys themselves: the rest of the path is one key.
            return _OverrideTarget(walked, "map", ".".join(rest) or None)
        elif rest:
            raise ValueError(
                f"'{path}' does not exist: '{'.'.join(walked)}' is a single value "
                "(lists are overridden as a whole)"
            )
        else:
            return _OverrideTarget(walked, "value")
    raise AssertionError(f"unreachable: {path}")


def _merged(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in update.items():
        both_maps = isinstance(out.get(key), dict) and isinstance(value, dict)
        out[key] = _merged(out[key], value) if both_maps else value
    return out


def _apply_override(raw: dict[str, Any], path: str, value: Any) -> None:
    """Set `path` in the raw experiment dict; a mapping given for a section is merged into it."""
    target = _resolve_override(path)
    node = raw
    for name in target.fields[:-1]:
        if not isinstance(node.get(name), dict):
            node[name] = {}
        node = node[name]
    last, value = target.fields[-1], copy.deepcopy(value)
    if target.kind == "map" and target.key is not None:
        node[last] = {**(node.get(last) or {}), target.key: value}
    elif target.kind == "section" and isinstance(value, dict) and isinstance(node.get(last), dict):
        node[last] = _merged(node[last], value)
    else:
        node[last] = value


def _value_at(data: dict[str, Any], path: str) -> Any:
    target = _resolve_override(path)
    node: Any = data
    for name in target.fields:
        node = node.get(name) if isinstance(node, dict) else None
    if target.key is not None:
        node = node.get(target.key) if isinstance(node, dict) else None
    return node


@dataclass(frozen=True)
class _Choice:
    """One value of one matrix axis: a list value, or a named variant's overrides."""

    axis: str
    variant: str | None  # None for a list axis, which is named after its resolved value
    overrides: tuple[tuple[str, Any], ...]
    position: int

    @property
    def origin(self) -> str:
        if self.variant is None:
            return f"matrix axis '{self.axis}', value {_short(self.overrides[0][1])}"
        return f"matrix axis '{self.axis}', variant '{self.variant}'"


class _MatrixProblem(ValueError):
    def __init__(self, where: str, message: str):
        super().__init__(message)
        self.where = where


def _checked_path(where: str, path: str) -> str:
    try:
        _resolve_override(path)
    except ValueError as exc:
        raise _MatrixProblem(where, f"override path {exc}") from None
    return path


def _axis_choices(axis: str, values: Any) -> list[_Choice]:
    where = f"matrix.{axis}"
    if isinstance(values, list):
        if not values:
            raise _MatrixProblem(where, "needs at least one value")
        _checked_path(where, axis)
        return [_Choice(axis, None, ((axis, value),), i) for i, value in enumerate(values)]
    if not isinstance(values, dict) or not values:
        raise _MatrixProblem(
            where,
            f"must be a list of values for the dotted path '{axis}', or a mapping of named "
            "variants, each a mapping of dotted paths to values",
        )
    choices = []
    for position, (variant, overrides) in enumerate(values.items()):
        overrides = {} if overrides is None else overrides
        if not isinstance(overrides, dict):
            raise _MatrixProblem(
                f"{where}.{variant}",
                "a variant is a mapping of dotted paths to values, e.g. producer.acks: all",
            )
        paths = [_checked_path(f"{where}.{variant}", str(path)) for path in overrides]
        pairs = tuple(zip(paths, overrides.values(), strict=True))
        choices.append(_Choice(axis, str(variant), pairs, position))
    return choices


def _parse_matrix(matrix: dict[str, Any]) -> tuple[list[list[_Choice]], list[Problem]]:
    axes: list[list[_Choice]] = []
    problems: list[Problem] = []
    for axis, values in matrix.items():
        try:
            axes.append(_axis_choices(str(axis), values))
        except _MatrixProblem as exc:
            problems.append((exc.where, str(exc)))
    return axes, problems


def _short_axis_name(choice: _Choice) -> str:
    if choice.variant is not None:
        return choice.axis
    target = _resolve_override(choice.axis)
    # A key inside a config map (retention.ms) is one component even though it holds dots.
    return target.key if target.key is not None else target.fields[-1]


def _shown_axis_names(axes: list[list[_Choice]]) -> dict[str, str]:
    """Name list axes by their last path component, unless two axes would then share a name."""
    short = {choices[0].axis: _short_axis_name(choices[0]) for choices in axes}
    taken = list(short.values())
    return {axis: name if taken.count(name) == 1 else axis for axis, name in short.items()}


def _label(value: Any, position: int) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, str | int | float):
        return str(value)
    return f"v{position + 1}"  # structured values have no short form; named variants read better


def _choice_label(choice: _Choice, resolved: dict[str, Any] | None) -> str:
    if choice.variant is not None:
        return choice.variant
    # Name after the validated value so 1, "1" and -1 / "all" read as Kafka spells them.
    value = choice.overrides[0][1] if resolved is None else _value_at(resolved, choice.axis)
    return _label(value, choice.position)


def _cell_name(labels: dict[str, str], shown: dict[str, str]) -> str:
    if not labels:
        return "base"
    name = "__".join(f"{shown[axis]}={label}" for axis, label in labels.items())
    name = CELL_NAME_UNSAFE.sub("-", name)
    if len(name) > _CELL_NAME_MAX:
        digest = hashlib.sha1(name.encode()).hexdigest()[:12]
        name = f"{name[: _CELL_NAME_MAX - 13]}-{digest}"
    return name


def _origin_of(path: str, reason: str, combo: Sequence[_Choice]) -> str | None:
    """The matrix choice that set the field a problem is about, else one its reason names."""
    dotted = re.sub(r"\[(\d+)\]", r".\1", path)
    overrides = [(override, choice) for choice in combo for override, _ in choice.overrides]
    direct = [
        choice.origin
        for override, choice in overrides
        if dotted == override
        or dotted.startswith(f"{override}.")
        or override.startswith(f"{dotted}.")
    ]
    # Rules across fields name the other field in the reason, e.g. "requires producer.acks".
    named = [
        choice.origin
        for override, choice in overrides
        if re.search(rf"(?<![\w.]){re.escape(override)}(?!\w)", reason)
    ]
    origins = direct or named
    return origins[-1] if origins else None  # the last override applied is the one in force


def _attributed(problems: list[Problem], combo: Sequence[_Choice]) -> list[Problem]:
    """Append which matrix axis set the field a problem is about, when an override did."""
    out = []
    for path, reason in problems:
        origin = _origin_of(path, reason, combo)
        out.append((path, f"{reason} (set by {origin})" if origin else reason))
    return out


def _resolve_cell(
    base: dict[str, Any], combo: Sequence[_Choice]
) -> tuple[Experiment | None, list[Problem]]:
    raw = copy.deepcopy(base)
    for choice in combo:
        for path, value in choice.overrides:
            _apply_override(raw, path, value)
    try:
        spec = Experiment.model_validate(raw)
    except ValidationError as exc:
        return None, _pydantic_problems(exc)
    return spec, _rule_problems(spec)


_MAX_REPORTED_CELLS = 5


def _cells_error(source: str, failures: list[tuple[str, dict[str, str], list[Problem]]]):
    if len(failures) == 1 and not failures[0][1]:
        return _spec_error(source, failures[0][2])
    blocks, problems = [], []
    for name, axes, cell_problems in failures[:_MAX_REPORTED_CELLS]:
        values = ", ".join(f"{axis}={label}" for axis, label in axes.items())
        lines = "\n".join(f"    {path}: {reason}" for path, reason in cell_problems)
        blocks.append(f"  matrix cell '{name}' ({values}):\n{lines}")
        problems += cell_problems
    if len(failures) > _MAX_REPORTED_CELLS:
        blocks.append(f"  ... and {len(failures) - _MAX_REPORTED_CELLS} more invalid cells")
    message = f"{source}: invalid matrix cells:\n" + "\n".join(blocks)
    return SpecError(message, source=source, problems=problems)


def _duplicate_names(cells: list[Cell]) -> Iterator[Problem]:
    first: dict[str, Cell] = {}
    for cell in cells:
        if cell.name in first:
            reason = (
                f"two cells are named '{cell.name}' ({cell.axes}): a list axis repeats a value "
                "(-1 and all are both acks=all) or two values differ only in characters outside "
                "[A-Za-z0-9=._-]; remove or rename one"
            )
            yield "matrix", reason
        first.setdefault(cell.name, cell)


def expand(experiment: Experiment) -> list[Cell]:
    """Resolve the matrix into validated cells in cartesian order (first axis slowest)."""
    source = experiment._source
    axes, problems = _parse_matrix(experiment.matrix)
    if problems:
        raise _spec_error(source, problems, "invalid matrix")
    base = experiment.model_dump(exclude={"matrix"})
    shown = _shown_axis_names(axes)
    cells: list[Cell] = []
    failures = []
    for index, combo in enumerate(itertools.product(*axes)):
        spec, problems = _resolve_cell(base, combo)
        resolved = None if spec is None else spec.model_dump()
        labels = {choice.axis: _choice_label(choice, resolved) for choice in combo}
        name = _cell_name(labels, shown)
        if spec is None or problems:
            failures.append((name, labels, _attributed(problems, combo)))
            continue
        spec._source = source
        cells.append(Cell(name=name, axes=labels, spec=spec, index=index))
    if failures:
        raise _cells_error(source, failures)
    duplicates = list(_duplicate_names(cells))
    if duplicates:
        raise _spec_error(source, duplicates, "invalid matrix")
    return cells


# --- loading -----------------------------------------------------------------------------------


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects a key repeated in one mapping instead of keeping the last one."""


class _DuplicateKey(yaml.constructor.ConstructorError):
    """A mapping names the same key twice."""


def _construct_unique_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False):
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue  # `<<: *anchor` keys may legitimately be overridden by explicit ones
        key = loader.construct_object(key_node, deep=deep)
        try:
            repeated = key in seen
        except TypeError:
            continue  # unhashable keys are reported by construct_mapping itself
        if repeated:
            raise _DuplicateKey(
                None,
                None,
                f"duplicate key '{key}': the second would silently replace the first",
                key_node.start_mark,
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique_mapping
)


def _yaml_error(source: str, exc: yaml.YAMLError) -> SpecError:
    mark = getattr(exc, "problem_mark", None)
    where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    detail = f"{problem} ({context})" if context else problem
    if isinstance(exc, _DuplicateKey):
        return SpecError(f"{source}{where}: {detail}; keep only one of them", source=source)
    return SpecError(
        f"{source}{where}: YAML syntax error: {detail}. Fix the YAML at that line "
        "(indentation, a missing ':' or space after it, an unclosed quote or bracket)",
        source=source,
    )


def load_experiment(path: str | Path) -> Experiment:
    """Read and validate an experiment file, matrix cells included; raise SpecError if invalid."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(
            f"{source}: no such file; pass the path of an experiment YAML file, "
            "e.g. experiments/default.yaml",
            source=source,
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(
            f"{source}: cannot read the file ({exc}); pass a UTF-8 YAML file", source=source
        ) from None
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass: no arbitrary objects
    except yaml.YAMLError as exc:
        raise _yaml_error(source, exc) from None
    return parse_experiment(data, source)


def parse_experiment(data: Any, source: str = "<dict>") -> Experiment:
    """Validate a decoded experiment document and every matrix cell; raise SpecError if invalid."""
    if data is None:
        raise SpecError(
            f"{source}: the experiment is empty; start from experiments/default.yaml", source=source
        )
    if not isinstance(data, dict):
        raise SpecError(
            f"{source}: the experiment must be a mapping of keys (name, kafka, topic, producer, "
            f"workload, faults, ...), not a {type(data).__name__}; "
            "start from experiments/default.yaml",
            source=source,
        )
    try:
        experiment = Experiment.model_validate(data)
    except ValidationError as exc:
        raise _spec_error(source, _pydantic_problems(exc)) from None
    experiment._source = source
    expand(experiment)  # every cell must be valid before anything runs
    return experiment


# --- what the rest of the harness reads from a cell -------------------------------------------


def _generated(plan: FaultGenerator, horizon_s: float, rng: random.Random) -> list[FaultStep]:
    steps: list[FaultStep] = []
    clock = 0.0  # when the previous fault is healed; the next one starts after it
    low, high = plan.duration_s
    while True:
        at_s = round(clock + rng.expovariate(1.0 / plan.mean_interval_s), 3)
        kind = rng.choice(plan.faults)
        target = rng.choice(plan.targets)
        duration_s = min(max(round(rng.uniform(low, high), 3), low), high)
        if at_s + duration_s >= horizon_s:
            return steps
        step = FaultStep(
            at_s=at_s, fault=kind, target=target, partition=plan.partition, duration_s=duration_s
        )
        steps.append(step)
        clock = step.end_s


def schedule_for(cell: Cell, seed: int) -> list[FaultStep]:
    """The cell's fault steps by start time: the explicit schedule, or one generated from seed."""
    faults = cell.spec.faults
    if faults.generate is None:
        return sorted(faults.schedule, key=lambda step: step.at_s)
    horizon_s = workload_duration_s(cell.spec.workload)
    if horizon_s is None:  # parse_experiment refuses this; guards hand-built cells
        raise _spec_error(cell.spec._source, list(_generator_rules(cell.spec, faults.generate)))
    return _generated(faults.generate, horizon_s, random.Random(seed))


def _step_class(step: FaultStep) -> str:
    if step.fault == "kill-all":
        return "all-kill"
    role = "node" if step.target.startswith("node:") else step.target
    kind: str = step.fault
    if kind == "partition":
        kind = {"full": "isolate", "groups": "partition-groups"}.get(step.params.get("mode"), kind)
    return f"{role}-{kind}"


def fault_class(steps: Sequence[FaultStep]) -> str:
    """'none' without steps; '<role>-<kind>' when all steps are that one fault; else 'mixed'
    (but 'all-power-loss' whenever one step is that: it allows any loss)."""
    classes = {_step_class(step) for step in steps}
    if not classes:
        return "none"
    if "all-power-loss" in classes:  # the weakest guarantee of any mix: it decides
        return "all-power-loss"
    return classes.pop() if len(classes) == 1 else "mixed"


def cell_config(cell: Cell, steps: Sequence[FaultStep]) -> dict[str, Any]:
    """The flat `config` object of spec.json for this cell and its fault steps."""
    spec = cell.spec
    return {
        "acks": spec.producer.acks,
        "min_insync_replicas": spec.topic.min_insync_replicas,
        "unclean_leader_election": spec.topic.unclean_leader_election,
        "enable_idempotence": spec.producer.enable_idempotence,
        "max_in_flight": spec.producer.max_in_flight,
        "replication_factor": spec.topic.replication_factor,
        "partitions": spec.topic.partitions,
        "fault_class": fault_class(steps),
        "kafka_version": spec.kafka.version or spec.kafka.image,
        "rate": spec.workload.rate,
        "message_bytes": spec.workload.message_bytes,
    }


def producer_settings(spec: Experiment) -> dict[str, Scalar]:
    """librdkafka settings of the producer section, without bootstrap.servers."""
    producer = spec.producer
    settings: dict[str, Scalar] = {
        "acks": producer.acks,
        "enable.idempotence": producer.enable_idempotence,
        "max.in.flight.requests.per.connection": producer.max_in_flight,
        "linger.ms": producer.linger_ms,
        "request.timeout.ms": producer.request_timeout_ms,
        "message.timeout.ms": producer.message_timeout_ms,
    }
    if producer.retries is not None:
        settings["retries"] = producer.retries
    return {**settings, **producer.config}


def _config_string(value: Scalar) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"  # Kafka parses booleans in lower case
    return str(value)


def topic_settings(spec: Experiment) -> dict[str, str]:
    """Topic configs as Kafka strings, including min.insync.replicas and unclean election."""
    topic = spec.topic
    settings = {
        "min.insync.replicas": str(topic.min_insync_replicas),
        "unclean.leader.election.enable": _config_string(topic.unclean_leader_election),
    }
    return {**settings, **{key: _config_string(value) for key, value in topic.config.items()}}
