"""Reconcile what each producer was told against what its read-back holds, for many runs at once.

Every run goes through one Spark query: all acked.parquet files are read in one scan and all
readback.parquet files in another, each row tagged with its run, and the anomaly classes of
docs/kafka-reliability.md come out of joins keyed by (run, msg_id) and (run, partition, offset).

    python -m analysis.reconcile 'runs/my-experiment/*' [--master URL] [--out reports/latest]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import reduce
from pathlib import Path
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Row, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from analysis.anomalies import (
    ANOMALY_NAMES,
    AT_ACKED_OFFSET,
    COUNT_NAMES,
    EXAMPLE_FIELDS,
    LOSS_CLASSES,
    loss_of,
)
from analysis.attribution import Attribution, MissingMessage, attribute
from analysis.judge.verdicts import CellStats, cell_stats
from analysis.results import (
    CONTRACT_KEYS,
    Example,
    RunResult,
    RunStatus,
    Sensitivity,
    TimelineSecond,
)
from harness.rundir import layout
from harness.rundir.config import CellConfig
from harness.rundir.events import EventType, load_events
from harness.rundir.records import ACKED_SCHEMA, NO_REPORT, READBACK_SCHEMA, STATUSES, Status

MASTER_ENV = "KCHAOS_SPARK_MASTER"
SHUFFLE_PARTITIONS = 4
MAX_EXAMPLES = 20
MAX_MISSING = 100_000  # missing messages per run handed to the attribution (the rest: counted)
SLOT_BITS = 40
TIMELINE_ANOMALIES = ("missing", "duplicated")  # per second of send time, in the timeline
SENSITIVITY_SEED = 20261122
SENSITIVITY_ONE_IN = 997  # besides each partition's tail, about one healthy record in 997

# The run-file contract has one home, the harness modules that write the files; Spark reads
# the same columns with the matching types.
_SPARK_TYPES = {pa.int64(): T.LongType(), pa.int32(): T.IntegerType(), pa.string(): T.StringType()}


def spark_schema(schema: pa.Schema) -> T.StructType:
    """The Spark struct type of an Arrow schema of int64, int32 and string columns."""
    return T.StructType([T.StructField(f.name, _SPARK_TYPES[f.type]) for f in schema])


ACKED_SCHEMA = spark_schema(ACKED_SCHEMA)
READBACK_SCHEMA = spark_schema(READBACK_SCHEMA)
STATUS_CODES = {status: code for code, status in enumerate(STATUSES, start=1)}
KEY_PARTITION = ["run_id", "partition"]


@dataclass(frozen=True)
class _RunDir:
    """A run directory as found on disk, checked before any Spark work."""

    run_id: int
    run_dir: Path
    spec: dict
    status: RunStatus
    error: str | None
    config: CellConfig = field(default_factory=CellConfig)
    log_start_offsets: dict[int, int] = field(default_factory=dict)


def spark_session(
    master: str | None = None, app_name: str = "kafka-chaos-reconcile"
) -> SparkSession:
    """A quiet SparkSession on master, else $KCHAOS_SPARK_MASTER, else Spark's default (local[*]).

    Without an explicit master none is set, so spark-submit's --master still wins.
    """
    builder = (
        SparkSession.builder.appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
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
    if not spark.sparkContext.getConf().contains("spark.sql.shuffle.partitions"):
        spark.conf.set("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS))
    return spark


def _on_loopback(master: str) -> bool:
    """True for a spark:// master URL on 127.0.0.1 or localhost."""
    return urlparse(master).hostname in ("127.0.0.1", "localhost")


def find_runs(patterns: Iterable[str]) -> list[Path]:
    """Run directories (holding spec.json and acked.parquet) at or under any glob match, sorted."""
    found: set[Path] = set()
    for pattern in patterns:
        for match in glob.glob(os.path.expanduser(pattern), recursive=True):
            root = Path(match)
            if root.is_dir():
                candidates = [root, *(spec.parent for spec in root.rglob(layout.SPEC))]
                found.update(d.resolve() for d in candidates if layout.is_run_dir(d))
    return sorted(found)


def reconcile(spark: SparkSession, run_dirs: Sequence[Path]) -> list[RunResult]:
    """One result per run dir, in order, from one Spark query; a failing run becomes "error"."""
    runs = [_inspect(run_id, Path(run_dir)) for run_id, run_dir in enumerate(run_dirs)]
    rows = _query_isolating_failures(spark, [r for r in runs if r.status != RunStatus.ERROR])
    return [_result(run, rows.get(run.run_id, [])) for run in runs]


def _inspect(run_id: int, run_dir: Path) -> _RunDir:
    """Read spec.json and check the Parquet schemas, so a broken run fails alone and early."""
    try:
        spec = json.loads((run_dir / layout.SPEC).read_text())
        if not isinstance(spec, dict):
            raise ValueError(f"{layout.SPEC} holds a {type(spec).__name__}, not an object")
        if not isinstance(spec.get("axes") or {}, dict):
            raise ValueError(f"{layout.SPEC}: axes is not an object")
        config = CellConfig.read(spec.get("config") or {})
        _check_columns(run_dir / layout.ACKED, ACKED_SCHEMA)
        if not (run_dir / layout.READBACK).is_file():
            return _RunDir(run_id, run_dir, spec, RunStatus.INCOMPLETE, None, config)
        _check_columns(run_dir / layout.READBACK, READBACK_SCHEMA)
        log_start = _log_start_offsets(load_events(run_dir))
    except Exception as exc:
        return _RunDir(run_id, run_dir, {}, RunStatus.ERROR, f"{type(exc).__name__}: {exc}")
    return _RunDir(run_id, run_dir, spec, RunStatus.COMPLETE, None, config, log_start)


def _log_start_offsets(events: list[dict]) -> dict[int, int]:
    """Partition → log-start offset from the last readback event; {} when it recorded none."""
    readbacks = [e for e in events if e.get("type") == EventType.READBACK]
    offsets = (readbacks[-1].get("log_start_offsets") or {}) if readbacks else {}
    return {int(partition): int(offset) for partition, offset in offsets.items()}


def _check_columns(path: Path, schema: T.StructType) -> None:
    """Raise ValueError naming every column of schema that path lacks or holds with another type."""
    file_schema = pq.read_schema(path)
    problems = []
    for column in schema.fields:
        if column.name not in file_schema.names:
            problems.append(f"{column.name} missing")
        elif not _readable_as(file_schema.field(column.name).type, column.dataType):
            actual = file_schema.field(column.name).type
            problems.append(f"{column.name} is {actual}, expected {column.dataType.simpleString()}")
    if problems:
        raise ValueError(f"{path.name}: {'; '.join(problems)}")


def _readable_as(actual: pa.DataType, wanted: T.DataType) -> bool:
    """True when Spark reads a Parquet column of Arrow type actual as wanted without loss."""
    if pa.types.is_null(actual):
        return True
    if isinstance(wanted, T.StringType):
        return pa.types.is_string(actual) or pa.types.is_large_string(actual)
    if isinstance(wanted, T.IntegerType):
        return pa.types.is_signed_integer(actual) and actual.bit_width <= 32
    return pa.types.is_signed_integer(actual)


def _query_isolating_failures(
    spark: SparkSession, runs: list[_RunDir]
) -> dict[int, list[Row] | Exception]:
    """Report rows per run id from one query; if it fails, split the runs so only bad ones fail."""
    if not runs:
        return {}
    try:
        return _rows_by_run(_run_query(spark, runs))
    except Exception as exc:
        if len(runs) == 1:
            return {runs[0].run_id: exc}
    half = len(runs) // 2
    return {
        **_query_isolating_failures(spark, runs[:half]),
        **_query_isolating_failures(spark, runs[half:]),
    }


def _run_query(spark: SparkSession, runs: list[_RunDir]) -> list[Row]:
    """Collect the report rows of all runs, every part in one union so Spark plans it once."""
    parts, cached = _report_parts(spark, runs)
    try:
        return reduce(DataFrame.unionByName, parts.values()).collect()
    finally:
        for frame in cached:
            frame.unpersist()


def _report_parts(
    spark: SparkSession, runs: list[_RunDir]
) -> tuple[dict[str, DataFrame], list[DataFrame]]:
    """The report rows of all runs by part (named for profiling), and the frames persisted
    for them, which the caller unpersists once the parts are collected."""
    acked = _read_runs(spark, {r.run_id: r.run_dir / layout.ACKED for r in runs}, ACKED_SCHEMA)
    acked = acked.transform(_with_unknown_locations_as_null)
    parts = {"timeline": _timeline_rows(acked)}
    complete = [r for r in runs if r.status == RunStatus.COMPLETE]
    if not complete:
        return parts, []
    files = {r.run_id: r.run_dir / layout.READBACK for r in complete}
    # One log record read twice by the consumer is one record, never a Kafka duplicate. Every
    # later step reads these records (each with other columns, which would defeat Spark's reuse
    # of the shuffle), so they are deduplicated once and kept.
    readback = _kept(
        _read_runs(spark, files, READBACK_SCHEMA).dropDuplicates(["run_id", "partition", "offset"])
    )
    acked = acked.filter(F.col("run_id").isin([r.run_id for r in complete]))
    # One row per message, read by the anomalies, the contract facts and the sensitivity probe.
    messages = _kept(_located_messages(spark, acked, readback, complete))
    anomalies = _anomalies(messages, _progress(acked, readback, complete), readback)
    # Counts and examples both use the anomalies, which are few: caching them is cheap.
    anomalies = anomalies.persist(StorageLevel.MEMORY_AND_DISK)
    sensitivity = _sensitivity_rows(spark, acked, readback, messages, complete)
    parts |= {
        "read_counts": _read_count_rows(_read_extent(readback)),
        "anomaly_counts": _anomaly_count_rows(anomalies),
        "partition_loss": _partition_loss_rows(anomalies),
        "repeated_ids": _repeated_id_rows(messages),
        "examples": _example_rows(anomalies),
        "missing": _missing_rows(anomalies),
        "anomaly_seconds": _anomaly_second_rows(anomalies),
        **{f"sensitivity_{i}": frame for i, frame in enumerate(sensitivity)},
    }
    return parts, [anomalies]


def _kept(frame: DataFrame) -> DataFrame:
    """frame computed now and kept (memory, else disk) as a plan of its own.

    Each step that reuses a frame copies its whole plan; cutting the lineage here keeps the
    final plan small (Spark's optimiser slows down sharply on deep copies) and computes the
    frame once. Spark drops the kept blocks once the frame is garbage.
    """
    return frame.localCheckpoint(eager=True)


def _located_messages(
    spark: SparkSession, acked: DataFrame, readback: DataFrame, runs: list[_RunDir]
) -> DataFrame:
    """_messages of the runs' acked and (deduplicated) read-back rows, with log-start offsets."""
    return _messages(acked, readback).join(
        F.broadcast(_log_starts(spark, runs)), KEY_PARTITION, "left"
    )


def _progress(acked: DataFrame, readback: DataFrame, runs: list[_RunDir]) -> DataFrame:
    """Per (run_id, partition): how far the read-back got, the proof a missing message needs."""
    return _read_extent(readback).join(
        _later_sends_read(acked, readback, runs), KEY_PARTITION, "left"
    )


def _sensitivity_rows(
    spark: SparkSession,
    acked: DataFrame,
    readback: DataFrame,
    messages: DataFrame,
    runs: list[_RunDir],
) -> list[DataFrame]:
    """The sensitivity check, in the same job: reconcile each run again with a seeded set of
    healthy acknowledged records (every partition's last one, plus a hashed sample) removed
    from its read-back; report how many were removed, how many of those the check reported
    missing, and the probe's whole loss (which must exceed the run's by exactly the removed).

    The probe's messages are the run's own except where the removal changes them (see
    _probe_messages); every message is then judged again, with the probe's progress."""
    removed = F.broadcast(_kept(_records_to_remove(messages)))
    probe_readback = readback.join(
        removed.select("run_id", "partition", "offset"), ["run_id", "partition", "offset"], "anti"
    )
    probe_messages = _probe_messages(spark, acked, probe_readback, messages, removed, runs)
    probe = _anomalies(probe_messages, _progress(acked, probe_readback, runs), probe_readback)
    probe_missing = probe.filter(F.col("anomaly").isin(*LOSS_CLASSES)).select("run_id", "msg_id")
    found = probe_missing.join(removed.select("run_id", "msg_id"), ["run_id", "msg_id"])
    tallies = {
        "removed": removed.groupBy("run_id").count(),
        "found": found.groupBy("run_id").count(),
        "probe_loss": probe_missing.groupBy("run_id").count(),
    }
    return [
        _report(frame, "sensitivity", F.lit(name), F.col("count"), F.lit(None))
        for name, frame in tallies.items()
    ]


def _probe_messages(
    spark: SparkSession,
    acked: DataFrame,
    probe_readback: DataFrame,
    messages: DataFrame,
    removed: DataFrame,
    runs: list[_RunDir],
) -> DataFrame:
    """What _located_messages gives for the probe's read-back, rebuilt only where it differs.

    A message's row depends on its own acked rows, its own reads and the records at its acked
    offsets; removing records changes exactly the rows of their messages and of the messages
    acknowledged at their offsets (a null msg_id is a message too: the run's unidentified ones).
    Rebuilding those few by the same _messages keeps the probe a second reconciliation without
    a second pass over every row.
    """
    slots = ["run_id", "partition", "offset"]
    at_removed = acked.join(removed.select(*slots), slots, "left_semi").select("run_id", "msg_id")
    touched = _kept(at_removed.unionByName(removed.select("run_id", "msg_id")).distinct())
    touched = F.broadcast(touched)
    touched_acked = _kept(_by_message(acked, touched, "left_semi"))
    touched_slots = F.broadcast(touched_acked.select(*slots).dropna().distinct())
    touched_reads = (
        _by_message(probe_readback, touched, "left_semi")
        .unionByName(probe_readback.join(touched_slots, slots, "left_semi"))
        .dropDuplicates(slots)
    )
    rebuilt = _by_message(
        _located_messages(spark, touched_acked, touched_reads, runs), touched, "left_semi"
    )
    return _by_message(messages, touched, "left_anti").unionByName(rebuilt)


def _by_message(frame: DataFrame, ids: DataFrame, how: str) -> DataFrame:
    """frame semi- or anti-joined with ids on run_id and msg_id, a null msg_id matching null."""
    other = ids.select(F.col("run_id").alias("_run"), F.col("msg_id").alias("_msg"))
    on = (frame["run_id"] == other["_run"]) & frame["msg_id"].eqNullSafe(other["_msg"])
    return frame.join(other, on, how)


def _records_to_remove(messages: DataFrame) -> DataFrame:
    """(run_id, msg_id, partition, offset) of healthy acknowledged records to hide: read exactly
    once, at the acked offset when there is one. Each partition's last such record is among them,
    so the check also covers the tail, where missing messages count as unseen."""
    healthy = messages.filter(
        (F.col("status") == Status.OK)
        & (F.col("reads") == 1)
        & (F.col("offset").isNull() | F.col("holder_msg_id").eqNullSafe(F.col("msg_id")))
    ).select(
        "run_id",
        "msg_id",
        F.col("read_partition").alias("partition"),
        F.col("read_offset").alias("offset"),
    )
    # A partition's healthy records sit at distinct offsets: its last is the one at the highest.
    tails = healthy.groupBy(*KEY_PARTITION).agg(F.max("offset").alias("tail_offset"))
    sampled = F.xxhash64("run_id", "msg_id", F.lit(SENSITIVITY_SEED)) % SENSITIVITY_ONE_IN == 0
    with_tail = healthy.join(F.broadcast(tails), KEY_PARTITION)
    return with_tail.filter((F.col("offset") == F.col("tail_offset")) | sampled).drop("tail_offset")


def _rows_by_run(rows: list[Row]) -> dict[int, list[Row]]:
    """Group collected report rows by their run id."""
    grouped: dict[int, list[Row]] = defaultdict(list)
    for row in rows:
        grouped[row.run_id].append(row)
    return grouped


def _read_runs(spark: SparkSession, files: dict[int, Path], schema: T.StructType) -> DataFrame:
    """One scan of all files, each row tagged with the run_id of the file it came from."""
    frame = spark.read.schema(schema).parquet(*(_escape_glob(str(p)) for p in files.values()))
    runs = _run_ids_by_uri(spark, frame.inputFiles(), files)
    tagged = frame.withColumn("file_uri", F.col("_metadata.file_path")).join(
        F.broadcast(runs), "file_uri", "left"
    )
    # A URI spelt in a way not foreseen must fail the query, never silently drop its rows.
    unknown = F.raise_error(F.concat(F.lit("no run for "), F.col("file_uri")))
    run_id = F.when(F.col("run_id").isNull(), unknown).otherwise(F.col("run_id"))
    return tagged.select(run_id.alias("run_id"), *schema.fieldNames())


def _run_ids_by_uri(spark: SparkSession, uris: list[str], files: dict[int, Path]) -> DataFrame:
    """A literal table (file_uri, run_id) holding each spelling Spark may give a file's URI."""
    run_of_file = {path.resolve(): run_id for run_id, path in files.items()}
    pairs = []
    for uri in uris:
        run_id = run_of_file.get(Path(unquote(urlparse(uri).path)).resolve())
        if run_id is None:
            raise RuntimeError(f"Spark listed {uri}, which is none of the run files asked for")
        # inputFiles() spells local files file:///x where the _metadata column has file:/x.
        pairs += [(spelling, run_id) for spelling in {uri, re.sub("^file:///", "file:/", uri)}]
    rows = (F.struct(F.lit(u).alias("file_uri"), F.lit(r).alias("run_id")) for u, r in pairs)
    # Built from literals rather than createDataFrame so Spark folds it into a local table.
    return spark.range(1).select(F.inline(F.array(*rows)))


def _escape_glob(path: str) -> str:
    """Path with Hadoop glob characters escaped, since Spark globs every path it is given."""
    return re.sub(r"([\\\[\]{}*?])", r"\\\1", path)


def _log_starts(spark: SparkSession, runs: list[_RunDir]) -> DataFrame:
    """A literal table (run_id, partition, log_start) of the log-start offsets above zero."""
    rows = [
        F.struct(
            F.lit(r.run_id).alias("run_id"),
            F.lit(p).alias("partition"),
            F.lit(o).alias("log_start"),
        )
        for r in runs
        for p, o in r.log_start_offsets.items()
        if o > 0
    ]
    if not rows:
        return spark.range(0).select(
            F.lit(0).alias("run_id"),
            F.lit(0).alias("partition"),
            F.lit(0).cast("long").alias("log_start"),
        )
    return (
        spark.range(1)
        .select(F.inline(F.array(*rows)))
        .withColumn("log_start", F.col("log_start").cast("long"))
    )


def _with_unknown_locations_as_null(acked: DataFrame) -> DataFrame:
    """Acked rows with a negative partition or offset set to null.

    librdkafka reports offset -1001 under acks=0 and partition -1 when unassigned.
    """
    return acked.withColumns(
        {
            "partition": F.when(F.col("partition") >= 0, F.col("partition")),
            "offset": F.when(F.col("offset") >= 0, F.col("offset")),
        }
    )


def _messages(acked: DataFrame, readback: DataFrame) -> DataFrame:
    """One row per (run_id, msg_id) sent or read: the send, the record at its acked offset, reads.

    Records whose msg_id is null share one row per run (msg_id null, in_acked false).
    """
    at_slot = readback.select(
        "run_id",
        F.col("partition").alias("slot_partition"),
        F.col("offset").alias("slot_offset"),
        F.col("msg_id").alias("holder_msg_id"),
        F.lit(True).alias("slot_read"),
    )
    # An unknown location gets a unique negative slot: it matches no record, and the sends of an
    # acks=0 run (no offsets at all) do not pile up in one shuffle partition.
    slots = {
        "slot_partition": F.coalesce("partition", F.lit(-1)),
        "slot_offset": F.coalesce("offset", -1 - F.col("msg_id")),
    }
    # Offset first: Spark sorts on the first key's prefix, and run_id barely varies.
    sends = acked.withColumns(slots).join(
        at_slot, ["slot_offset", "slot_partition", "run_id"], "left"
    )
    sent_facts = sends.select(
        "run_id",
        "msg_id",
        F.lit(True).alias("in_acked"),
        _status_code(F.col("status")).alias("status_code"),
        "partition",
        "offset",
        "send_ts_us",
        "holder_msg_id",
        "slot_read",
        F.lit(1).alias("acked_row"),
    )
    # Where a record was read, as one long (offsets stay far below 2^40): with fixed-width values
    # only, Spark merges the facts with a hash aggregation instead of sorting them.
    read_slot = F.shiftleft(F.col("partition").cast("long"), SLOT_BITS) + F.col("offset")
    read_facts = readback.select("run_id", "msg_id", read_slot.alias("read_slot"))
    facts = sent_facts.unionByName(read_facts, allowMissingColumns=True)
    merged = facts.groupBy("run_id", "msg_id").agg(
        F.coalesce(F.max("in_acked"), F.lit(False)).alias("in_acked"),
        F.max("status_code").alias("status_code"),
        F.max("partition").alias("partition"),
        F.max("offset").alias("offset"),
        F.max("send_ts_us").alias("send_ts_us"),
        F.min("holder_msg_id").alias("holder_msg_id"),
        F.coalesce(F.max("slot_read"), F.lit(False)).alias("slot_read"),
        F.count("read_slot").alias("reads"),
        F.coalesce(F.sum("acked_row"), F.lit(0)).alias("acked_rows"),
        F.min("read_slot").alias("first_read"),
    )
    return merged.select(
        "*",
        _status_name(F.col("status_code")).alias("status"),
        F.shiftright("first_read", SLOT_BITS).cast("int").alias("read_partition"),
        F.col("first_read").bitwiseAND((1 << SLOT_BITS) - 1).alias("read_offset"),
    )


def _status_code(status: Column) -> Column:
    """status as the small int of STATUS_CODES, 0 for any other value."""
    code = F.lit(0)
    for name, number in STATUS_CODES.items():
        code = F.when(status == name, number).otherwise(code)
    return code


def _status_name(code: Column) -> Column:
    """The status a STATUS_CODES number stands for, null for 0."""
    names = F.create_map(*(x for name, n in STATUS_CODES.items() for x in (F.lit(n), F.lit(name))))
    return names[code]


def _read_extent(readback: DataFrame) -> DataFrame:
    """Per (run_id, partition): how many records were read and the highest offset read."""
    return readback.groupBy(*KEY_PARTITION).agg(
        F.count("*").alias("records"), F.max("offset").alias("max_read_offset")
    )


def _later_sends_read(acked: DataFrame, readback: DataFrame, runs: list[_RunDir]) -> DataFrame:
    """Per (run_id, partition read): latest send time of a message read there with no acked offset.

    Only runs whose spec allows acks=0 (or does not say) are joined: under acks 1 and all every
    success carries its offset, so no missing message there needs this proof.
    """
    ids = [r.run_id for r in runs if r.config.acks not in ("1", "all")]
    unlocated = acked.filter(F.col("run_id").isin(ids) & F.col("offset").isNull())
    read = readback.filter(F.col("run_id").isin(ids)).select("run_id", "msg_id", "partition")
    return (
        unlocated.select("run_id", "msg_id", "send_ts_us")
        .join(read, ["run_id", "msg_id"])
        .groupBy(*KEY_PARTITION)
        .agg(F.max("send_ts_us").alias("max_read_send_ts_us"))
    )


def _read_count_rows(read_extent: DataFrame) -> DataFrame:
    """Count rows for read, one per run and partition (summed per run after collection)."""
    return _report(read_extent, "count", F.lit("read"), F.col("records"), F.lit(None))


def _anomalies(messages: DataFrame, progress: DataFrame, readback: DataFrame) -> DataFrame:
    """One row per anomalous message or record: run_id, anomaly class, example fields, weight."""
    with_progress = messages.join(F.broadcast(progress), KEY_PARTITION, "left")
    return _message_anomalies(with_progress).unionByName(
        _reordered(readback), allowMissingColumns=True
    )


def _message_anomalies(messages: DataFrame) -> DataFrame:
    """Every class decided by a message's own row (all but reordered); a message may be in several.

    An acked message never read is expired below its partition's log-start offset; otherwise it is
    lost when its partition was read at or past its acked offset (or, with no acked offset, a
    later send of its partition was read), else unseen. Lost and unseen are disjoint, so their
    sum counts each missing acknowledged message once.
    """
    status, reads, offset = F.col("status"), F.col("reads"), F.col("offset")
    expired = offset.isNotNull() & (offset < F.coalesce(F.col("log_start"), F.lit(0)))
    proof = F.when(
        offset.isNotNull(), F.col("slot_read") | (F.col("max_read_offset") > offset)
    ).otherwise(F.col("max_read_send_ts_us") > F.col("send_ts_us"))
    proven = F.coalesce(proof, F.lit(False))
    missing = F.col("in_acked") & (status == Status.OK) & (reads == 0) & ~expired
    located_ok = (status == Status.OK) & offset.isNotNull() & F.col("partition").isNotNull()
    not_at_acked_offset = ~F.col("holder_msg_id").eqNullSafe(F.col("msg_id"))
    unacked = status.isin(Status.FAILED, Status.INDETERMINATE)
    conditions = {
        "lost": missing & proven,
        "unseen": missing & ~proven,
        "offset_divergent": located_ok & F.col("slot_read") & not_at_acked_offset,
        "expired": F.col("in_acked") & (status == Status.OK) & (reads == 0) & expired,
        "duplicated": (status == Status.OK) & (reads > 1),
        "duplicated_unacked": unacked & (reads > 1),
        "moved": located_ok & (reads > 0) & not_at_acked_offset,
        "failed_present": (status == Status.FAILED) & (reads > 0),
        "indeterminate_present": (status == Status.INDETERMINATE) & (reads > 0),
        "phantom": ~F.col("in_acked") & (reads > 0),
    }
    classes = F.array(*(F.when(cond, F.lit(name)) for name, cond in conditions.items()))
    # Filtering first keeps the array building (interpreted, slow) to the few anomalous rows.
    anomalous = messages.filter(reduce(Column.__or__, conditions.values()))
    flagged = anomalous.withColumn("anomaly", F.explode(F.filter(classes, lambda c: c.isNotNull())))
    at_acked = F.col("anomaly").isin(*AT_ACKED_OFFSET)
    return flagged.select(
        "run_id",
        "anomaly",
        "msg_id",
        F.when(at_acked, F.col("partition")).otherwise(F.col("read_partition")).alias("partition"),
        F.when(at_acked, offset).otherwise(F.col("read_offset")).alias("offset"),
        F.col("holder_msg_id").alias("readback_msg_id_at_offset"),
        "reads",
        "send_ts_us",
        F.when(F.col("anomaly") == "phantom", reads).otherwise(1).cast("long").alias("weight"),
    )


def _reordered(readback: DataFrame) -> DataFrame:
    """Records read after a higher key_seq of their key in the same partition (offset order).

    Order is judged per partition only: a key's records in another partition say nothing.
    """
    # key before run_id: the sort compares on a prefix of the first column, which run_id wastes.
    earlier = (
        Window.partitionBy("key", "run_id", "partition")
        .orderBy("offset")
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    with_max = readback.filter(F.col("key_seq").isNotNull()).withColumn(
        "max_key_seq_before", F.max("key_seq").over(earlier)
    )
    return with_max.filter(F.col("key_seq") < F.col("max_key_seq_before")).select(
        "run_id",
        F.lit("reordered").alias("anomaly"),
        "msg_id",
        "partition",
        "offset",
        "key",
        "key_seq",
        "max_key_seq_before",
        F.lit(1).cast("long").alias("weight"),
    )


def _report(frame: DataFrame, kind: str, name: Column, value: Column, payload: Column) -> DataFrame:
    """frame reshaped to the common report schema, so every part can go into one union."""
    return frame.select(
        F.col("run_id").cast("int").alias("run_id"),
        F.lit(kind).alias("kind"),
        name.cast("string").alias("name"),
        value.cast("long").alias("value"),
        payload.cast("string").alias("payload"),
    )


def _anomaly_count_rows(anomalies: DataFrame) -> DataFrame:
    """Count rows per anomaly class: ids for most classes, records for phantom."""
    totals = anomalies.groupBy("run_id", "anomaly").agg(F.sum("weight").alias("value"))
    return _report(totals, "count", F.col("anomaly"), F.col("value"), F.lit(None))


def _partition_loss_rows(anomalies: DataFrame) -> DataFrame:
    """Per run and acked partition (null: unknown): missing acknowledged messages ("loss") and
    rewritten acknowledged offsets ("divergence"), so a verdict can scope its evidence."""
    kind = F.when(F.col("anomaly").isin(*LOSS_CLASSES), F.lit("loss")).otherwise("divergence")
    relevant = anomalies.filter(F.col("anomaly").isin(*LOSS_CLASSES, "offset_divergent"))
    totals = relevant.groupBy("run_id", kind.alias("what"), "partition").count()
    name = F.concat_ws(":", "what", F.coalesce(F.col("partition").cast("string"), F.lit("unknown")))
    return _report(totals, "by_partition", name, F.col("count"), F.lit(None))


def _anomaly_second_rows(anomalies: DataFrame) -> DataFrame:
    """Per run and epoch second of send time: acked messages later missing, and duplicated."""
    what = F.when(F.col("anomaly").isin(*LOSS_CLASSES), F.lit("missing")).otherwise("duplicated")
    timed = anomalies.filter(
        F.col("anomaly").isin(*LOSS_CLASSES, "duplicated") & F.col("send_ts_us").isNotNull()
    )
    seconds = timed.groupBy(
        "run_id", what.alias("what"), F.floor(F.col("send_ts_us") / 1_000_000).alias("epoch_s")
    ).count()
    return _report(seconds, "anomaly_second", F.col("what"), F.col("epoch_s"), F.col("count"))


def _repeated_id_rows(messages: DataFrame) -> DataFrame:
    """Per run, the msg_ids that acked.parquet holds more than once, and its rows without a
    msg_id (a delivery report whose value was not ours): both breach the contract."""
    identified = F.col("msg_id").isNotNull()
    breaches = messages.filter(F.col("acked_rows") > F.when(identified, 1).otherwise(0))
    name = F.when(identified, F.lit("repeated_msg_ids")).otherwise(F.lit("unidentified_rows"))
    totals = breaches.groupBy("run_id", name.alias("name")).agg(
        F.sum(F.when(identified, 1).otherwise(F.col("acked_rows"))).alias("value")
    )
    return _report(totals, "contract", F.col("name"), F.col("value"), F.lit(None))


def _example_rows(anomalies: DataFrame) -> DataFrame:
    """Up to MAX_EXAMPLES rows per run and class, lowest msg_id first, payload as JSON."""
    order = Window.partitionBy("run_id", "anomaly").orderBy(
        F.col("msg_id").asc_nulls_last(), "partition", "offset"
    )
    ranked = anomalies.withColumn("rank", F.row_number().over(order))
    fields = sorted({f for names in EXAMPLE_FIELDS.values() for f in names})
    payload = F.to_json(F.struct(*fields))
    top = ranked.filter(F.col("rank") <= MAX_EXAMPLES)
    return _report(top, "example", F.col("anomaly"), F.col("rank"), payload)


def _missing_rows(anomalies: DataFrame) -> DataFrame:
    """Up to MAX_MISSING missing acknowledged messages per run, lowest msg_id first: msg_id,
    and the acked partition and offset as JSON (for the attribution)."""
    order = Window.partitionBy("run_id").orderBy("msg_id")
    missing = anomalies.filter(F.col("anomaly").isin(*LOSS_CLASSES))
    top = missing.withColumn("rank", F.row_number().over(order)).filter(
        F.col("rank") <= MAX_MISSING
    )
    location = F.to_json(F.struct("partition", "offset"))
    return _report(top, "missing", F.lit(None), F.col("msg_id"), location)


def _timeline_rows(acked: DataFrame) -> DataFrame:
    """One row per run and epoch second with sends: statuses and ack latency percentiles.

    Summed over seconds these are also the run's sent, acked, failed and indeterminate counts,
    and the contract facts: rows per status that carry a delivery report, unknown statuses.
    """
    status = F.col("status")
    ok = status == Status.OK
    reported = F.col("error").isNull() | (F.col("error") != NO_REPORT)
    latency_ms = F.when(ok, (F.col("ack_ts_us") - F.col("send_ts_us")) / 1000.0)
    # Sends without a time land in a null second: not charted, but still counted.
    seconds = acked.groupBy(
        "run_id", F.floor(F.col("send_ts_us") / 1_000_000).alias("epoch_s")
    ).agg(
        F.count("*").alias("sent"),
        *(F.count_if(status == s).alias(s) for s in STATUSES),
        *(F.count_if((status == s) & reported).alias(f"reported_{s}") for s in STATUSES),
        F.count_if(~F.coalesce(status.isin(*STATUSES), F.lit(False))).alias("unknown_statuses"),
        F.percentile_approx(latency_ms, [0.5, 0.99]).alias("latency"),
    )
    payload = F.to_json(
        F.struct(
            "sent",
            *STATUSES,
            *(f"reported_{s}" for s in STATUSES),
            "unknown_statuses",
            F.col("latency")[0].alias("ack_latency_p50_ms"),
            F.col("latency")[1].alias("ack_latency_p99_ms"),
        )
    )
    return _report(seconds, "second", F.lit(None), F.col("epoch_s"), payload)


def _result(run: _RunDir, rows: list[Row] | Exception) -> RunResult:
    """The RunResult of one run from its report rows; any failure makes it status "error"."""
    error = run.error
    if isinstance(rows, Exception):
        error = f"{type(rows).__name__}: {_first_line(rows)}"
    if error is None:
        try:
            return _assembled(run, rows)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
    return _blank_result(run, RunStatus.ERROR, error)


def _first_line(exc: Exception) -> str:
    """The first line of an exception's message (Java stack traces follow it)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


def _blank_result(run: _RunDir, status: RunStatus, error: str | None) -> RunResult:
    """A result with identity from spec.json (or the path) and no counts."""
    spec, path = run.spec, run.run_dir
    experiment = spec.get("experiment") or (path.parents[2].name if len(path.parents) > 2 else "")
    repetition = spec.get("repetition", path.name)
    return RunResult(
        run_dir=str(path),
        experiment=str(experiment),
        cell=str(spec.get("cell") or path.parent.name),
        repetition=int(repetition) if str(repetition).isdigit() else -1,
        config=run.config,
        axes=dict(spec.get("axes") or {}),
        status=status,
        error=error,
    )


def _assembled(run: _RunDir, rows: list[Row]) -> RunResult:
    """The complete or incomplete result of a run whose query succeeded."""
    blank = _blank_result(run, run.status, None)
    seconds = {row.value: json.loads(row.payload) for row in rows if row.kind == "second"}
    for row in rows:
        if row.kind == "anomaly_second" and row.value in seconds:
            seconds[row.value][row.name] = int(row.payload)
    timeline = _timeline({s: row for s, row in seconds.items() if s is not None})
    if run.status != RunStatus.COMPLETE:
        return replace(blank, timeline=timeline)
    counts = _counts(list(seconds.values()), [row for row in rows if row.kind == "count"])
    contract = _contract(list(seconds.values()), [row for row in rows if row.kind == "contract"])
    by_partition: dict[str, dict[str, int]] = {"loss": {}, "divergence": {}}
    for row in rows:
        if row.kind == "by_partition":
            what, _, partition = row.name.partition(":")
            by_partition[what][partition] = int(row.value)
    examples = _examples([row for row in rows if row.kind == "example"])
    probe = {row.name: int(row.value) for row in rows if row.kind == "sensitivity"}
    return replace(
        blank,
        counts=counts,
        loss=loss_of(counts),
        loss_by_partition=dict(sorted(by_partition["loss"].items())),
        divergence_by_partition=dict(sorted(by_partition["divergence"].items())),
        contract=contract,
        sensitivity=_sensitivity(probe, loss_of(counts)),
        examples=examples,
        timeline=timeline,
        attribution=_attribution(run, [row for row in rows if row.kind == "missing"], counts),
    )


def _attribution(run: _RunDir, missing_rows: list[Row], counts: dict[str, int]) -> Attribution:
    """Where each missing message still is, from the segments kept in the run directory."""
    missing = []
    for row in missing_rows:
        acked_at = json.loads(row.payload)
        missing.append(MissingMessage(row.value, acked_at.get("partition"), acked_at.get("offset")))
    return attribute(run.run_dir, missing, loss_of(counts))


def _counts(seconds: list[dict], count_rows: list[Row]) -> dict[str, int]:
    """Every count of COUNT_NAMES: send statuses summed over seconds, the rest over count rows."""
    counts = dict.fromkeys(COUNT_NAMES, 0)
    statuses = {"sent": "sent", "acked": Status.OK, "failed": Status.FAILED}
    statuses["indeterminate"] = Status.INDETERMINATE
    for second in seconds:
        for key, status in statuses.items():
            counts[key] += int(second[status])
    for row in count_rows:
        counts[row.name] += int(row.value)
    return counts


def _sensitivity(probe: dict[str, int], loss: int) -> Sensitivity:
    """Passed when the probe reported every removed record missing and nothing else beyond the
    run's own loss."""
    removed, found = probe.get("removed", 0), probe.get("found", 0)
    extra = probe.get("probe_loss", 0) - loss - found
    return Sensitivity(removed=removed, found=found, passed=found == removed and extra == 0)


def _contract(seconds: list[dict], contract_rows: list[Row]) -> dict[str, int]:
    """The CONTRACT_KEYS facts: per-second tallies summed, plus the contract rows."""
    contract = dict.fromkeys(CONTRACT_KEYS, 0)
    for second in seconds:
        for key in CONTRACT_KEYS:
            contract[key] += int(second.get(key) or 0)
    for row in contract_rows:
        contract[row.name] += int(row.value)
    return contract


def _examples(example_rows: list[Row]) -> dict[str, tuple[Example, ...]]:
    """Examples per anomaly class in rank order, each with the fields EXAMPLE_FIELDS names."""
    examples: dict[str, list[Example]] = {name: [] for name in ANOMALY_NAMES}
    for row in sorted(example_rows, key=lambda r: r.value):
        examples[row.name].append(Example.of(row.name, json.loads(row.payload)))
    return {name: tuple(rows) for name, rows in examples.items()}


def _timeline(by_second: dict[int, dict]) -> tuple[TimelineSecond, ...]:
    """Entries for every epoch second from the first send's to the last's, gaps filled with zeros.

    t_s counts whole seconds from the epoch second of the first send.
    """
    if not by_second:
        return ()
    first, last = min(by_second), max(by_second)
    return tuple(_second(s, s - first, by_second.get(s, {})) for s in range(first, last + 1))


def _second(epoch_s: int, t_s: int, row: dict) -> TimelineSecond:
    """One timeline entry with every count present (zero when the second had none)."""
    return TimelineSecond(
        t_s=t_s,
        epoch_s=epoch_s,
        **{key: int(row.get(key, 0)) for key in ("sent", *STATUSES, *TIMELINE_ANOMALIES)},
        ack_latency_p50_ms=row.get("ack_latency_p50_ms"),
        ack_latency_p99_ms=row.get("ack_latency_p99_ms"),
    )


def reconcile_runs(run_dirs: Sequence[Path], master: str | None = None) -> list[RunResult]:
    """`reconcile` in a session of its own (stopped after), or in the caller's active one."""
    owns_session = SparkSession.getActiveSession() is None
    spark = spark_session(master)
    try:
        return reconcile(spark, run_dirs)
    finally:
        if owns_session:
            spark.stop()


def write_results(results: Sequence[RunResult]) -> None:
    """Write each result to results.json in its run directory (atomically, via a rename)."""
    for result in results:
        target = Path(result.run_dir) / layout.RESULTS
        partial = target.with_suffix(".json.partial")
        partial.write_text(json.dumps(result.as_json(), indent=2, sort_keys=True) + "\n")
        partial.replace(target)


TABLE_COUNTS = ("acked", *ANOMALY_NAMES, "loss")
CELL_TABLE = "cells.md"  # written by the command line beside its printout


def cell_table(results: Sequence[RunResult]) -> str:
    """A Markdown table of summed counts per cell; reps shows complete/total if they differ."""
    groups: dict[tuple[str, str], list[RunResult]] = defaultdict(list)
    for result in results:
        groups[(result.experiment, result.cell)].append(result)
    several_experiments = len({experiment for experiment, _ in groups}) > 1
    header = ["cell", "reps", *TABLE_COUNTS]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for (experiment, cell), reps in sorted(groups.items()):
        name = f"{experiment}/{cell}" if several_experiments else cell
        lines.append(
            "| " + " | ".join([name.replace("|", r"\|"), *_table_row(cell_stats(reps))]) + " |"
        )
    return "\n".join(lines) + "\n"


def _table_row(stats: CellStats) -> list[str]:
    """reps, then the sum of each TABLE_COUNTS count over the cell's counted repetitions."""
    reps = str(stats.repetitions)
    if stats.counted != stats.repetitions:
        reps = f"{stats.counted}/{reps}"
    sums = [str(stats.counts[k].total) if k in stats.counts else "n/a" for k in TABLE_COUNTS]
    return [reps, *sums]


def main(argv: list[str] | None = None) -> int:
    """CLI: reconcile the runs matching the globs, write results.json and the cell table."""
    parser = argparse.ArgumentParser(
        prog="python -m analysis.reconcile",
        description="Reconcile acked messages against the read-back of chaos runs.",
    )
    parser.add_argument("globs", nargs="+", metavar="RUN_GLOB", help="run dirs or any parent")
    parser.add_argument("--master", help=f"Spark master (default: ${MASTER_ENV}, else local[*])")
    parser.add_argument("--out", type=Path, default=Path("reports/latest"), help="report dir")
    args = parser.parse_args(argv)
    run_dirs = find_runs(args.globs)
    if not run_dirs:
        print(
            f"no run directory matches {' '.join(args.globs)}: a run directory holds "
            f"{layout.SPEC} and {layout.ACKED}. Fix: name runs/<experiment>/... or a parent of it "
            "(quote globs so the shell leaves them alone), or run an experiment first (make run).",
            file=sys.stderr,
        )
        return 2
    results = reconcile_runs(run_dirs, args.master)
    write_results(results)
    table = cell_table(results)
    args.out.mkdir(parents=True, exist_ok=True)
    md_path = args.out / CELL_TABLE
    md_path.write_text(table)
    print(table, end="")
    tally = {s.value: sum(r.status == s for r in results) for s in RunStatus}
    print(
        f"{len(results)} runs ({', '.join(f'{n} {s}' for s, n in tally.items())}); wrote {md_path}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
