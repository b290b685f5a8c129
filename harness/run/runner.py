"""Runs an experiment: for each cell and repetition a fresh cluster, workload ║ nemesis,
final heal, read-back, and a run directory written in phases (so a crash is still analysable).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from functools import partial
from pathlib import Path

from harness.chaos.faults import FAULT_TYPES, FaultContext, check_tools
from harness.experiment.matrix import Cell
from harness.experiment.model import Experiment
from harness.experiment.timeouts import stuck_bound_s
from harness.nemesis.schedule import Nemesis
from harness.platform.image import BrokerImage
from harness.platform.leftovers import remove_leftovers
from harness.run.ending import RunEnd, end_run, read_back_and_keep
from harness.run.interrupts import INTERRUPTS
from harness.run.provenance import ProvenanceRecord
from harness.run.record import RunRecord
from harness.run.repetition import (
    Progress,
    RepetitionSummary,
    plan_repetitions,
    point_latest_at,
    write_plan,
)
from harness.run.resolved import RepetitionPlan, resolve, write_spec
from harness.run.sampler import Sampler
from harness.rundir import layout
from harness.rundir.events import (
    EventLog,
    HarnessError,
    PhaseEvent,
)
from harness.rundir.provenance import SettingFrom
from harness.rundir.records import CommitMode
from harness.workload.consumer_group.group import CatchUp, ConsumerGroup, Liveness
from harness.workload.neighbours import LOG as NEIGHBOURS_LOG
from harness.workload.neighbours import (
    OFFSETS_PARTITIONS,
    Broker,
    NeighbourLoad,
    Neighbours,
    neighbour_ids,
)
from harness.workload.neighbours import TOPIC as NEIGHBOURS_TOPIC
from harness.workload.producer.by_client import client_senders, librdkafka_config
from harness.workload.producer.fleet import Producing
from harness.workload.producer.librdkafka import LocalRecorder, process_fleet, producer_tasks
from harness.workload.producer.recorder import RecorderStats
from harness.workload.programs import group_member
from harness.workload.transactions.java import java_transactions
from harness.workload.transactions.librdkafka import (
    GROUP_ID,
    TRANSACTIONAL_ID,
    TransactionalRecorder,
)

TOPIC = layout.TOPIC
# The harness error of a repetition stopped by SIGINT or SIGTERM.
INTERRUPTED = "interrupted (SIGINT or SIGTERM) before the repetition finished"
log = logging.getLogger("kafka_chaos")


def run_repetition(plan: RepetitionPlan, progress: Progress) -> RepetitionSummary:
    """Run one repetition end to end from its plan; the cluster is removed whatever happens."""
    repetition, run_dir = plan.repetition, plan.run_dir
    record = RunRecord(run_dir, partial(write_spec, plan))
    summary = RepetitionSummary(run_dir, repetition.cell.name, repetition.index)
    events = record.events
    cluster = plan.new_cluster()
    try:
        progress.phase("starting cluster")
        events.write(PhaseEvent(phase="cluster-start"))
        cluster.start()
        # Before any write: a fault that cannot run would only show up as NOT-PROVOKED.
        faults = [FAULT_TYPES[step.fault] for step in plan.schedule if not step.heals]
        check_tools(cluster.nodes[0], faults, plan.image.tag)
        topic = plan.topic
        cluster.create_topic(topic.name, topic.partitions, topic.replication_factor, topic.settings)
        events.write(PhaseEvent(phase="topic-ready", bootstrap=cluster.bootstrap_servers))
        ctx = FaultContext(cluster, topic.name, random.Random(repetition.seed))
        if plan.transactions is not None:
            ctx = dataclasses.replace(ctx, transactional_id=TRANSACTIONAL_ID, group_id=GROUP_ID)
        workload_error = _workload_and_faults(plan, ctx, events, summary, progress)
        try:
            readback = read_back_and_keep(ctx, plan.read_back, run_dir, events, progress.phase)
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
        record.close(cluster, summary.error, summary.resolved_schedule, remove_cluster=True)
    progress.cell_finished(summary)
    return summary


class RepetitionError(RuntimeError):
    """Two errors of one repetition: the one that ended its workload, then its read-back's."""


def _described(exc: BaseException) -> str:
    """`Type: message` as a harness error records it (a RepetitionError: its message)."""
    return str(exc) if isinstance(exc, RepetitionError) else f"{type(exc).__name__}: {exc}"


def _workload_and_faults(
    plan: RepetitionPlan,
    ctx: FaultContext,
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
    senders = _senders(plan, ctx.cluster.bootstrap_servers, events)
    in_process = plan.client.kind == "librdkafka" and not plan.client.runs_program
    if in_process:  # a program reports its own settings
        events.write(librdkafka_config(plan.producer, plan.durability[1]))
    sampler = Sampler(ctx, events)
    nemesis = Nemesis(ctx, plan.schedule, events, disjoint=plan.spec.faults.acts_disjoint)
    summary.resolved_schedule = nemesis.resolved  # the steps as they act, read at the end
    stop = threading.Event()
    ctx.consumers = _consumer_group(plan, ctx.cluster.bootstrap_servers, events)
    transactions = plan.spec.workload.transactions
    offsets_sent = transactions is not None and transactions.send_offsets
    if ctx.consumers is not None and not offsets_sent:  # group-coordinator: the group's
        ctx.group_id = ctx.consumers.group_id
    group = None
    if ctx.consumers is not None:
        catch_up_s = plan.spec.workload.consumer_catch_up_s
        neighbours = _neighbours(plan, ctx, ctx.consumers.group_id)
        group = _GroupEnd(ctx.consumers, events, catch_up_s, progress, neighbours)
    client_error: Exception | None = None
    try:
        try:
            _start_and_send(ctx, senders, sampler, nemesis, events, progress, stop, group)
        except Exception as exc:  # the workload ended early: heal, read back, judge what it did
            client_error = exc
            log.exception("the workload ended early")
        events.write(PhaseEvent(phase="workload-end"))
    finally:
        stop.set()
        # First, so that no failure below can keep the journal (and the tally) unwritten.
        workload_error = senders.close(events)
        _faults_after_workload(plan, nemesis, progress)
        end = RunEnd(
            ctx, nemesis, events, plan.run_dir, sampler, None, group=group, phase=progress.phase
        )
        try:
            end_run(end)  # the read-back waits for the interrupt's chance below
        finally:  # whatever failed above: the progress line tells what was really sent
            _count_sends(summary, senders.stats, nemesis)
    INTERRUPTS.raise_if_stopped()  # healed and journalled: now the interrupt may surface
    return client_error or workload_error


def _faults_after_workload(plan: RepetitionPlan, nemesis: Nemesis, progress: Progress) -> None:
    """Let the schedule go on after the workload, its producers closed, for up to
    faults.after_workload_s: the final heal comes after. A signal ends the wait without
    raising (the caller's final heal must run; the interrupt surfaces after it)."""
    after_s = plan.spec.faults.after_workload_s
    if not after_s or INTERRUPTS.stop.is_set():
        return
    progress.phase("faults after the workload")
    deadline = time.monotonic() + after_s
    with INTERRUPTS.deferred() as stopped:
        while not stopped.is_set() and (left := deadline - time.monotonic()) > 0:
            if nemesis.finish(min(left, 0.5)):
                return
    log.info("the schedule outlasted faults.after_workload_s (%g s) or was stopped", after_s)


@dataclasses.dataclass
class _GroupEnd:
    """The consumer group at the end of the run (ending.GroupEnd): caught up unless the run
    was stopped, then closed with where it got."""

    group: ConsumerGroup
    events: EventLog
    timeout_s: float
    progress: Progress
    neighbours: Neighbours | None = None  # started after the group, ended before it
    caught_up: CatchUp | None = None

    def catch_up(self) -> None:
        if not INTERRUPTS.stop.is_set():
            self.caught_up = _catch_up(self.group, self.timeout_s, self.progress)

    def close(self) -> None:
        if self.neighbours is not None:
            self.neighbours.stop()
        self.group.close(self.events, self.caught_up)


def _start_and_send(
    ctx: FaultContext,
    senders: Producing,
    sampler: Sampler,
    nemesis: Nemesis,
    events: EventLog,
    progress: Progress,
    stop: threading.Event,
    group: _GroupEnd | None = None,
) -> None:
    """Start the consumer group (and its neighbours) and the senders, then run the workload
    beside the nemesis and sampler; raises whatever ended the workload early (the caller heals
    and reads back)."""
    if ctx.consumers is not None:  # reading before the first send
        progress.phase("consumer group joining")
        ctx.consumers.start()
    if group is not None and group.neighbours is not None:  # the group made __consumer_offsets
        progress.phase("neighbour groups committing")
        group.neighbours.start()
    progress.phase("producer starting")  # minutes when it first ages its transactional.id
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


def _consumer_group(plan: RepetitionPlan, bootstrap: str, events: EventLog) -> ConsumerGroup | None:
    """The workload's consumer group (not started), or None for `workload.consumers: 0`."""
    workload = plan.spec.workload
    if not workload.consumers:
        return None
    timeout_ms = None if plan.transactions is None else plan.transactions.timeout_ms
    return ConsumerGroup(
        workload.consumers,
        bootstrap,
        plan.topic.name,
        plan.topic.partitions,
        CommitMode(workload.consumer_commit),
        plan.run_dir,
        events,
        workload.consumer_processing_ms,
        group_member(workload.client),
        Liveness(stuck_bound_s(workload), timeout_ms),
        workload.consumer_session_timeout_ms,
    )


def _neighbours(plan: RepetitionPlan, ctx: FaultContext, group_id: str) -> Neighbours | None:
    """The neighbour groups of workload.neighbours (None without): their topic created, the
    groups placed on `group_id`'s __consumer_offsets partition, not started."""
    spec = plan.spec.workload.neighbours
    if spec is None:
        return None
    ctx.cluster.create_topic(NEIGHBOURS_TOPIC, spec.partitions, 1)
    brokers = ctx.cluster.admin().list_topics(timeout=10).brokers.values()
    offsets_partitions = int(
        plan.spec.kafka.broker_config.get("offsets.topic.num.partitions", OFFSETS_PARTITIONS)
    )
    load = NeighbourLoad(
        brokers=tuple(
            Broker(b.id, b.host or "", b.port) for b in sorted(brokers, key=lambda b: b.id)
        ),
        groups=tuple(neighbour_ids(group_id, offsets_partitions, spec.groups)),
        partitions=spec.partitions,
        monitors=spec.monitors,
        commit_interval_s=spec.commit_interval_s,
        log=str(plan.run_dir / NEIGHBOURS_LOG),
    )
    return Neighbours(load)


def _catch_up(consumers: ConsumerGroup, timeout_s: float, progress: Progress) -> CatchUp:
    """After the final heal: let the group commit up to the end of every partition (bounded)."""
    progress.phase("consumers catching up")
    with INTERRUPTS.deferred() as interrupted:
        return consumers.catch_up(timeout_s, interrupted)


def _senders(plan: RepetitionPlan, bootstrap: str, events: EventLog) -> Producing:
    """The senders of the plan's client: for librdkafka, the one recorder in this process for
    `workload.producers: 1`, else a fleet of producer processes."""
    spec, workload, run_dir = plan.spec, plan.workload, plan.run_dir
    endpoint = (bootstrap, plan.topic.name)
    if plan.transactions is not None:
        if plan.client.runs_program:
            return java_transactions(
                plan.client, spec.producer, workload, plan.transactions, endpoint, run_dir,
                plan.durability,
            )  # fmt: skip
        return TransactionalRecorder(
            bootstrap, plan.topic.name, plan.producer, workload, plan.transactions, run_dir
        )
    if plan.client.kind != "librdkafka" or plan.client.runs_program:
        return client_senders(
            plan.client, spec.producer, workload, spec.workload.producers, endpoint, run_dir,
            events, plan.durability,
        )  # fmt: skip
    if spec.workload.producers == 1:
        return LocalRecorder(workload, bootstrap, plan.topic.name, plan.producer, run_dir)
    tasks = producer_tasks(
        spec.workload.producers, workload, bootstrap, plan.topic.name, plan.producer, run_dir
    )
    return process_fleet(tasks, events)


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
    *,
    shard: tuple[int, int] | None = None,
    selection: Sequence[Cell] | None = None,
) -> list[RepetitionSummary]:
    """Run every repetition of `cells` into `root`; a failed one is recorded, the next runs.

    `image_for` gives each cell its broker image (cells may differ in Kafka version);
    `settings`, those the command line applied from files and --set, go to provenance.json.
    `cells` are shard `shard` (i/n) of `selection`, which plan.json records whole so that an
    analysis of every shard knows what a shard that died planned.
    """
    root.mkdir(parents=True, exist_ok=True)
    point_latest_at(root)
    removed = remove_leftovers()
    if removed:
        log.info("removed %d containers/networks left by a crashed run", removed)
    repetitions = plan_repetitions(experiment, cells, root)
    write_plan(root, experiment, cells if selection is None else selection, shard)
    provenance = ProvenanceRecord(root, experiment, settings=settings)
    summaries: list[RepetitionSummary] = []
    try:
        for index, repetition in enumerate(repetitions, start=1):
            progress.cell_started(index, len(repetitions), repetition.cell.name, repetition.index)
            image = image_for(repetition.cell)
            provenance.image_used(image)
            try:
                summaries.append(run_repetition(resolve(repetition, image), progress))
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
