"""Runs an experiment: for each cell and repetition a fresh cluster, workload ║ nemesis,
final heal, read-back, and a run directory written in phases (so a crash is still analysable).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import NotRequired, TypedDict

from harness.chaos.faults import FAULT_TYPES, FaultContext, HelperSite, check_tools
from harness.chaos.nemesis import Nemesis, ResolvedStep
from harness.experiment.matrix import Cell
from harness.experiment.plan import (
    cell_config,
    client_durability,
    producer_settings,
    schedule_for,
    topic_settings,
)
from harness.experiment.spec import Experiment, FaultStep
from harness.platform.cluster import KafkaCluster
from harness.platform.image import BrokerImage
from harness.platform.leftovers import remove_leftovers
from harness.platform.versions import Mode, broker_defaults
from harness.run.ending import ReadBackPlan, RunEnd, end_run, read_back_and_keep
from harness.run.interrupts import INTERRUPTS
from harness.run.provenance import ProvenanceRecord, git_revision
from harness.run.repetition import (
    Progress,
    Repetition,
    RepetitionSummary,
    plan_repetitions,
    point_latest_at,
    write_plan,
)
from harness.run.sampler import Sampler
from harness.rundir import layout
from harness.rundir.events import (
    EventLog,
    HarnessError,
    PhaseEvent,
    now_us,
)
from harness.rundir.provenance import SettingFrom
from harness.rundir.records import CommitMode
from harness.rundir.release import KafkaVersion
from harness.rundir.spec import RunSpec
from harness.rundir.transactions import OnTimeout
from harness.workload.consumer_group.group import CatchUp, ConsumerGroup, Liveness
from harness.workload.java_client import group_member
from harness.workload.producer.by_client import client_senders, librdkafka_config, value_decoder
from harness.workload.producer.librdkafka import (
    LocalRecorder,
    ProducerFleet,
    Producing,
    producer_tasks,
)
from harness.workload.producer.recorder import RecorderStats, Workload
from harness.workload.transactions.java import java_transactions
from harness.workload.transactions.librdkafka import (
    GROUP_ID,
    TRANSACTIONAL_ID,
    TransactionalRecorder,
    TransactionPlan,
)

TOPIC = layout.TOPIC
# The harness error of a repetition stopped by SIGINT or SIGTERM.
INTERRUPTED = "interrupted (SIGINT or SIGTERM) before the repetition finished"
log = logging.getLogger("kafka_chaos")


class SpecTimes(TypedDict):
    """spec.json's keys after the cell's: its start, then at the end how the repetition ended."""

    started_at_us: int
    ended_at_us: NotRequired[int]
    harness_error: NotRequired[str | None]
    resolved_schedule: NotRequired[list[ResolvedStep]]


def write_spec(
    repetition: Repetition,
    image: BrokerImage,
    steps: list,
    extra: SpecTimes,
    topic: str = TOPIC,
) -> None:
    """spec.json: the resolved cell, seed, image and revision (rewritten as phases complete);
    `topic` is the topic the run wrote."""
    spec = repetition.cell.spec
    document = RunSpec.model_validate(
        {
            "experiment": spec.name,
            "cell": repetition.cell.name,
            "repetition": repetition.index,
            "seed": repetition.seed,
            "axes": repetition.cell.axes,
            "config": cell_config(repetition.cell, steps, image.kafka_version),
            "image": image.tag,
            "image_id": image.image_id,
            "git_revision": git_revision(),
            "producer": producer_settings(spec),
            "topic": {
                "name": topic,
                "partitions": spec.topic.partitions,
                "replication_factor": spec.topic.replication_factor,
                "config": topic_settings(spec),
            },
            "workload": spec.workload.model_dump(),
            "schedule": [step.model_dump(by_alias=True, exclude_none=True) for step in steps],
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
    from harness.platform.diskfs import chaosfs_binary

    return chaosfs_binary()


def run_repetition(
    repetition: Repetition, image: BrokerImage, progress: Progress
) -> RepetitionSummary:
    """Run one repetition end to end; the cluster is removed whatever happens."""
    spec = repetition.cell.spec
    repetition.run_dir.mkdir(parents=True, exist_ok=True)
    steps = schedule_for(repetition.cell, repetition.seed)
    started_at = now_us()
    write_spec(repetition, image, steps, {"started_at_us": started_at})
    summary = RepetitionSummary(repetition.run_dir, repetition.cell.name, repetition.index)
    events = EventLog(repetition.run_dir / layout.EVENTS)
    cluster = KafkaCluster(
        image=image.tag,
        brokers=spec.kafka.brokers,
        broker_config={k: str(v) for k, v in spec.kafka.broker_config.items()},
        controller_config={k: str(v) for k, v in spec.kafka.controller_config.items()},
        mode=spec.kafka.effective_mode() or Mode.KRAFT,
        version=image.kafka_version or spec.kafka.version,
        zookeeper_nodes=spec.kafka.zookeeper_nodes,
        dynamic_quorum=spec.kafka.quorum == "dynamic",
        disk_layer=_disk_layer(steps),
    )
    try:
        progress.phase("starting cluster")
        events.write(PhaseEvent(phase="cluster-start"))
        cluster.start()
        # Before any write: a fault that cannot run would only show up as NOT-PROVOKED.
        faults = [FAULT_TYPES[step.fault] for step in steps if not step.heals]
        check_tools(cluster.nodes[0], faults, image.tag)
        cluster.create_topic(
            TOPIC, spec.topic.partitions, spec.topic.replication_factor, topic_settings(spec)
        )
        events.write(PhaseEvent(phase="topic-ready", bootstrap=cluster.bootstrap_servers))
        ctx = FaultContext(cluster, TOPIC, random.Random(repetition.seed))
        if spec.workload.transactions is not None:
            ctx = dataclasses.replace(ctx, transactional_id=TRANSACTIONAL_ID, group_id=GROUP_ID)
        workload_error = _workload_and_faults(repetition, ctx, steps, events, summary, progress)
        try:
            readback = read_back_and_keep(
                ctx, read_back_plan(spec), repetition.run_dir, events, progress.phase
            )
            summary.read, summary.readback_complete = readback.records, readback.complete
        except Exception as exc:
            if workload_error is None:
                raise
            # The error that stopped the workload comes first: the read-back's is its sequel.
            raise RepetitionError(f"{_described(workload_error)}; then {_described(exc)}") from exc
        if workload_error is not None:  # read back first: the rest is still evidence
            raise workload_error
    except KeyboardInterrupt:
        # The analysis judges an interrupted repetition UNKNOWN from this event.
        summary.error = INTERRUPTED
        events.write(HarnessError(error=summary.error))
        raise
    except Exception as exc:
        summary.error = _described(exc)
        log.exception("repetition %s/%s failed", repetition.cell.name, repetition.index)
        events.write(HarnessError(error=summary.error))
    finally:
        with contextlib.suppress(Exception):
            cluster.collect_logs(repetition.run_dir / layout.BROKER_LOGS)
        cluster.close()
        events.write(PhaseEvent(phase="cluster-removed"))
        events.close()
        write_spec(
            repetition,
            image,
            steps,
            {
                "started_at_us": started_at,
                "ended_at_us": now_us(),
                "harness_error": summary.error,
                "resolved_schedule": summary.resolved_schedule,
            },
        )
    progress.cell_finished(summary)
    return summary


class RepetitionError(RuntimeError):
    """Two errors of one repetition: the one that ended its workload, then its read-back's."""


def _described(exc: BaseException) -> str:
    """`Type: message` as a harness error records it (a RepetitionError: its message)."""
    return str(exc) if isinstance(exc, RepetitionError) else f"{type(exc).__name__}: {exc}"


def _workload_and_faults(
    repetition: Repetition,
    ctx: FaultContext,
    steps: list,
    events: EventLog,
    summary: RepetitionSummary,
    progress: Progress,
) -> Exception | None:
    """The workload (in this thread, or in producer processes), the nemesis and sampler beside
    it; heal all at the end.

    Returns the workload's error to raise after the read-back: the client's own exception when
    it ended the workload early, a producer that crashed, or a journal that missed delivery
    reports (None when every report reached a journal).
    """
    spec = repetition.cell.spec
    workload = Workload(
        spec.workload.rate,
        spec.workload.duration_s,
        spec.workload.count,
        spec.workload.message_bytes,
        spec.workload.keys,
    )
    senders = _senders(repetition, workload, ctx.cluster.bootstrap_servers, events)
    if spec.workload.client.kind == "librdkafka":  # a program reports its own settings
        events.write(librdkafka_config(producer_settings(spec), client_durability(spec)[1]))
    sampler = Sampler(ctx, events)
    nemesis = Nemesis(ctx, steps, events)
    summary.resolved_schedule = nemesis.resolved  # the steps as they act, read at the end
    stop = threading.Event()
    ctx.consumers = _consumer_group(repetition, ctx.cluster.bootstrap_servers, events)
    group = None
    if ctx.consumers is not None:
        group = _GroupEnd(ctx.consumers, events, spec.workload.consumer_catch_up_s, progress)
    client_error: Exception | None = None
    try:
        try:
            _start_and_send(ctx, senders, sampler, nemesis, events, progress, stop)
        except Exception as exc:  # the workload ended early: heal, read back, judge what it did
            client_error = exc
            log.exception("the workload ended early")
        events.write(PhaseEvent(phase="workload-end"))
    finally:
        stop.set()
        # First, so that no failure below can keep the journal (and the tally) unwritten.
        workload_error = senders.close(events)
        end = RunEnd(
            ctx, nemesis, events, repetition.run_dir, sampler, None, group=group,
            phase=progress.phase,
        )  # fmt: skip
        try:
            end_run(end)  # the read-back waits for the interrupt's chance below
        finally:  # whatever failed above: the progress line tells what was really sent
            _count_sends(summary, senders.stats, nemesis)
    INTERRUPTS.raise_if_stopped()  # healed and journalled: now the interrupt may surface
    return client_error or workload_error


@dataclasses.dataclass
class _GroupEnd:
    """The consumer group at the end of the run (ending.GroupEnd): caught up unless the run
    was stopped, then closed with where it got."""

    group: ConsumerGroup
    events: EventLog
    timeout_s: float
    progress: Progress
    caught_up: CatchUp | None = None

    def catch_up(self) -> None:
        if not INTERRUPTS.stop.is_set():
            self.caught_up = _catch_up(self.group, self.timeout_s, self.progress)

    def close(self) -> None:
        self.group.close(self.events, self.caught_up)


def _start_and_send(
    ctx: FaultContext,
    senders: Producing,
    sampler: Sampler,
    nemesis: Nemesis,
    events: EventLog,
    progress: Progress,
    stop: threading.Event,
) -> None:
    """Start the consumer group and the senders, then run the workload beside the nemesis and
    sampler; raises whatever ended the workload early (the caller heals and reads back)."""
    if ctx.consumers is not None:  # reading before the first send
        progress.phase("consumer group joining")
        ctx.consumers.start()
    senders.start()
    watcher = threading.Thread(target=_watch, args=(progress, senders, nemesis, stop), daemon=True)
    sampler.start()
    progress.phase("workload + faults")
    events.write(PhaseEvent(phase="workload-start"))
    nemesis.start(time.monotonic())
    watcher.start()
    # Deferred: an interrupt inside the producer's poll would surface as a SystemError.
    with INTERRUPTS.deferred() as interrupted:
        senders.run(interrupted)


def _count_sends(summary: RepetitionSummary, stats: RecorderStats, nemesis: Nemesis) -> None:
    """Copy the sends' outcomes (read after the journals closed) and fault errors to the
    summary."""
    summary.sent, summary.ok = stats.sent, stats.ok
    summary.failed, summary.indeterminate = stats.failed, stats.indeterminate
    summary.fault_errors = list(nemesis.errors)


def _consumer_group(
    repetition: Repetition, bootstrap: str, events: EventLog
) -> ConsumerGroup | None:
    """The workload's consumer group (not started), or None for `workload.consumers: 0`."""
    spec = repetition.cell.spec
    if not spec.workload.consumers:
        return None
    return ConsumerGroup(
        spec.workload.consumers,
        bootstrap,
        TOPIC,
        spec.topic.partitions,
        CommitMode(spec.workload.consumer_commit),
        repetition.run_dir,
        events,
        spec.workload.consumer_processing_ms,
        group_member(spec.workload.client),
        Liveness(spec.workload.consumer_stuck_s, _transaction_timeout_ms(spec)),
    )


def _transaction_timeout_ms(spec: Experiment) -> int | None:
    """The producers' transaction.timeout.ms; None for a workload without transactions."""
    transactions = spec.workload.transactions
    return None if transactions is None else transactions.timeout_ms


def _catch_up(consumers: ConsumerGroup, timeout_s: float, progress: Progress) -> CatchUp:
    """After the final heal: let the group commit up to the end of every partition (bounded)."""
    progress.phase("consumers catching up")
    with INTERRUPTS.deferred() as interrupted:
        return consumers.catch_up(timeout_s, interrupted)


def _senders(
    repetition: Repetition, workload: Workload, bootstrap: str, events: EventLog
) -> Producing:
    """The one recorder in this process for `workload.producers: 1`, else a ProducerFleet."""
    spec = repetition.cell.spec
    config, run_dir = producer_settings(spec), repetition.run_dir
    if spec.workload.transactions is not None:
        plan = transaction_plan(spec, repetition.seed)
        if spec.workload.client.kind == "java":
            return java_transactions(
                spec.workload.client, spec.producer, workload, plan, (bootstrap, TOPIC), run_dir,
                client_durability(spec),
            )  # fmt: skip
        return TransactionalRecorder(bootstrap, TOPIC, config, workload, plan, run_dir)
    if spec.workload.client.kind != "librdkafka":
        return client_senders(
            spec.workload.client, spec.producer, workload, spec.workload.producers,
            (bootstrap, TOPIC), run_dir, client_durability(spec),
        )  # fmt: skip
    if spec.workload.producers == 1:
        return LocalRecorder(workload, bootstrap, TOPIC, config, run_dir)
    tasks = producer_tasks(spec.workload.producers, workload, bootstrap, TOPIC, config, run_dir)
    return ProducerFleet(tasks, events)


def read_back_plan(spec: Experiment) -> ReadBackPlan:
    """The final read-back of the experiment's topic, as its workload wrote it."""
    return ReadBackPlan(
        TOPIC,
        spec.topic.partitions,
        spec.faults.final_heal_timeout_s,
        transactional=spec.workload.transactions is not None,
        decode=value_decoder(spec.workload.client, spec.workload.keys),
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
    )


def _watch(progress: Progress, senders: Producing, nemesis: Nemesis, stop: threading.Event) -> None:
    while not stop.wait(0.5):
        progress.watch(senders.stats, nemesis)


def run_experiment(
    experiment: Experiment,
    cells: Sequence[Cell],
    root: Path,
    image_for: Callable[[Cell], BrokerImage],
    progress: Progress,
    settings: Sequence[SettingFrom] = (),
) -> list[RepetitionSummary]:
    """Run every repetition of `cells` into `root`; a failed one is recorded, the next runs.

    `image_for` gives each cell its broker image (cells may differ in Kafka version);
    `settings`, those the command line applied from files and --set, go to provenance.json.
    """
    root.mkdir(parents=True, exist_ok=True)
    point_latest_at(root)
    removed = remove_leftovers()
    if removed:
        log.info("removed %d containers/networks left by a crashed run", removed)
    repetitions = plan_repetitions(experiment, cells, root)
    write_plan(root, repetitions)
    provenance = ProvenanceRecord(root, experiment, settings=settings)
    summaries: list[RepetitionSummary] = []
    try:
        for index, repetition in enumerate(repetitions, start=1):
            progress.cell_started(index, len(repetitions), repetition.cell.name, repetition.index)
            image = image_for(repetition.cell)
            provenance.image_used(image)
            try:
                summaries.append(run_repetition(repetition, image, progress))
            except KeyboardInterrupt:
                summaries.append(
                    RepetitionSummary(
                        repetition.run_dir,
                        repetition.cell.name,
                        repetition.index,
                        error=INTERRUPTED,
                    )
                )
                raise
    finally:  # also after an interrupt: the repetitions that finished are on record
        (root / layout.SUMMARIES).write_text(
            json.dumps([asdict(o) for o in summaries], indent=2, default=str)
        )
    return summaries
