"""What a cell means to the runner: its fault schedule and fault class, the flat config of
spec.json, the producer's and topic's Kafka settings, and how long the experiment will take.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

from harness.chaos.faults import FAULT_TYPES
from harness.experiment.clients import java_durability, java_producer_settings
from harness.experiment.fields import (
    COORDINATOR_TARGETS,
    PARTITION_TARGETS,
    PRODUCER_FIELD_KEYS,
    TOPIC_KEY_FIELDS,
    Scalar,
)
from harness.experiment.generic import generic_schedule
from harness.experiment.matrix import Cell
from harness.experiment.model import Experiment, FaultGenerator, FaultStep, workload_duration_s
from harness.experiment.problems import spec_error
from harness.experiment.rules import rule_problems
from harness.experiment.soak import expand_repeats
from harness.platform.versions import Mode
from harness.rundir.config import CellConfig, setting_text
from harness.rundir.fault_classes import deciding_class

__all__ = [
    "AGEING_RATE",
    "NEIGHBOURS_RATE",
    "REPETITION_OVERHEAD_S",
    "cell_config",
    "client_durability",
    "fault_class",
    "producer_settings",
    "repetition_seconds",
    "schedule_for",
    "topic_settings",
    "wall_time",
]


def _generated(plan: FaultGenerator, horizon_s: float, rng: random.Random) -> list[FaultStep]:
    steps: list[FaultStep] = []
    clock = 0.0  # when the previous fault is healed; the next one starts after it
    if plan.duration_s is None:  # validation requires it in this mode
        raise ValueError("faults.generate.duration_s is required in mode uniform")
    low, high = plan.duration_s
    mean_gap_s = plan.mean_gap_s
    while True:
        # duty_cycle 1 leaves no gap to draw; with mean_interval_s the draws are as they were.
        gap_s = rng.expovariate(1.0 / mean_gap_s) if mean_gap_s > 0 else 0.0
        at_s = round(clock + gap_s, 3)
        kind = rng.choice(plan.faults)
        target = rng.choice(plan.targets)
        duration_s = min(max(round(rng.uniform(low, high), 3), low), high)
        if at_s + duration_s >= horizon_s:
            return steps
        step = FaultStep(
            at_s=at_s,
            fault=kind,
            target=target,
            partition=plan.partition,
            duration_s=duration_s,
            params=plan.params.get(kind, {}),
        )
        steps.append(step)
        clock = at_s + duration_s  # step.end_s, which is never None for a generated step


def schedule_for(cell: Cell, seed: int) -> list[FaultStep]:
    """The cell's fault steps in the order they run: the explicit schedule in file order
    (validation keeps its start times ordered) with each `every_s` step expanded into its
    repetitions, placed by start time; or one generated from seed, over the workload and
    faults.after_workload_s. spec.json lists these."""
    faults = cell.spec.faults
    if faults.generate is None and not any(step.repeats for step in faults.schedule):
        return list(faults.schedule)
    horizon_s = workload_duration_s(cell.spec.workload)
    if horizon_s is None:  # parse_experiment refuses this; guards hand-built cells
        raise spec_error(cell.spec._source, rule_problems(cell.spec))
    if faults.generate is None:
        return expand_repeats(faults.schedule, horizon_s)
    horizon_s += faults.after_workload_s  # a generated schedule acts on after the producers
    if faults.generate.mode == "generic":
        return generic_schedule(cell.spec, faults.generate, horizon_s, random.Random(seed))
    return _generated(faults.generate, horizon_s, random.Random(seed))


# The role a target names in a fault class: `brokers` is `all`, one node is `node`, one
# ZooKeeper server counts as `zookeeper`; `controllers` only where they hold no data; every
# target among the partition's followers is `follower`.
_TARGET_ROLE = {
    "brokers": "all",
    **dict.fromkeys(PARTITION_TARGETS[1:], "follower"),  # all but the leader
    # A coordinator is one broker, found by hashing the workload's id: judged, partition by
    # partition, by the roles it held when hit, like `node:<id>`.
    **dict.fromkeys(COORDINATOR_TARGETS, "node"),
}


def _target_role(step: FaultStep, steps: Sequence[FaultStep], mode: Mode | None) -> str:
    """The role of the step's target; an @name has the role of the step that bound it."""
    target = step.target
    if (name := step.bound_target) is not None:
        binder = next((s for s in steps if s.as_ == name and not s.heals), None)
        return _target_role(binder, steps, mode) if binder is not None else "node"
    role = target.split(":", 1)[0] if ":" in target else target
    role = "consumer" if role.startswith("consumer") else _TARGET_ROLE.get(role, role)
    if role == "controllers" and mode is not Mode.KRAFT_DEDICATED:
        role = "all"  # combined nodes: the controllers are every broker
    if role == "controller-follower":  # one standby controller: a broker in kraft mode
        role = "controllers" if mode is Mode.KRAFT_DEDICATED else "node"
    return role


def _step_class(step: FaultStep, steps: Sequence[FaultStep], mode: Mode | None) -> str:
    fault = FAULT_TYPES[step.fault]
    role = "all" if fault.hits_whole_cluster(step.params) else _target_role(step, steps, mode)
    return f"{role}-{fault.class_kind(step.params)}"


def fault_class(steps: Sequence[FaultStep], mode: Mode | None = None) -> str:
    """'none' without steps; '<role>-<kind>' when all steps are that one fault; else 'mixed'
    (but 'all-power-loss' whenever one step is that: it allows any loss; else a step's
    '<role>-corruption', whose outcome is not documented). `mode` is the
    cluster's: dedicated controllers hold no data, combined ones are every broker. Heal steps
    add no class: they end a fault another step started. Faults on the consumer group touch no
    broker: beside broker faults they add no class, alone they give (the first) consumer-<kind>."""
    classes = {_step_class(step, steps, mode) for step in steps if not step.heals}
    on_brokers = {c for c in classes if not c.startswith("consumer-")}
    if classes and not on_brokers:  # consumer faults alone: the log sees no fault at all
        return min(classes)
    classes = on_brokers  # beside broker faults, one on the consumer group changes nothing
    if not classes:
        return "none"
    if deciding := deciding_class(classes):  # the weakest guarantee of any mix decides
        return deciding
    return classes.pop() if len(classes) == 1 else "mixed"


def cell_config(
    cell: Cell, steps: Sequence[FaultStep], kafka_version: str | None = None
) -> CellConfig:
    """The flat `config` of spec.json for this cell, its fault steps and the Kafka that ran."""
    spec = cell.spec
    acks, idempotent = client_durability(spec)
    return CellConfig(
        acks=acks,
        min_insync_replicas=spec.topic.min_insync_replicas,
        unclean_leader_election=spec.topic.unclean_leader_election,
        # A transactional producer is idempotent whatever producer.enable_idempotence says.
        enable_idempotence=idempotent,
        max_in_flight=spec.producer.max_in_flight,
        replication_factor=spec.topic.replication_factor,
        partitions=spec.topic.partitions,
        fault_class=fault_class(steps, spec.kafka.effective_mode()),
        kafka_version=kafka_version or spec.kafka.version or spec.kafka.image,
        kafka_mode=spec.kafka.effective_mode(),
        rate=spec.workload.rate,
        message_bytes=spec.workload.message_bytes,
        **_optional_config(spec),
    )


class _OptionalConfig(TypedDict, total=False):
    """The CellConfig keys only some cells have (absent, not null, in the others' spec.json)."""

    consumers: int
    consumer_commit: str
    transactions: bool
    txn_reader_rewinds: bool
    client: str
    fsync_each_message: bool


def _optional_config(spec: Experiment) -> _OptionalConfig:
    """The flat config's keys only some cells have: the consumer group's, and `transactions`
    for transactional cells (the spec.json of other cells is unchanged)."""
    workload = spec.workload
    optional: _OptionalConfig = {}
    if workload.consumers:
        optional |= {"consumers": workload.consumers, "consumer_commit": workload.consumer_commit}
    if workload.transactions is not None:
        optional["transactions"] = True
        if workload.transactions.reads:
            optional["txn_reader_rewinds"] = workload.transactions.rewind_on_abort
    if workload.client.kind != "librdkafka" or workload.client.runs_program:
        optional["client"] = workload.client.label
    if spec.fsyncs_each_message():
        optional["fsync_each_message"] = True
    return optional


def client_durability(spec: Experiment) -> tuple[str, bool]:
    """(acks, idempotence) the cell's producer runs with: the producer section's for the
    librdkafka recorder (a transactional producer is idempotent whatever it says) and for a
    command (given them in its producer.config); the Java client's own defaults resolved for
    the settings the file left out (a transactional Java producer is given acks=all and
    idempotence)."""
    client = spec.workload.client
    if client.kind == "java" and client.version:
        if spec.workload.transactions is not None:
            return "all", True  # what the transactional recorder is given (acks=all, idempotence)
        return java_durability(
            java_producer_settings(spec.producer, client.version), client.version
        )
    idempotent = spec.producer.enable_idempotence or spec.workload.transactions is not None
    return spec.producer.acks, idempotent


def producer_settings(spec: Experiment) -> dict[str, Scalar]:
    """librdkafka settings of the producer section, without bootstrap.servers."""
    settings: dict[str, Scalar] = {
        keys[0]: value
        for field, keys in PRODUCER_FIELD_KEYS.items()
        if (value := getattr(spec.producer, field)) is not None  # retries: None is the default
    }
    return {**settings, **spec.producer.config}


def topic_settings(spec: Experiment) -> dict[str, str]:
    """Topic configs as Kafka strings, including min.insync.replicas and unclean election."""
    fields = {key: getattr(spec.topic, field) for key, field in TOPIC_KEY_FIELDS.items()}
    return {key: setting_text(value) for key, value in {**fields, **spec.topic.config}.items()}


# Per repetition besides the workload, from bench/cluster_bench.py and `make run`
# (docs/benchmarks.md): a fresh 3-node cluster is ready in ~10 s; the topic, the wait for a
# full ISR after the final heal, the read-back, kept segments and teardown take ~10 s more.
CLUSTER_START_S = 10.0
TOPIC_ISR_READBACK_S = 10.0
REPETITION_OVERHEAD_S = CLUSTER_START_S + TOPIC_ISR_READBACK_S
# Offset-only commits a second when ageing a transactional.id (workload.transactions.age_commits),
# as measured on a 2-core machine with the internal topics unreplicated (about 60 with three
# replicas): an estimate's figure, not a bound.
AGEING_RATE = 200
# Neighbour groups committed a second before the workload (workload.neighbours), as measured
# with 5,000 groups of 200 offsets on the same machine (15 to 24 s): an estimate's figure.
NEIGHBOURS_RATE = 250


@dataclass(frozen=True)
class WallTime:
    """An estimate of an experiment's wall time, without the Spark analysis after it."""

    seconds: float
    repetitions: int  # runs in all: cells x repetitions
    unbounded_cells: tuple[str, ...]  # cells whose workload has no time bound (count, no rate)


def repetition_seconds(cell: Cell) -> float | None:
    """One repetition of `cell`: the transactional.id's ageing (AGEING_RATE commits a second),
    the neighbour groups' first commits (NEIGHBOURS_RATE a second), its workload duration +
    the faults after it (faults.after_workload_s) + REPETITION_OVERHEAD_S; None when the
    workload has no time bound (count without rate)."""
    duration = workload_duration_s(cell.spec.workload)
    after = cell.spec.faults.after_workload_s
    transactions = cell.spec.workload.transactions
    ageing = transactions.age_commits / AGEING_RATE if transactions is not None else 0.0
    neighbours = cell.spec.workload.neighbours
    ageing += neighbours.groups / NEIGHBOURS_RATE if neighbours is not None else 0.0
    return None if duration is None else ageing + duration + after + REPETITION_OVERHEAD_S


def wall_time(cells: Sequence[Cell], repetitions: int) -> WallTime:
    """cells x repetitions x (workload duration + REPETITION_OVERHEAD_S); unbounded cells add
    only the overhead and are named."""
    seconds, unbounded = 0.0, []
    for cell in cells:
        each = repetition_seconds(cell)
        if each is None:
            unbounded.append(cell.name)
        seconds += repetitions * (each or REPETITION_OVERHEAD_S)
    return WallTime(seconds, len(cells) * repetitions, tuple(unbounded))
