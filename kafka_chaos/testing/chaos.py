"""One test's run: a fresh topic on the session's cluster, the test's own producer journalled,
the faults it injects, then the final heal, read-back and judgement, written as the harness
writes a repetition's run directory (spec.json, events.jsonl, the journal and acked.parquet,
readback.parquet, kept segments, broker logs) so `kafka-chaos report` reads it too.

What the test does is an experiment like any file's, checked by the same model: the options
give its kafka and topic sections, the journal's producer settings its producer section, and
each inject call one step of its faults.schedule (spec.json records them all).
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.chaos.faults import FaultContext
from harness.chaos.heal import heal_all
from harness.experiment.load import parse_experiment
from harness.experiment.matrix import expand
from harness.experiment.model import Experiment
from harness.experiment.problems import SpecError
from harness.nemesis.schedule import Nemesis
from harness.run.ending import ReadBackPlan, RunEnd, end_run
from harness.run.provenance import ProvenanceRecord
from harness.run.record import RunRecord
from harness.run.repetition import Repetition
from harness.run.resolved import RepetitionPlan, SpecTimes, resolve, write_spec
from harness.run.sampler import Sampler
from harness.rundir import layout
from harness.rundir.events import HarnessError, PhaseEvent
from harness.settings import load_settings
from harness.workload.producer.by_client import librdkafka_config
from kafka_chaos.testing.clusters import LiveCluster
from kafka_chaos.testing.errors import ChaosError, ChaosUsageError
from kafka_chaos.testing.faults import (
    FaultHandle,
    StepDocument,
    call_text,
    step_document,
    step_error,
)
from kafka_chaos.testing.journal import ChaosJournal
from kafka_chaos.testing.options import ChaosOptions, option_of
from kafka_chaos.testing.producer_config import ProducerSection, producer_section
from kafka_chaos.testing.verdict import ChaosVerdict, Judge

__all__ = ["Chaos", "experiment_of", "options_error", "with_steps"]

log = logging.getLogger("kafka_chaos.pytest")
NOT_JUDGED = "the test ended before judge(): healed, journal kept, no read-back"


def experiment_of(
    options: ChaosOptions,
    name: str,
    *,
    producer: Mapping[str, Any] | None = None,
    workload: Mapping[str, Any] | None = None,
    steps: list[StepDocument] | None = None,
) -> Experiment:
    """The validated experiment a test's run is (SpecError when invalid): the options, the
    journal's producer and workload settings, the injected steps; sends are the test's own,
    so the workload is a count with no rate."""
    document = options.document(name)
    kafka = document.setdefault("kafka", {})
    if kafka.get("version") is None and kafka.get("image") is None:
        kafka["version"] = load_settings().kafka_version  # KCHAOS_KAFKA_VERSION, as the CLI
    document["producer"] = dict(producer or {})
    document["workload"] = {"rate": None, "duration_s": None, "count": 1, **(workload or {})}
    document.setdefault("faults", {})["schedule"] = list(steps or [])
    return parse_experiment(document, f"kafka_chaos[{name}]")


def with_steps(
    options: ChaosOptions,
    name: str,
    producer: Mapping[str, Any] | None,
    workload: Mapping[str, Any] | None,
    steps: list[StepDocument],
    call: str,
) -> Experiment:
    """The experiment with `steps`, the last one new (asked for by `call`); ChaosUsageError
    naming its problems when an experiment file could not hold it."""
    try:
        return experiment_of(options, name, producer=producer, workload=workload, steps=steps)
    except SpecError as exc:
        raise step_error(call, len(steps) - 1, exc.problems or [("", str(exc))]) from None


def options_error(error: SpecError) -> ChaosUsageError:
    """The error for options the experiment refused, each problem under its option's name."""
    lines = []
    for path, reason in error.problems or [("", str(error))]:
        option = option_of(path)
        lines.append(f"  {option} ({path}): {reason}" if option else f"  {path}: {reason}")
    return ChaosUsageError("the kafka_chaos options are invalid:\n" + "\n".join(lines))


class Chaos:
    """One test's run (the `kafka_chaos` fixture): its topic, its journal, its faults, its
    judgement. Use `journal(config)`, `inject(...)` and `judge()`; `topic`,
    `bootstrap_servers`, `partitions`, `run_dir` and `cluster` say where it runs."""

    def __init__(
        self,
        live: LiveCluster,
        options: ChaosOptions,
        name: str,
        root: Path,
        judge: Judge,
    ):
        self._live = live
        self._options = options
        self._name = name
        self._judge = judge
        self._spec = experiment_of(options, name)
        self.cluster = live.cluster
        self.root = root  # as an experiment run's root: the report goes to root/report
        self.topic = f"chaos-{uuid.uuid4().hex[:12]}"
        self.partitions = self._spec.topic.partitions
        cell = expand(self._spec)[0]
        self.run_dir = root / cell.name / "0"
        self._steps: list[StepDocument] = []
        self._handles: list[FaultHandle] = []
        self._producer: ProducerSection | None = None
        self._workload: dict[str, int] = {}  # the journal's keys and message_bytes
        self._journal: ChaosJournal | None = None
        self._verdict: ChaosVerdict | None = None
        self._finished = self._healed = False
        self._record = RunRecord(self.run_dir, self._write_spec)
        ProvenanceRecord(root, self._spec).image_used(live.image)
        self.events = self._record.events
        topic = self._plan(self._spec).topic
        try:
            self.cluster.create_topic(
                topic.name, topic.partitions, topic.replication_factor, topic.settings
            )
        except Exception as exc:
            self.events.write(HarnessError(error=f"{type(exc).__name__}: {exc}"))
            self.events.close()
            raise ChaosError(f"the test's topic could not be created: {exc}") from exc
        self.events.write(PhaseEvent(phase="topic-ready", bootstrap=self.bootstrap_servers))
        self._ctx = FaultContext(self.cluster, self.topic, random.Random(self._spec.seed))
        self._nemesis = Nemesis(self._ctx, [], self.events)
        self._sampler = Sampler(self._ctx, self.events)
        self._sampler.start()

    @property
    def bootstrap_servers(self) -> str:
        """Where the test's producer connects: the cluster's brokers, host:port,..."""
        return self.cluster.bootstrap_servers

    @property
    def verdict(self) -> ChaosVerdict | None:
        """The verdict of `judge()` (None before)."""
        return self._verdict

    # -- the test's side ---------------------------------------------------------------------

    def journal(
        self, config: Mapping[str, Any], *, keys: int = 16, message_bytes: int = 100
    ) -> ChaosJournal:
        """The journal of the test's producer, created with `config` (the settings the test
        gives confluent_kafka.Producer: the checker judges by them). Values from its
        `message()` are `message_bytes` long on `keys` keys. One per test: asked again with
        the same settings, the same journal."""
        self._open("journal()")
        section = producer_section(config)
        workload = {"keys": keys, "message_bytes": message_bytes}
        if self._journal is not None:
            if (section, workload) == (self._producer, self._workload):
                return self._journal
            raise ChaosUsageError(
                "journal() was already called with other settings: one journal per test "
                "(share it between producers; its callbacks are thread-safe)"
            )
        try:
            spec = experiment_of(
                self._options, self._name, producer=section, workload=workload, steps=self._steps
            )
        except SpecError as exc:
            lines = "\n".join(f"  {path}: {reason}" for path, reason in exc.problems)
            raise ChaosUsageError(
                f"journal(config): the producer settings as the harness records them are "
                f"invalid:\n{lines or exc}"
            ) from None
        self._producer, self._workload = section, workload
        self._journal = ChaosJournal(
            self.run_dir,
            keys=spec.workload.keys,
            message_bytes=spec.workload.message_bytes,
            offsets_known=spec.producer.acks != "0",
        )
        # What the test's client ran with, as the harness records its own librdkafka recorder.
        plan = self._plan(spec)
        self.events.write(librdkafka_config(plan.producer, plan.durability[1]))
        self.events.write(PhaseEvent(phase="producers-ready", pids=[os.getpid()]))
        self.events.write(PhaseEvent(phase="workload-start"))
        return self._journal

    def inject(
        self,
        fault: str,
        target: str,
        *,
        partition: int = 0,
        params: Mapping[str, Any] | None = None,
        duration_s: float | None = None,
    ) -> FaultHandle:
        """Inject `fault` (a fault type of the registry: kill, stop, pause, partition, loss,
        slow, kill-all, power-loss, rolling-restart...) on `target` (leader, follower,
        followers, isr, out-of-sync, successor, controller, controllers, zookeeper, brokers,
        all, random, node:<id>, zookeeper:<i>) now, as one schedule step with `params`;
        `partition` is the partition whose replicas the target names. Healed by the handle's
        `heal()`, after `duration_s` when given, else by `judge()`. ChaosUsageError for a
        step an experiment file could not hold; ChaosError when the fault failed to inject
        (recorded: the run is then judged UNKNOWN)."""
        self._open("inject()")
        call = call_text(fault, target, partition, params, duration_s)
        steps = [*self._steps, step_document(fault, target, partition, params, duration_s)]
        spec = with_steps(self._options, self._name, self._producer, self._workload, steps, call)
        step = spec.faults.schedule[-1]
        self._live.check_tools(step.fault)
        self._steps = steps  # the nemesis numbers its steps as spec.json lists them
        active = self._nemesis.act(step)
        if active is None:
            raise ChaosError(
                f"{call} failed: {self._nemesis.errors[-1]} (recorded in events.jsonl: the "
                "run will be judged UNKNOWN)"
            )
        handle = FaultHandle(self._nemesis, active, int(step.partition))
        self._handles.append(handle)
        if duration_s is not None:
            handle.heal_after(duration_s)
        return handle

    def judge(self, *, fail_on_known_bug: bool = False) -> ChaosVerdict:
        """End the run (heal every fault, close the journal, read the whole topic back) and
        judge it with the checker `kafka-chaos report` uses. Flush the producer first: a send
        still without a report is indeterminate, never counted. The first verdict is kept:
        asking again returns it."""
        if self._verdict is not None:
            return self._verdict
        if self._journal is None:
            raise ChaosUsageError(
                "judge() needs the journal of the test's sends: create it with "
                "kafka_chaos.journal(config) and produce with its on_delivery callback"
            )
        self._finish(read_back=True)
        self._verdict = self._judge.verdict(
            self.run_dir,
            self.root / layout.REPORT_DIR,
            f"{self._name}: kafka-chaos (pytest)",
            fail_on_known_bug=fail_on_known_bug,
        )
        return self._verdict

    def heal(self) -> list[str]:
        """Heal every fault now (the handles', then every node: start, unpause, clean up);
        the actions taken. The run goes on."""
        for handle in self._handles:
            handle.heal()
        self._nemesis.heal_active()
        actions = heal_all(self._ctx)
        self.events.write(PhaseEvent(phase="heal", actions=actions))
        return actions

    def _open(self, what: str) -> None:
        if self._finished:
            raise ChaosUsageError(f"{what} after judge(): the run has ended")

    # -- the end of the run ------------------------------------------------------------------

    def _finish(self, *, read_back: bool) -> None:
        """Close the run as the harness closes a repetition: workload end, the journal and
        its tally, the final heal, acked.parquet, the read-back, kept segments, broker logs
        and the final spec.json; each failure is recorded as a harness error."""
        if self._finished:
            return
        self._finished = True
        errors: list[str] = [] if read_back else [NOT_JUDGED]
        journal = self._journal
        try:
            self.events.write(PhaseEvent(phase="workload-end"))
            if journal is not None and (error := journal.close(self.events)) is not None:
                errors.append(f"JournalError: {error}")
            for handle in self._handles:  # the test's own faults first: their handles say so
                self._attempt(errors, handle.heal)
            timeout_s = self._spec.faults.final_heal_timeout_s
            end = RunEnd(
                self._ctx, self._nemesis, self.events, self.run_dir, self._sampler,
                ReadBackPlan(self.topic, self.partitions, timeout_s) if read_back else None,
                records=journal is not None,
            )  # fmt: skip
            self._healed = self._attempt(errors, lambda: end_run(end))
        finally:
            for error in errors:
                self.events.write(HarnessError(error=error))
            with contextlib.suppress(Exception):
                self._record.close(
                    self.cluster,
                    "; ".join(errors) or None,
                    list(self._nemesis.resolved),
                    remove_cluster=False,  # the session's, shared by the tests
                )

    @staticmethod
    def _attempt(errors: list[str], step: Any) -> bool:
        """Run `step`; whether it succeeded (its failure is logged and added to `errors`)."""
        try:
            step()
        except Exception as exc:
            log.exception("kafka_chaos: the run's end failed")
            errors.append(f"{type(exc).__name__}: {exc}")
            return False
        return True

    def _write_spec(self, extra: SpecTimes) -> None:
        """spec.json as the harness writes it, for the experiment as it stands now."""
        sent = self._journal.sent if self._journal is not None else 0
        spec = experiment_of(
            self._options,
            self._name,
            producer=self._producer,
            workload={**self._workload, "count": max(1, sent)},
            steps=self._steps,
        )
        write_spec(self._plan(spec), extra)

    def _plan(self, spec: Experiment) -> RepetitionPlan:
        """The test's run as the harness resolves a repetition: `spec`'s only cell, its steps
        as the test took them, on the session's image, writing the test's topic."""
        repetition = Repetition(expand(spec)[0], 0, spec.seed, self.run_dir)
        return resolve(repetition, self._live.image, self.topic, list(spec.faults.schedule))

    def close(self) -> bool:
        """The fixture's teardown: end the run if the test did not judge it, heal, delete the
        topic; whether the cluster is fit for the next test (every node running)."""
        try:
            self._finish(read_back=False)
        finally:
            if not self._healed:
                with contextlib.suppress(Exception):
                    self.heal()
            with contextlib.suppress(Exception):
                futures = self.cluster.admin().delete_topics([self.topic], operation_timeout=30)
                futures[self.topic].result(timeout=30)
        try:
            return all(node.state() == "running" for node in self.cluster.all_nodes)
        except Exception:
            return False
