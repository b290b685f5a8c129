"""Reconcile what each producer was told against what its read-back holds, for many runs at once.

One Spark job checks every run: each run is a task, which analysis.checks.messages answers in one
process with Arrow and numpy (a run is the unit of every question, so no shuffle is needed, and
Spark spreads the runs over its executors). The same task attributes what is missing (where
each missing message still is, from the run's kept segments) and measures the price of safety
(analysis.checks.availability), so every per-run question rides in the one job; the driver collects
each run's answer and builds its result.

`kafka-chaos reconcile RUN_GLOB` runs this stage alone (kafka_chaos.commands.reconcile).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from analysis.checks.attribution import attribute
from analysis.checks.availability import price_of_safety
from analysis.checks.check import RunFacts, RunInput
from analysis.checks.consumers import TIMELINE_COUNTS, TIMELINE_LAG, has_consumer_journals
from analysis.checks.liveness import TIMELINE_LIVENESS
from analysis.checks.messages.facts import CHUNK_ROWS
from analysis.checks.run import check_run, with_check
from analysis.model.anomalies import ANOMALY_NAMES, COUNT_NAMES, CountName, loss_of
from analysis.model.attribution import Attribution, MissingMessage
from analysis.model.availability import Availability
from analysis.model.evidence import RunEvidence
from analysis.model.results import (
    CONTRACT_KEYS,
    TIMELINE_ANOMALIES,
    Example,
    RunResult,
    RunStatus,
    TimelineSecond,
)
from analysis.spark.message_check import DataFrameMessages
from harness.rundir import layout
from harness.rundir.config import CellConfig
from harness.rundir.found import find_run_dirs, unrun_under
from harness.rundir.records import ACKED_SCHEMA, READBACK_SCHEMA, STATUSES
from harness.rundir.spec import RunSpec
from harness.rundir.transactions import read_transactions

MASTER_ENV = "KCHAOS_SPARK_MASTER"
# Spark's tasks run analysis.checks in Python workers, which Spark starts as PYSPARK_PYTHON
# (default: whatever "python3" is on PATH): unless told otherwise, use this interpreter, which
# has the checker and its libraries. A remote cluster needs PYSPARK_PYTHON set to its own.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


@dataclass(frozen=True)
class _RunDir:
    """A run directory as found on disk, checked before any Spark work."""

    run_id: int
    run_dir: Path
    spec: RunSpec
    status: RunStatus
    error: str | None
    config: CellConfig = field(default_factory=CellConfig)
    log_start_offsets: dict[int, int] = field(default_factory=dict)
    stopped_by: str | None = None  # an incomplete run: the error that stopped it, if recorded
    evidence: RunEvidence = field(default_factory=lambda: RunEvidence(Path()))  # parsed once


LOG4J_CONFIG = Path(__file__).with_name("log4j") / "log4j2.properties"
SPARK_LOG_ENV = "KCHAOS_SPARK_LOG"


def spark_log_path() -> Path:
    """Where the JVM of a session this process starts writes its log: $KCHAOS_SPARK_LOG, else
    kafka-chaos-spark.log in the temporary directory."""
    chosen = os.environ.get(SPARK_LOG_ENV)
    return Path(chosen) if chosen else Path(tempfile.gettempdir()) / "kafka-chaos-spark.log"


def spark_session(
    master: str | None = None, app_name: str = "kafka-chaos-reconcile"
) -> SparkSession:
    """A quiet SparkSession on master, else $KCHAOS_SPARK_MASTER, else Spark's default (local[*]).

    Without an explicit master none is set, so spark-submit's --master still wins. A JVM this
    call starts logs to `spark_log_path()`, errors also to the terminal (the WARN lines Spark
    prints at start would otherwise reach a run's output).
    """
    log_options = (
        f"-Dlog4j2.configurationFile=file:{LOG4J_CONFIG} -Dkchaos.spark.log={spark_log_path()}"
    )
    builder = (
        SparkSession.builder.appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.extraJavaOptions", log_options)
    )
    chosen = master or os.environ.get(MASTER_ENV)
    if chosen:
        builder = builder.master(chosen)
    if chosen is None or chosen.startswith("local") or _on_loopback(chosen):
        # A local job, or a cluster on this machine, talks only to itself: keep the driver on
        # loopback rather than the machine's outward address (executors elsewhere need that).
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = builder.config("spark.driver.host", "127.0.0.1").config(
            "spark.driver.bindAddress", "127.0.0.1"
        )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def _on_loopback(master: str) -> bool:
    """True for a spark:// master URL on 127.0.0.1 or localhost."""
    return urlparse(master).hostname in ("127.0.0.1", "localhost")


def find_runs(patterns: Iterable[str]) -> list[Path]:
    """Run directories (holding spec.json and acked.parquet) at or under any glob match, sorted,
    each run once by its spec.json identity (harness.rundir.found); copies left out are said in
    one line on stderr."""
    found = find_run_dirs(patterns)
    if note := found.note():
        print(note, file=sys.stderr)
    return found.run_dirs


def unrun_results(patterns: Iterable[str], run_dirs: Sequence[Path]) -> list[RunResult]:
    """An "error" result for each repetition the plans under `patterns` name that none of
    `run_dirs` holds (a shard that died): the judge makes it UNKNOWN with its reason."""
    return [
        RunResult(
            run_dir=str(unrun.run_dir),
            experiment=unrun.experiment,
            cell=unrun.planned.cell,
            repetition=unrun.planned.repetition,
            config=CellConfig(),
            axes=unrun.planned.axes,
            status=RunStatus.ERROR,
            error=unrun.reason,
        )
        for unrun in unrun_under(patterns, run_dirs)
    ]


def reconcile(
    spark: SparkSession, run_dirs: Sequence[Path], chunk_rows: int = CHUNK_ROWS
) -> list[RunResult]:
    """One result per run dir, in order; a failing run becomes "error". Runs up to `chunk_rows`
    acked rows (and runs with transactions or a consumer group) are checked whole, one Spark
    task each, in one job; larger ones as DataFrame operations (analysis.spark.messages), with
    the same answers."""
    runs = [_inspect(run_id, Path(run_dir)) for run_id, run_dir in enumerate(run_dirs)]
    large: dict[int, RunInput] = {}
    whole: list[tuple[int, RunInput]] = []
    for inspected in runs:
        if inspected.status == RunStatus.ERROR:
            continue
        run = _input_of(inspected)
        if _in_dataframes(run, chunk_rows):
            large[inspected.run_id] = run
        else:
            whole.append((inspected.run_id, run))
    answers = _check_all(spark, whole)
    # The same checks, the message check's DataFrame implementation in place of its own.
    in_dataframes = partial(check_run, checks=with_check(DataFrameMessages(spark)))
    for run_id, run in large.items():  # one run at a time: a failure stays its own
        answers[run_id] = _answer_of(run, in_dataframes)
    return [_result(run, answers.get(run.run_id)) for run in runs]


def reconcile_in_process(run_dirs: Sequence[Path]) -> list[RunResult]:
    """What `reconcile` answers, computed in this process without Spark, every run whole (the
    same task body per run): for a handful of runs, tests, and checking the Spark path."""
    runs = [_inspect(run_id, Path(run_dir)) for run_id, run_dir in enumerate(run_dirs)]
    answers = dict(_checked((r.run_id, _input_of(r))) for r in runs if r.status != RunStatus.ERROR)
    return [_result(run, answers.get(run.run_id)) for run in runs]


def _in_dataframes(run: RunInput, chunk_rows: int) -> bool:
    """Whether a run is checked as DataFrame operations: it has more than `chunk_rows` acked
    rows, and neither transactions nor a consumer group, whose checks take the run's message
    table as arrays (those runs stay whole)."""
    if _acked_rows(run.run_dir) <= chunk_rows:
        return False
    return read_transactions(run.run_dir) is None and not has_consumer_journals(run.run_dir)


def _inspect(run_id: int, run_dir: Path) -> _RunDir:
    """Read spec.json and the events and check the Parquet schemas, so a broken run fails alone
    and early."""
    evidence = RunEvidence.read(run_dir)  # never raises: bad lines are counted, not parsed
    try:
        spec = RunSpec.read(run_dir)
        config = spec.config
        _check_columns(run_dir / layout.ACKED, ACKED_SCHEMA)
        if not (run_dir / layout.READBACK).is_file():
            return _RunDir(
                run_id,
                run_dir,
                spec,
                RunStatus.INCOMPLETE,
                None,
                config,
                stopped_by=_stopping_error(spec, evidence),
                evidence=evidence,
            )
        _check_columns(run_dir / layout.READBACK, READBACK_SCHEMA)
        log_start = _log_start_offsets(evidence)
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        return _RunDir(run_id, run_dir, RunSpec(), RunStatus.ERROR, error, evidence=evidence)
    return _RunDir(
        run_id, run_dir, spec, RunStatus.COMPLETE, None, config, log_start, evidence=evidence
    )


def _stopping_error(spec: RunSpec, evidence: RunEvidence) -> str | None:
    """The error that stopped a run before its read-back: spec.json's harness_error, else the
    last harness_error event (None when neither says)."""
    if spec.harness_error:
        return spec.harness_error
    errors = [e.error for e in evidence.harness_errors]
    return str(errors[-1]) if errors and errors[-1] else None


def _log_start_offsets(evidence: RunEvidence) -> dict[int, int]:
    """Partition → log-start offset from the last readback event; {} when it recorded none."""
    offsets = evidence.readback.log_start_offsets if evidence.readback else {}
    return {int(partition): int(offset) for partition, offset in offsets.items()}


def _check_columns(path: Path, schema: pa.Schema) -> None:
    """Raise ValueError naming every column of schema that path lacks or holds with another type."""
    file_schema = pq.read_schema(path)
    problems = []
    for column in schema:
        if column.name not in file_schema.names:
            problems.append(f"{column.name} missing")
        elif not _readable_as(file_schema.field(column.name).type, column.type):
            actual = file_schema.field(column.name).type
            problems.append(f"{column.name} is {actual}, expected {column.type}")
    if problems:
        raise ValueError(f"{path.name}: {'; '.join(problems)}")


def _readable_as(actual: pa.DataType, wanted: pa.DataType) -> bool:
    """True when a Parquet column of Arrow type actual casts to wanted without loss."""
    if pa.types.is_null(actual):
        return True
    if pa.types.is_string(wanted):
        return bool(pa.types.is_string(actual) or pa.types.is_large_string(actual))
    if pa.types.is_signed_integer(wanted):
        return bool(pa.types.is_signed_integer(actual) and actual.bit_width <= wanted.bit_width)
    return bool(actual == wanted)


def _check_all(spark: SparkSession, inputs: list[tuple[int, RunInput]]) -> dict[int, _Answer]:
    """The answer of every run from one Spark job, one task per run; a run whose check raised
    gets the error's first line instead of facts, and the others are unaffected."""
    if not inputs:
        return {}
    outcomes = spark.sparkContext.parallelize(inputs, len(inputs)).map(_checked).collect()
    return dict(outcomes)


def _input_of(run: _RunDir) -> RunInput:
    """What the checker needs of an inspected run."""
    return RunInput(
        run_dir=run.run_dir,
        complete=run.status == RunStatus.COMPLETE,
        unlocated_acks=run.config.acks not in ("1", "all"),
        log_start=run.log_start_offsets,
        evidence=run.evidence,
    )


@dataclass(frozen=True)
class _Answer:
    """What one Spark task learnt of its run: the checker's facts (None, and `error`, when the
    check raised), where the missing messages still are, and the price of safety (None, and
    `availability_error`, when it could not be measured)."""

    facts: RunFacts | None
    error: str | None = None
    attribution: Attribution | None = None
    availability: Availability | None = None
    availability_error: str | None = None


def _checked(task: tuple[int, RunInput]) -> tuple[int, _Answer]:
    """(run id, its answer): the body of one Spark task. Never raises."""
    run_id, run = task
    return run_id, _answer_of(run, check_run)


def _answer_of(run: RunInput, check: Callable[[RunInput], RunFacts]) -> _Answer:
    """The run's answer from `check`'s facts, or from the first line of the error it raised.
    Never raises."""
    try:
        facts = check(run)
    except Exception as exc:
        return _answered(run, None, f"{type(exc).__name__}: {_first_line(exc)}")
    return _answered(run, facts, None)


def _acked_rows(run_dir: Path) -> int:
    """The rows of a run's acked.parquet, from its footer."""
    rows: int = pq.ParquetFile(run_dir / layout.ACKED).metadata.num_rows
    return rows


def _answered(run: RunInput, facts: RunFacts | None, error: str | None) -> _Answer:
    """A run's answer from its checked facts (None, and `error`, when the check raised): with
    the price of safety and, for a complete run, where its missing messages still are."""
    availability, availability_error = price_of_safety(run.evidence)
    priced = _Answer(None, availability=availability, availability_error=availability_error)
    if facts is None:
        return replace(priced, error=error)
    if not run.complete:
        return replace(priced, facts=facts)
    attribution = _attribution(run.evidence, facts.missing, _all_counts(facts))
    # The missing list (up to 100,000 rows) has served its purpose: it stays on the executor.
    return replace(priced, facts=replace(facts, missing=[]), attribution=attribution)


def _all_counts(facts: RunFacts) -> dict[str, int]:
    """Every count name, zero where the checker reported none."""
    return dict.fromkeys(COUNT_NAMES, 0) | facts.counts


def _result(run: _RunDir, answer: _Answer | None) -> RunResult:
    """The RunResult of one run from its task's answer; any failure makes it status "error".
    A run no task answered (it failed inspection) is priced here, on the driver."""
    if answer is None:
        unanswered = run.error or "RuntimeError: the Spark job returned nothing for this run"
        availability, availability_error = price_of_safety(run.evidence)
        answer = _Answer(
            None, unanswered, availability=availability, availability_error=availability_error
        )
    error = run.error or answer.error
    if error is None and answer.facts is None:
        error = "RuntimeError: the check returned no facts for this run"
    if error is None and answer.facts is not None:
        try:
            return _priced(_assembled(run, answer.facts, answer.attribution), answer)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
    return _priced(_blank_result(run, RunStatus.ERROR, error), answer)


def _priced(result: RunResult, answer: _Answer) -> RunResult:
    """The result with the price of safety its task measured."""
    return replace(
        result, availability=answer.availability, availability_error=answer.availability_error
    )


def _first_line(exc: Exception) -> str:
    """The first line of an exception's message (Java stack traces follow it)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


def _blank_result(run: _RunDir, status: RunStatus, error: str | None) -> RunResult:
    """A result with identity from spec.json (or the path) and no counts."""
    spec, path = run.spec, run.run_dir
    experiment = spec.experiment or (path.parents[2].name if len(path.parents) > 2 else "")
    repetition = spec.repetition if spec.repetition is not None else path.name
    return RunResult(
        run_dir=str(path),
        experiment=experiment,
        cell=spec.cell or path.parent.name,
        repetition=int(repetition) if str(repetition).isdigit() else -1,
        config=run.config,
        axes=dict(spec.axes),
        status=status,
        error=error,
        evidence=run.evidence,
    )


def _assembled(run: _RunDir, facts: RunFacts, attribution: Attribution | None) -> RunResult:
    """The complete or incomplete result of a run the checker answered."""
    blank = _blank_result(run, run.status, run.stopped_by)
    timeline = _timeline(facts.seconds)
    if run.status != RunStatus.COMPLETE:
        return replace(blank, timeline=timeline)
    counts = _all_counts(facts)
    contract = dict.fromkeys(CONTRACT_KEYS, 0) | facts.contract
    examples: dict[str, tuple[Example, ...]] = {
        name: tuple(Example.of(name, row) for row in facts.examples.get(name, ()))
        for name in ANOMALY_NAMES
    }
    return replace(
        blank,
        counts=counts,
        loss=loss_of(counts),
        loss_by_partition=dict(sorted(facts.loss_by_partition.items())),
        divergence_by_partition=dict(sorted(facts.divergence_by_partition.items())),
        contract=contract,
        sensitivity=facts.sensitivity,
        examples=examples,
        timeline=timeline,
        attribution=attribution,
    )


def _attribution(
    run: RunEvidence,
    missing: list[tuple[int | None, int | None, int | None]],
    counts: dict[str, int],
) -> Attribution:
    """Where each missing message still is, from the segments kept in the run directory."""
    messages = [MissingMessage(msg_id, partition, offset) for msg_id, partition, offset in missing]
    return attribute(run, messages, loss_of(counts))


def _timeline(by_second: dict[int, dict[str, Any]]) -> tuple[TimelineSecond, ...]:
    """Entries for every epoch second from the first send's to the last's, gaps filled with zeros.

    t_s counts whole seconds from the epoch second of the first send.
    """
    if not by_second:
        return ()
    first, last = min(by_second), max(by_second)
    return tuple(_second(s, s - first, by_second.get(s, {})) for s in range(first, last + 1))


def _second(epoch_s: int, t_s: int, row: dict[str, Any]) -> TimelineSecond:
    """One timeline entry with every count present (zero when the second had none)."""
    return TimelineSecond(
        t_s=t_s,
        epoch_s=epoch_s,
        **{
            key: int(row.get(key, 0))
            for key in (
                *(CountName.SENT, *STATUSES, *TIMELINE_ANOMALIES),
                *(*TIMELINE_COUNTS, *TIMELINE_LIVENESS),
            )
        },
        ack_latency_p50_ms=row.get("ack_latency_p50_ms"),
        ack_latency_p99_ms=row.get("ack_latency_p99_ms"),
        group_lag=row.get(TIMELINE_LAG),
    )


def reconcile_runs(
    run_dirs: Sequence[Path], master: str | None = None, chunk_rows: int = CHUNK_ROWS
) -> list[RunResult]:
    """`reconcile` in a session of its own (stopped after), or in the caller's active one."""
    owns_session = SparkSession.getActiveSession() is None
    spark = spark_session(master)
    try:
        return reconcile(spark, run_dirs, chunk_rows)
    finally:
        if owns_session:
            spark.stop()


def write_results(results: Sequence[RunResult]) -> None:
    """Write each result to results.json in its run directory (atomically, via a rename); a
    planned repetition without a directory (unrun_results) has none to write to."""
    for result in results:
        if not Path(result.run_dir).is_dir():
            continue
        target = Path(result.run_dir) / layout.RESULTS
        partial = target.with_suffix(".json.partial")
        partial.write_text(json.dumps(result.as_json(), indent=2, sort_keys=True) + "\n")
        partial.replace(target)
