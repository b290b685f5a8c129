"""Runs an experiment: for each cell and repetition a fresh cluster, workload ║ nemesis,
final heal, read-back, and a run directory written in phases (so a crash is still analysable).
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from harness.chaos.faults import FAULT_TYPES, FaultContext, check_tools
from harness.chaos.nemesis import Nemesis, heal_all
from harness.experiment.spec import (
    Cell,
    Experiment,
    cell_config,
    producer_settings,
    schedule_for,
    topic_settings,
)
from harness.platform.cluster import KafkaCluster, remove_leftovers
from harness.platform.image import BrokerImage
from harness.run.evidence import segments_event
from harness.run.provenance import ProvenanceRecord, git_revision
from harness.run.sampler import Sampler
from harness.rundir import layout
from harness.rundir.events import EventLog, EventType, now_us
from harness.workload.journal import AckJournal, JournalError, finalize
from harness.workload.readback import read_back
from harness.workload.recorder import DeliveryTally, Recorder, RecorderStats, Workload, outcome_of

TOPIC = "chaos"
log = logging.getLogger("kafka_chaos")


class Progress(Protocol):
    """Where the runner reports what it is doing (a live display, or plain lines for CI)."""

    def cell_started(self, index: int, total: int, cell: str, repetition: int) -> None: ...
    def phase(self, name: str) -> None: ...
    def watch(self, stats: RecorderStats | None, nemesis: Nemesis | None) -> None: ...
    def cell_finished(self, outcome: RepetitionOutcome) -> None: ...


@dataclass(frozen=True)
class Job:
    """One repetition of one cell, with its seed and run directory."""

    cell: Cell
    repetition: int
    seed: int
    run_dir: Path


@dataclass
class RepetitionOutcome:
    """What the harness itself saw of one repetition (the verdict is the analysis' job)."""

    run_dir: Path
    cell: str
    repetition: int
    sent: int = 0
    ok: int = 0
    failed: int = 0
    indeterminate: int = 0
    read: int = 0
    readback_complete: bool = False
    fault_errors: list[str] = field(default_factory=list)
    error: str | None = None


def plan_jobs(experiment: Experiment, cells: Sequence[Cell], root: Path) -> list[Job]:
    """Every (cell, repetition) to run, with run directories under `root`."""
    return [
        Job(cell, rep, experiment.seed + rep, root / cell.name / str(rep))
        for cell in cells
        for rep in range(experiment.repetitions)
    ]


def select_shard(cells: Sequence[Cell], shard: tuple[int, int] | None) -> list[Cell]:
    """The cells of shard i of n (1-based), dealt round-robin so shards get similar mixes."""
    if shard is None:
        return list(cells)
    index, count = shard
    return [cell for position, cell in enumerate(cells) if position % count == index - 1]


def experiment_root(runs_dir: Path, experiment: Experiment, shard: tuple[int, int] | None) -> Path:
    """runs/<experiment>/<UTC timestamp>[-shard-i-of-n]/"""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    suffix = f"-shard-{shard[0]}-of-{shard[1]}" if shard else ""
    return runs_dir / experiment.name / f"{stamp}{suffix}"


def write_spec(job: Job, image: BrokerImage, steps: list, extra: dict[str, Any]) -> None:
    """spec.json: the resolved cell, seed, image and revision (rewritten as phases complete)."""
    spec = job.cell.spec
    document = {
        "experiment": spec.name,
        "cell": job.cell.name,
        "repetition": job.repetition,
        "seed": job.seed,
        "axes": job.cell.axes,
        "config": {**cell_config(job.cell, steps), "kafka_version": image.kafka_version},
        "image": image.tag,
        "image_id": image.image_id,
        "git_revision": git_revision(),
        "producer": producer_settings(spec),
        "topic": {
            "name": TOPIC,
            "partitions": spec.topic.partitions,
            "replication_factor": spec.topic.replication_factor,
            "config": topic_settings(spec),
        },
        "workload": spec.workload.model_dump(),
        "schedule": [step.model_dump() for step in steps],
        "kafka": spec.kafka.model_dump(),
        **extra,
    }
    (job.run_dir / layout.SPEC).write_text(json.dumps(document, indent=2, default=str))


def run_job(job: Job, image: BrokerImage, progress: Progress) -> RepetitionOutcome:
    """Run one repetition end to end; the cluster is removed whatever happens."""
    spec = job.cell.spec
    job.run_dir.mkdir(parents=True, exist_ok=True)
    steps = schedule_for(job.cell, job.seed)
    started_at = now_us()
    write_spec(job, image, steps, {"started_at_us": started_at})
    outcome = RepetitionOutcome(job.run_dir, job.cell.name, job.repetition)
    events = EventLog(job.run_dir / layout.EVENTS)
    cluster = KafkaCluster(
        image=image.tag,
        brokers=spec.kafka.brokers,
        broker_config={k: str(v) for k, v in spec.kafka.broker_config.items()},
    )
    try:
        progress.phase("starting cluster")
        events.write("phase", phase="cluster-start")
        cluster.start()
        # Before any write: a fault that cannot run would only show up as NOT-PROVOKED.
        check_tools(cluster.nodes[0], [FAULT_TYPES[step.fault] for step in steps], image.tag)
        cluster.create_topic(
            TOPIC, spec.topic.partitions, spec.topic.replication_factor, topic_settings(spec)
        )
        events.write("phase", phase="topic-ready", bootstrap=cluster.bootstrap_servers)
        ctx = FaultContext(cluster, TOPIC, random.Random(job.seed))
        journal_error = _workload_and_faults(job, ctx, steps, events, outcome, progress)
        _read_back(job, cluster, events, outcome, progress)
        # While the brokers still hold their logs: where each missing message still is.
        progress.phase("keeping segments")
        segments = segments_event(cluster.nodes, TOPIC, spec.topic.partitions, job.run_dir)
        events.write(EventType.SEGMENTS, **segments)
        if journal_error is not None:  # read back first: the rest is still evidence
            raise JournalError(journal_error)
    except Exception as exc:
        outcome.error = f"{type(exc).__name__}: {exc}"
        log.exception("repetition %s/%s failed", job.cell.name, job.repetition)
        events.write("harness_error", error=outcome.error)
    finally:
        with contextlib.suppress(Exception):
            cluster.collect_logs(job.run_dir / layout.BROKER_LOGS)
        cluster.close()
        events.write("phase", phase="cluster-removed")
        events.close()
        write_spec(
            job,
            image,
            steps,
            {"started_at_us": started_at, "ended_at_us": now_us(), "harness_error": outcome.error},
        )
    progress.cell_finished(outcome)
    return outcome


def _workload_and_faults(
    job: Job,
    ctx: FaultContext,
    steps: list,
    events: EventLog,
    outcome: RepetitionOutcome,
    progress: Progress,
) -> str | None:
    """The workload in this thread, the nemesis and sampler beside it; heal all at the end.

    Returns the journal's error (None when every delivery report reached the journal).
    """
    spec = job.cell.spec
    workload = Workload(
        spec.workload.rate,
        spec.workload.duration_s,
        spec.workload.count,
        spec.workload.message_bytes,
        spec.workload.keys,
    )
    journal = AckJournal(job.run_dir, spec.workload.keys, outcome_of)
    sampler = Sampler(ctx, events)
    nemesis = Nemesis(ctx, steps, events)
    recorder: Recorder | None = None
    stop = threading.Event()
    try:
        recorder = Recorder(
            ctx.cluster.bootstrap_servers, TOPIC, producer_settings(spec), workload, journal
        )
        watcher = threading.Thread(
            target=_watch, args=(progress, recorder, nemesis, stop), daemon=True
        )
        sampler.start()
        progress.phase("workload + faults")
        events.write("phase", phase="workload-start")
        nemesis.start(time.monotonic())
        watcher.start()
        recorder.run(threading.Event())
        events.write("phase", phase="workload-end")
    finally:
        stop.set()
        # First, so that no failure below can keep the journal (and the tally) unwritten.
        journal_error = _close_journal(journal, recorder, events)
        try:
            nemesis.stop()
            progress.phase("final heal")
            events.write("phase", phase="heal", actions=heal_all(ctx))
        finally:
            finalize(job.run_dir)
            sampler.stop()
    stats = recorder.stats  # after the journal closed: every report it wrote
    outcome.sent, outcome.ok = stats.sent, stats.ok
    outcome.failed, outcome.indeterminate = stats.failed, stats.indeterminate
    outcome.fault_errors = list(nemesis.errors)
    return journal_error


def _close_journal(journal: AckJournal, recorder: Recorder | None, events: EventLog) -> str | None:
    """Close the journal, then record the recorder's tally beside the journal's error.

    Never raises: it runs in `finally`, where the workload's own exception must survive.
    The analysis compares the tally with acked.parquet's reported rows, status by status.
    """
    error = None
    try:
        journal.close()
    except Exception as exc:
        error = str(exc) if isinstance(exc, JournalError) else f"{type(exc).__name__}: {exc}"
        log.error("journal incomplete: %s", error)
    tally = recorder.tally if recorder is not None else DeliveryTally()
    with contextlib.suppress(Exception):
        events.write(EventType.RECORDER_TALLY, reports=tally.as_dict(), journal_error=error)
    return error


def _watch(progress: Progress, recorder: Recorder, nemesis: Nemesis, stop: threading.Event) -> None:
    while not stop.wait(0.5):
        progress.watch(recorder.stats, nemesis)


def _read_back(
    job: Job,
    cluster: KafkaCluster,
    events: EventLog,
    outcome: RepetitionOutcome,
    progress: Progress,
) -> None:
    """Wait (bounded) for a full ISR everywhere, then read every partition to its HW."""
    spec = job.cell.spec
    progress.phase("waiting for full ISR")
    started = time.monotonic()
    full_isr = True
    try:
        cluster.wait_full_isr(TOPIC, timeout_s=spec.faults.final_heal_timeout_s)
    except Exception as exc:
        full_isr = False
        log.warning("no full ISR after heal: %s", exc)
    waited = time.monotonic() - started
    progress.phase("read-back")
    events.write("phase", phase="readback-start")
    result = read_back(
        cluster.bootstrap_servers, TOPIC, spec.topic.partitions, job.run_dir / layout.READBACK
    )
    events.write(
        "readback",
        waited_s=round(waited, 3),
        full_isr=full_isr,
        log_start_offsets=result.log_start_offsets,
        high_watermarks=result.high_watermarks,
        complete=result.complete,
        records=result.records,
        seconds=round(result.seconds, 3),
        log_start_is_zero=all(v == 0 for v in result.log_start_offsets.values()),
    )
    outcome.read, outcome.readback_complete = result.records, result.complete


def run_experiment(
    experiment: Experiment,
    cells: Sequence[Cell],
    root: Path,
    image_for: Callable[[Cell], BrokerImage],
    progress: Progress,
) -> list[RepetitionOutcome]:
    """Run every job of `cells` into `root`; a failed job is recorded and the next one runs.

    `image_for` gives each cell its broker image (cells may differ in Kafka version).
    """
    root.mkdir(parents=True, exist_ok=True)
    removed = remove_leftovers()
    if removed:
        log.info("removed %d containers/networks left by a crashed run", removed)
    jobs = plan_jobs(experiment, cells, root)
    (root / layout.PLAN).write_text(
        json.dumps(
            [
                {
                    "cell": j.cell.name,
                    "repetition": j.repetition,
                    "seed": j.seed,
                    "run_dir": str(j.run_dir),
                }
                for j in jobs
            ],
            indent=2,
        )
    )
    provenance = ProvenanceRecord(root, experiment)
    outcomes = []
    for index, job in enumerate(jobs, start=1):
        progress.cell_started(index, len(jobs), job.cell.name, job.repetition)
        image = image_for(job.cell)
        provenance.image_used(image)
        outcomes.append(run_job(job, image, progress))
    (root / layout.OUTCOMES).write_text(
        json.dumps([asdict(o) for o in outcomes], indent=2, default=str)
    )
    return outcomes
