"""Large runs reconciled in shards, so no task holds a whole run: bounded memory at any size.

A run with more than `shard_rows` acked rows is split by message key into `RunInput.shards`
shards (analysis.checks.messages.columns.shard_of). Spark reads its Parquet files in splits,
and everything that spans shards is a Spark operation that spills to disk:

- the records are made distinct by (partition, offset), and each acked row is joined with the
  record at its acked slot (the holder, whichever shard its message is in);
- how far the read-back got in each partition (and, under acks=0, the latest send read there);
- the send timeline, counts and contract, grouped by second (percentile_disc is the same
  nearest-rank percentile the whole-run check takes);
- the order check, a window over each partition's records of one key in offset order.

Then the acked rows (with their holders) and the records are spread by shard over as many
tasks: a task holds whole shards and runs the whole-run message check on them
(analysis.checks.messages.shard.check_shard). The driver merges a run's answers. A task's
memory grows with `shard_rows`, not with the run.
"""

from __future__ import annotations

import contextlib
import math
import pickle
import resource
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Row, SparkSession, Window
from pyspark.sql import functions as F

from analysis.checks.messages.columns import (
    ACKED_COLUMNS,
    CODE,
    NO_ID,
    READBACK_COLUMNS,
    Acked,
    Reads,
)
from analysis.checks.messages.examples import MAX_EXAMPLES
from analysis.checks.messages.facts import SHARD_ROWS, RunFacts, RunInput
from analysis.checks.messages.index import Holders, Progress
from analysis.checks.messages.shard import (
    Reordering,
    SendFacts,
    ShardFacts,
    check_shard,
    merge,
)
from analysis.checks.messages.timeline import LATENCY_PERCENTILES
from analysis.model.anomalies import EXAMPLE_FIELDS, STATUS_COUNTS, AnomalyName, CountName
from analysis.model.results import ExampleRow
from harness.rundir import layout
from harness.rundir.records import NO_REPORT, STATUSES

US_PER_S = 1_000_000
_ACKED_TYPES = {"partition": "bigint", "offset": "bigint", "msg_id": "bigint"}
_READ_TYPES = {"partition": "bigint", "offset": "bigint", "msg_id": "bigint", "key_seq": "bigint"}
_CONTRACT_KEYS = ("unknown_statuses", *(f"reported_{s}" for s in STATUSES))
_FACTS_SCHEMA = "facts binary, peak_rss_kb long"
_SIDE, _ACKED, _RECORD = "side", 0, 1  # which file a row of the shards' frame comes from
_TASK = "task"
# What check_shard reads of each side (the error, ack time and key serve other checks).
_SHARD_ACKED = ("msg_id", "status", "partition", "offset", "send_ts_us", "held", "held_by")
_SHARD_RECORDS = ("msg_id", "key_seq", "partition", "offset")
# A late record's example row: the fields the whole-run check gives, key last as it does.
_REORDERED_FIELDS = (
    *(f for f in EXAMPLE_FIELDS[AnomalyName.REORDERED] if f != "key"),
    "key",
)


def shard_count(acked_rows: int, shard_rows: int = SHARD_ROWS) -> int:
    """How many shards a run of `acked_rows` is reconciled in: 1 up to shard_rows, then one
    more per shard_rows."""
    return max(1, math.ceil(acked_rows / max(shard_rows, 1)))


@dataclass(frozen=True)
class ShardedAnswer:
    """What the shards of one run gave: its facts, or the error that stopped them; and the
    largest memory any of its tasks' Python workers reached (kB, 0 when none ran)."""

    facts: RunFacts | None
    error: str | None = None
    peak_rss_kb: int = 0


def check_sharded(
    spark: SparkSession, runs: Sequence[tuple[int, RunInput]]
) -> dict[int, ShardedAnswer]:
    """The facts of every run, each reconciled in its `shards` shards (see the module
    docstring); a run whose check raised gets the error's first line instead."""
    answers: dict[int, ShardedAnswer] = {}
    for run_id, run in runs:  # one run at a time: a failure stays its own
        try:
            answers[run_id] = _check_one(spark, run_id, run)
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [""])[0]
            answers[run_id] = ShardedAnswer(None, f"{type(exc).__name__}: {first}")
    return answers


def _check_one(spark: SparkSession, run_id: int, run: RunInput) -> ShardedAnswer:
    """One run's facts from its shards."""
    acked = _acked_frame(spark, run_id, run)
    send = _send_facts(acked)
    if not run.complete:
        return ShardedAnswer(RunFacts(send.seconds, send.counts, send.contract))
    # Made distinct once (a shuffle), then read by the progress, order and shard jobs; kept on
    # disk where it does not fit in the executor's storage memory.
    records = _records_frame(spark, run_id, run).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        return _checked_shards(run, acked, records, send)
    finally:
        records.unpersist()


def _checked_shards(
    run: RunInput, acked: DataFrame, records: DataFrame, send: SendFacts
) -> ShardedAnswer:
    """A complete run's facts from its acked rows, distinct records and send facts."""
    progress = _progress(acked, records, run.unlocated_acks)
    reordering = _reordering(records)
    held = records.select(
        "partition", "offset", F.col("msg_id").alias("held_by"), F.lit(True).alias("held")
    )
    acked_held = acked.join(held, ["partition", "offset"], "left").fillna({"held": False})
    # Both sides in one frame, one shard per task: mapInArrow streams a task's rows to Python
    # without the sort and per-group framing of a grouped or cogrouped UDF (measured: most of
    # the job's time). Only the columns check_shard reads travel.
    acked_side = acked_held.select(*_SHARD_ACKED, "shard", F.lit(_ACKED).alias(_SIDE))
    records_side = records.select(*_SHARD_RECORDS, "shard", F.lit(_RECORD).alias(_SIDE))
    both = acked_side.unionByName(records_side, allowMissingColumns=True)
    out = (
        both.withColumn(_TASK, _task_label(run.shards))
        .repartition(run.shards, _TASK)
        .mapInArrow(_shard_task(run, progress), schema=_FACTS_SCHEMA)
        .collect()
    )
    shards: list[ShardFacts] = [pickle.loads(row["facts"]) for row in out]
    peak = max((int(row["peak_rss_kb"]) for row in out), default=0)
    return ShardedAnswer(merge(send, shards, reordering), peak_rss_kb=peak)


def _task_label(shards: int) -> Column:
    """Per row, a number whose Spark partitioning hash sends its shard to the task of the same
    index, so that no task holds two shards. Spark spreads `repartition(n, column)` by
    pmod(hash(column), n), and hash() is that same Murmur3: the first numbers landing on each
    index are found by asking it."""
    spark = SparkSession.getActiveSession()
    assert spark is not None, "a Spark session is active while a run is checked"
    probe = spark.range(0, 64 * shards).select(
        "id", F.pmod(F.hash("id"), F.lit(shards)).alias("task")
    )
    first: dict[int, int] = {}
    for row in probe.collect():
        first.setdefault(int(row["task"]), int(row["id"]))
    labels = [first.get(s, s) for s in range(shards)]  # 64 per task: none missing in practice
    # Longs, as spark.range's ids: the hash of an int differs from the hash of the same long.
    array = F.array(*[F.lit(label).cast("bigint") for label in labels])
    return F.element_at(array, (F.col("shard") + 1).cast("int"))


def _shard_expr(shards: int) -> Column:
    """The shard of each row's msg_id: the SQL twin of shard_of (null msg_id: shard 0)."""
    return F.when(F.col("msg_id").isNull(), F.lit(0)).otherwise(
        F.pmod(F.col("msg_id"), F.lit(shards))
    )


def _acked_frame(spark: SparkSession, run_id: int, run: RunInput) -> DataFrame:
    """acked.parquet's checked columns, typed, with the run and each row's shard."""
    frame = spark.read.parquet(str(run.run_dir / layout.ACKED))
    return _typed(frame, ACKED_COLUMNS, _ACKED_TYPES).withColumns(
        {"run": F.lit(run_id).cast("bigint"), "shard": _shard_expr(run.shards).cast("bigint")}
    )


def _records_frame(spark: SparkSession, run_id: int, run: RunInput) -> DataFrame:
    """readback.parquet's distinct records (by partition and offset), with run and shard."""
    frame = spark.read.parquet(str(run.run_dir / layout.READBACK))
    typed = _typed(frame, READBACK_COLUMNS, _READ_TYPES).dropDuplicates(["partition", "offset"])
    return typed.withColumns(
        {"run": F.lit(run_id).cast("bigint"), "shard": _shard_expr(run.shards).cast("bigint")}
    )


def _typed(frame: DataFrame, columns: Sequence[str], types: dict[str, str]) -> DataFrame:
    """The columns, cast where `types` names one (narrower integer files read the same)."""
    return frame.select(*[F.col(c).cast(types[c]) if c in types else F.col(c) for c in columns])


def _progress(acked: DataFrame, records: DataFrame, unlocated: bool) -> Progress:
    """How far the whole read-back got per partition: the highest offset read, and under acks
    that allow an ok without an offset, the latest send of such a row whose message was read
    there (Progress.of over a whole run)."""
    highest = records.groupBy("partition").agg(F.max("offset").alias("offset")).collect()
    later: dict[int, int] = {}
    if unlocated:
        rows = acked.filter(
            (F.col("offset").isNull() | (F.col("offset") < 0))
            & F.col("send_ts_us").isNotNull()
            & F.col("msg_id").isNotNull()
        ).select("msg_id", "send_ts_us")
        read_where = records.filter(F.col("msg_id").isNotNull()).select("msg_id", "partition")
        latest = rows.join(read_where, "msg_id").groupBy("partition").agg(F.max("send_ts_us"))
        later = {int(r[0]): int(r[1]) for r in latest.collect()}
    return Progress({int(r["partition"]): int(r["offset"]) for r in highest}, later)


def _status_code() -> Column:
    """CODE of each row's status, 0 for a value that is no status."""
    code = F.lit(0)
    for status in reversed(STATUSES):
        code = F.when(F.col("status") == status, F.lit(CODE[status])).otherwise(code)
    return code


def _send_facts(acked: DataFrame) -> SendFacts:
    """The send timeline, counts and contract over every acked row (send_facts of a whole
    run): the counts per second of send, and the nearest-rank ack latency percentiles."""
    code, reported = _status_code(), F.col("error").isNull() | (F.col("error") != NO_REPORT)
    rows = acked.select(
        code.alias("code"),
        reported.alias("reported"),
        F.col("send_ts_us"),
        F.when(
            (code == CODE["ok"]) & F.col("ack_ts_us").isNotNull(),
            F.col("ack_ts_us") - F.col("send_ts_us"),
        ).alias("latency_us"),
    )
    tallies = _tallies(F.col("code"), F.col("reported"))
    percentiles = [
        F.expr(f"percentile_disc({p}) WITHIN GROUP (ORDER BY latency_us)").alias(name)
        for name, p in LATENCY_PERCENTILES.items()
    ]
    # One pass: rows without a send time are the group of second null, in the totals only.
    by_second = (
        rows.withColumn("second", F.floor(F.col("send_ts_us") / F.lit(US_PER_S)).cast("bigint"))
        .groupBy("second")
        .agg(F.count(F.lit(1)).alias(CountName.SENT), *tallies, *percentiles)
        .collect()
    )
    totals = {
        name: sum(int(row[name] or 0) for row in by_second)
        for name in (CountName.SENT, *STATUSES, *_CONTRACT_KEYS)
    }
    return SendFacts(
        seconds={
            int(r["second"]): _second_entry(r.asDict())
            for r in by_second
            if r["second"] is not None
        },
        counts={str(CountName.SENT): totals[CountName.SENT]}
        | {str(name): totals[status] for status, name in STATUS_COUNTS.items()},
        contract={key: totals[key] for key in _CONTRACT_KEYS},
    )


def _tallies(code: Column, reported: Column) -> list[Column]:
    """Rows per status, reported rows per status, and rows of no known status."""
    counted = []
    for status in STATUSES:
        is_status = code == CODE[status]
        counted.append(F.sum(is_status.cast("bigint")).alias(status))
        counted.append(F.sum((is_status & reported).cast("bigint")).alias(f"reported_{status}"))
    counted.append(F.sum((code == 0).cast("bigint")).alias("unknown_statuses"))
    return counted


def _second_entry(row: dict[str, Any]) -> dict[str, Any]:
    """A timeline entry as send_facts writes it: int counts, latency percentiles in ms."""
    entry: dict[str, Any] = {
        name: int(value) for name, value in row.items() if name not in LATENCY_PERCENTILES
    }
    entry.pop("second")
    for name in LATENCY_PERCENTILES:
        value = row[name]
        entry[name] = None if value is None else int(value) / 1000.0
    return entry


def _reordering(records: DataFrame) -> Reordering:
    """The order check of the whole read-back in Spark (classes.reordered over every record): a
    record with a key sequence is late when an earlier offset of its partition and key holds a
    higher one; the count, and the example rows of the lowest msg_ids (`example_order`)."""
    earlier = (
        Window.partitionBy("partition", "key")
        .orderBy("offset")
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    late = (
        records.filter(F.col("key_seq").isNotNull())
        .withColumn("max_key_seq_before", F.max("key_seq").over(earlier))
        .filter(F.col("key_seq") < F.col("max_key_seq_before"))
        .select(*_REORDERED_FIELDS)
    )
    # One job: the count beside each row, then only the lowest rows leave the JVM.
    counted = late.withColumn("late", F.count(F.lit(1)).over(Window.partitionBy()))
    lowest = counted.orderBy(F.col("msg_id").isNull(), "msg_id", "partition", "offset")
    rows = lowest.limit(MAX_EXAMPLES).collect()
    if not rows:
        return Reordering()
    return Reordering(int(rows[0]["late"]), [_reordered_row(row) for row in rows])


def _reordered_row(row: Row) -> ExampleRow:
    """A late record's example row, its fields in the order the whole-run check gives them."""
    return {name: row[name] for name in _REORDERED_FIELDS}


def _shard_task(
    run: RunInput, progress: Progress
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function of a task holding whole shards: their acked rows (with holders) and records
    in, their pickled ShardFacts and the worker's peak memory out."""

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        _reset_peak_memory()
        acked_parts, record_parts = [], []
        for batch in batches:  # each batch split as it arrives: the task keeps one copy
            side = batch.column(_SIDE)
            acked_parts.append(batch.filter(pc.equal(side, _ACKED)).select(list(_SHARD_ACKED)))
            record_parts.append(batch.filter(pc.equal(side, _RECORD)).select(_SHARD_RECORDS))
        if not acked_parts:  # a task without rows
            return
        acked = pa.Table.from_batches(acked_parts).combine_chunks()
        records = pa.Table.from_batches(record_parts).combine_chunks()
        del acked_parts, record_parts
        held = acked["held"].fill_null(False).to_numpy(zero_copy_only=False).astype(bool)
        held_by = acked["held_by"].fill_null(NO_ID).to_numpy(zero_copy_only=False)
        facts = check_shard(
            Acked.of(_with_nulls(acked, ACKED_COLUMNS)),
            Reads.of(_with_nulls(records, READBACK_COLUMNS)),
            Holders(held, held_by.astype(np.int64)),
            run,
            progress,
        )
        peak = _peak_memory_kb()
        yield pa.RecordBatch.from_pydict({"facts": [pickle.dumps(facts)], "peak_rss_kb": [peak]})

    return task


def _with_nulls(table: pa.Table, columns: Sequence[str]) -> pa.Table:
    """The table's `columns`, null (as strings) where the shards' frame did not carry one."""
    n = table.num_rows
    return pa.table(
        {c: table[c] if c in table.column_names else pa.nulls(n, pa.string()) for c in columns}
    )


_STATUS = Path("/proc/self/status")


def _reset_peak_memory() -> None:
    """Start this process's peak resident memory afresh (Linux: clear_refs 5), so a Python
    worker Spark forked or reused reports the task's own peak; nothing where unsupported."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def _peak_memory_kb() -> int:
    """This process's peak resident memory since the reset, kB (VmHWM), else ru_maxrss."""
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
