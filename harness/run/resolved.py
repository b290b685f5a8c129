"""A repetition resolved once, before it runs (RepetitionPlan): its fault schedule, the cluster,
topic and producer settings with their defaults resolved, the client's durability, the workload,
the transactions, the read-back and the contract it is judged by; and spec.json, written from it.

The runner and the pytest plugin both run from a plan and read nothing of the experiment file
themselves: every default and every derived setting is decided here, once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import NotRequired, TypedDict

from harness.chaos.faults import FAULT_TYPES, HelperSite
from harness.experiment.clients import ClientSpec
from harness.experiment.fields import Scalar
from harness.experiment.model import Experiment, FaultStep, KafkaSpec
from harness.experiment.plan import (
    cell_config,
    client_durability,
    producer_settings,
    schedule_for,
    topic_settings,
)
from harness.nemesis.records import ResolvedStep
from harness.platform.cluster import KafkaCluster
from harness.platform.image import BrokerImage
from harness.platform.versions import Mode, broker_defaults
from harness.run.ending import ReadBackPlan
from harness.run.provenance import git_revision
from harness.run.repetition import Repetition
from harness.rundir import layout
from harness.rundir.config import CellConfig
from harness.rundir.release import KafkaVersion
from harness.rundir.spec import RunSpec
from harness.rundir.transactions import OnTimeout
from harness.workload.producer.by_client import value_decoder
from harness.workload.producer.recorder import Workload
from harness.workload.transactions.librdkafka import TransactionPlan

__all__ = ["RepetitionPlan", "SpecTimes", "cluster_of", "resolve", "transaction_plan", "write_spec"]


class SpecTimes(TypedDict):
    """spec.json's keys after the cell's: its start, then at the end how the repetition ended."""

    started_at_us: int
    ended_at_us: NotRequired[int]
    harness_error: NotRequired[str | None]
    resolved_schedule: NotRequired[list[ResolvedStep]]


@dataclass(frozen=True)
class TopicPlan:
    """The topic the workload writes, with its Kafka settings as strings."""

    name: str
    partitions: int
    replication_factor: int
    settings: dict[str, str]


@dataclass(frozen=True)
class RepetitionPlan:
    """Everything one repetition runs with, resolved from its cell, seed and broker image."""

    repetition: Repetition
    image: BrokerImage
    schedule: list[FaultStep]
    config: CellConfig  # the flat contract the analysis judges the run by
    topic: TopicPlan
    producer: dict[str, Scalar]  # librdkafka's settings, without bootstrap.servers
    durability: tuple[str, bool]  # (acks, idempotence) the client runs with
    workload: Workload
    transactions: TransactionPlan | None
    read_back: ReadBackPlan

    @property
    def spec(self) -> Experiment:
        """The cell's experiment, for the sections the plan passes through as they are."""
        return self.repetition.cell.spec

    @property
    def run_dir(self) -> Path:
        return self.repetition.run_dir

    @property
    def client(self) -> ClientSpec:
        return self.spec.workload.client

    def new_cluster(self) -> KafkaCluster:
        """The repetition's cluster, not started."""
        return cluster_of(self.spec.kafka, self.image, _disk_layer(self.schedule))


def cluster_of(
    kafka: KafkaSpec, image: BrokerImage, disk_layer: Path | None = None
) -> KafkaCluster:
    """The cluster (not started) the kafka section asks for, on `image`, with the chaosfs
    binary `disk_layer` under its nodes' log directories (None: no disk layer)."""
    return KafkaCluster(
        image=image.tag,
        brokers=kafka.brokers,
        broker_config={k: str(v) for k, v in kafka.broker_config.items()},
        controller_config={k: str(v) for k, v in kafka.controller_config.items()},
        mode=kafka.effective_mode() or Mode.KRAFT,
        version=image.kafka_version or kafka.version,
        zookeeper_nodes=kafka.zookeeper_nodes,
        dynamic_quorum=kafka.quorum == "dynamic",
        disk_layer=disk_layer,
    )


def resolve(
    repetition: Repetition,
    image: BrokerImage,
    topic: str = layout.TOPIC,
    schedule: list[FaultStep] | None = None,
) -> RepetitionPlan:
    """The plan of `repetition` on `image`, writing `topic`; its schedule drawn from the cell
    and seed unless given (the pytest plugin gives the steps its test took)."""
    spec = repetition.cell.spec
    steps = schedule_for(repetition.cell, repetition.seed) if schedule is None else schedule
    return RepetitionPlan(
        repetition=repetition,
        image=image,
        schedule=steps,
        config=cell_config(repetition.cell, steps, image.kafka_version),
        topic=TopicPlan(
            topic, spec.topic.partitions, spec.topic.replication_factor, topic_settings(spec)
        ),
        producer=producer_settings(spec),
        durability=client_durability(spec),
        workload=Workload(
            spec.workload.rate,
            spec.workload.duration_s,
            spec.workload.count,
            spec.workload.message_bytes,
            spec.workload.keys,
        ),
        transactions=(
            None if spec.workload.transactions is None else transaction_plan(spec, repetition.seed)
        ),
        read_back=ReadBackPlan(
            topic,
            spec.topic.partitions,
            spec.faults.final_heal_timeout_s,
            transactional=spec.workload.transactions is not None,
            decode=value_decoder(spec.workload.client, spec.workload.keys),
        ),
    )


def transaction_plan(spec: Experiment, seed: int) -> TransactionPlan:
    """workload.transactions as the transactional recorder takes it."""
    transactions = spec.workload.transactions
    if transactions is None:
        raise ValueError("the workload has no transactions")
    return TransactionPlan(
        size=transactions.size,
        abort_every=transactions.abort_every,
        abort_ratio=transactions.abort_ratio,
        seed=seed,
        timeout_ms=transactions.timeout_ms,
        send_offsets=transactions.send_offsets,
        partitions=spec.topic.partitions,
        on_timeout=OnTimeout(transactions.on_timeout),
        reads=transactions.reads,
        rewind_on_abort=transactions.rewind_on_abort,
        age_commits=transactions.age_commits,
        abort_first=transactions.abort_first,
    )


def write_spec(plan: RepetitionPlan, extra: SpecTimes) -> None:
    """spec.json of the plan (rewritten as phases complete): the resolved cell, seed, image,
    revision, settings and schedule, then `extra` (its start, and at the end how it ended)."""
    spec, repetition, image = plan.spec, plan.repetition, plan.image
    document = RunSpec.model_validate(
        {
            "experiment": spec.name,
            "cell": repetition.cell.name,
            "repetition": repetition.index,
            "seed": repetition.seed,
            "axes": repetition.cell.axes,
            "config": plan.config,
            "image": image.tag,
            "image_id": image.image_id,
            "git_revision": git_revision(),
            "producer": plan.producer,
            "topic": {
                "name": plan.topic.name,
                "partitions": plan.topic.partitions,
                "replication_factor": plan.topic.replication_factor,
                "config": plan.topic.settings,
            },
            "workload": spec.workload.model_dump(),
            "schedule": [
                step.model_dump(by_alias=True, exclude_none=True) for step in plan.schedule
            ],
            "disjoint": spec.faults.acts_disjoint,
            "after_workload_s": spec.faults.after_workload_s,
            "final_heal_timeout_s": spec.faults.final_heal_timeout_s,
            "kafka": {
                **spec.kafka.model_dump(),
                "mode": spec.kafka.effective_mode(),
                # Broker defaults that differ between releases, as this version has them.
                "effective_defaults": _effective_defaults(
                    image.kafka_version or spec.kafka.version
                ),
            },
            **extra,
        }
    )
    document.write(repetition.run_dir)


def _effective_defaults(version: str | None) -> dict[str, str] | None:
    """The version-dependent broker defaults in force (None for an image of unknown version)."""
    if not version:
        return None
    return broker_defaults(KafkaVersion.parse(version)).as_properties()


def _disk_layer(steps: list[FaultStep]) -> Path | None:
    """The chaosfs binary when a step's fault acts through the disk layer, else None (the
    layer costs every write a trip through FUSE: only experiments with disk faults pay it)."""
    faults = [FAULT_TYPES[step.fault] for step in steps if not step.heals]
    if not any(fault.helper_site is HelperSite.FUSE_MOUNT for fault in faults):
        return None
    from harness.platform.disk_layer import chaosfs_binary

    return chaosfs_binary()
