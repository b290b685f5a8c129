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

Then each shard's acked rows and records meet in one Python task (a cogroup), which runs the
whole-run message check on them (analysis.checks.messages.shard.check_shard) and returns its
facts; the driver merges a run's shards. A task's memory grows with `shard_rows`, not with the
run.
"""

from __future__ import annotations

import math
import pickle
import resource
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from analysis.checks.messages.columns import (
    ACKED_COLUMNS,
    CODE,
    NO_ID,
    READBACK_COLUMNS,
    Acked,
    Reads,
)
from analysis.checks.messages.facts import RunFacts, RunInput
from analysis.checks.messages.index import Holders, Progress
from analysis.checks.messages.shard import Reordering, SendFacts, ShardFacts, check_shard, merge
from analysis.checks.messages.timeline import LATENCY_PERCENTILES
from analysis.model.anomalies import STATUS_COUNTS, CountName
from harness.rundir import layout
from harness.rundir.records import NO_REPORT, STATUSES

# Acked rows per shard: a task holds about this many rows and their records, some hundreds of
# bytes each in numpy, so well under 2 GB; runs with fewer rows are checked whole.
SHARD_ROWS = 2_000_000

US_PER_S = 1_000_000
_ACKED_TYPES = {"partition": "bigint", "offset": "bigint", "msg_id": "bigint"}
_READ_TYPES = {"partition": "bigint", "offset": "bigint", "msg_id": "bigint", "key_seq": "bigint"}
_FACTS_SCHEMA = "run long, shard long, facts binary, peak_rss_kb long"


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
    records = _records_frame(spark, run_id, run)
    progress = _progress(acked, records, run.unlocated_acks)
    reordering = _reordering(records)
    held = records.select(
        "partition", "offset", F.col("msg_id").alias("held_by"), F.lit(True).alias("held")
    )
    acked_held = acked.join(held, ["partition", "offset"], "left").fillna({"held": False})
    task = _shard_task(run, progress)
    out = (
        acked_held.groupBy("run", "shard")
        .cogroup(records.groupBy("run", "shard"))
        .applyInArrow(task, schema=_FACTS_SCHEMA)
        .collect()
    )
    shards: list[ShardFacts] = [pickle.loads(row["facts"]) for row in out]
    peak = max((int(row["peak_rss_kb"]) for row in out), default=0)
    return ShardedAnswer(merge(send, shards, reordering), peak_rss_kb=peak)


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
    totals = rows.agg(F.count(F.lit(1)).alias(CountName.SENT), *tallies).first()
    timed = rows.filter(F.col("send_ts_us").isNotNull()).withColumn(
        "second", F.floor(F.col("send_ts_us") / F.lit(US_PER_S)).cast("bigint")
    )
    percentiles = [
        F.expr(f"percentile_disc({p}) WITHIN GROUP (ORDER BY latency_us)").alias(name)
        for name, p in LATENCY_PERCENTILES.items()
    ]
    seconds = timed.groupBy("second").agg(
        F.count(F.lit(1)).alias(CountName.SENT), *tallies, *percentiles
    )
    return SendFacts(
        seconds={int(r["second"]): _second_entry(r.asDict()) for r in seconds.collect()},
        counts={CountName.SENT: int(totals[CountName.SENT])}
        | {name: int(totals[status]) for status, name in STATUS_COUNTS.items()},
        contract={
            key: int(totals[key])
            for key in ("unknown_statuses", *(f"reported_{s}" for s in STATUSES))
        },
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


def _second_entry(row: dict) -> dict:
    """A timeline entry as send_facts writes it: int counts, latency percentiles in ms."""
    entry = {name: int(value) for name, value in row.items() if name not in LATENCY_PERCENTILES}
    entry.pop("second")
    for name in LATENCY_PERCENTILES:
        value = row[name]
        entry[name] = None if value is None else int(value) / 1000.0
    return entry


def _reordering(records: DataFrame) -> Reordering:
    """The order check of the whole read-back (classes.reordered): per partition and key, the
    records read after a higher key_seq, counted, with the lowest msg_ids' example rows."""
    earlier = (
        Window.partitionBy("partition", "key")
        .orderBy("offset")
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    late = (
        records.filter(F.col("key_seq").isNotNull())
        .withColumn("max_key_seq_before", F.max("key_seq").over(earlier))
        .filter(F.col("key_seq") < F.col("max_key_seq_before"))
    )
    count = late.count()
    first = late.orderBy(
        F.coalesce(F.col("msg_id"), F.lit(NO_ID)), F.col("partition"), F.col("offset")
    ).limit(20)
    fields = ("msg_id", "partition", "offset", "key", "key_seq", "max_key_seq_before")
    examples = [{f: _plain(row[f]) for f in fields} for row in first.collect()]
    return Reordering(count, examples)


def _plain(value: object) -> object:
    """A Spark row value as the whole-run check writes it (ints as int, None kept)."""
    return int(value) if isinstance(value, int) else value


def _shard_task(
    run: RunInput, progress: Progress
) -> Callable[[tuple, pa.Table, pa.Table], pa.Table]:
    """The cogroup's function: one shard's acked rows (with their holders) and records in,
    its pickled ShardFacts and the worker's peak memory out."""

    def task(key: tuple, acked: pa.Table, records: pa.Table) -> pa.Table:
        held = acked["held"].to_numpy(zero_copy_only=False).astype(bool)
        held_by = acked["held_by"].fill_null(NO_ID).to_numpy(zero_copy_only=False)
        facts = check_shard(
            Acked.of(acked.select(list(ACKED_COLUMNS))),
            Reads.of(records.select(list(READBACK_COLUMNS))),
            Holders(held, held_by.astype(np.int64)),
            run,
            progress,
        )
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return pa.table(
            {
                "run": [key[0].as_py()],
                "shard": [key[1].as_py()],
                "facts": [pickle.dumps(facts)],
                "peak_rss_kb": [peak],
            }
        )

    return task
