"""A run's files as Spark frames, and the facts over its whole set of rows rather than per
message: the send timeline, how far the read-back got per partition, and the order check. The
DataFrame message check (analysis.spark.messages) builds on them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, Row, SparkSession, Window
from pyspark.sql import functions as F

from analysis.checks.messages.columns import ACKED_COLUMNS, CODE, NULL, READBACK_COLUMNS
from analysis.checks.messages.examples import MAX_EXAMPLES
from analysis.checks.messages.facts import RunInput
from analysis.checks.messages.index import Progress
from analysis.checks.messages.timeline import LATENCY_PERCENTILES
from analysis.model.anomalies import EXAMPLE_FIELDS, STATUS_COUNTS, AnomalyName, CountName
from analysis.model.results import ExampleRow
from harness.rundir import layout
from harness.rundir.records import NO_REPORT, STATUSES

US_PER_S = 1_000_000
_ACKED_TYPES = {"partition": "bigint", "offset": "bigint", "msg_id": "bigint"}
_READ_TYPES = {"partition": "bigint", "offset": "bigint", "msg_id": "bigint", "key_seq": "bigint"}
_CONTRACT_KEYS = ("unknown_statuses", *(f"reported_{s}" for s in STATUSES))
# A late record's example row: the fields the whole-run check gives, key last as it does.
_REORDERED_FIELDS = (
    *(f for f in EXAMPLE_FIELDS[AnomalyName.REORDERED] if f != "key"),
    "key",
)


@dataclass(frozen=True)
class SendFacts:
    """What the whole run's sends say: the timeline seconds, the send counts and the status
    contract (timeline.send_facts of a whole run)."""

    seconds: dict[int, dict[str, Any]]
    counts: dict[str, int]
    contract: dict[str, int]


@dataclass(frozen=True)
class Reordering:
    """The order check over the read-back: how many records came late, and the example rows
    of the lowest msg_ids."""

    count: int = 0
    examples: list[ExampleRow] = field(default_factory=list)


def acked_frame(spark: SparkSession, run: RunInput) -> DataFrame:
    """acked.parquet's checked columns, typed, with each row's status code and its acked
    partition and offset as located (NULL where unknown or negative, as librdkafka reports
    under acks=0)."""
    frame = spark.read.parquet(str(run.run_dir / layout.ACKED))
    typed = _typed(frame, ACKED_COLUMNS, _ACKED_TYPES)
    return typed.withColumns(
        {
            "code": _status_code(),
            "at_partition": _located("partition"),
            "at_offset": _located("offset"),
        }
    )


def _located(name: str) -> Column:
    """A partition or offset column with unknown ones as NULL."""
    column = F.col(name)
    return F.when(column.isNotNull() & (column >= 0), column).otherwise(F.lit(NULL))


def records_frame(spark: SparkSession, run: RunInput) -> DataFrame:
    """readback.parquet's distinct records (Reads.of): one per partition, offset (NULL where
    unknown) and msg_id, the lowest (key_seq, key) of its rows, nulls first."""
    frame = spark.read.parquet(str(run.run_dir / layout.READBACK))
    typed = _typed(frame, READBACK_COLUMNS, _READ_TYPES).withColumns(
        {name: F.coalesce(F.col(name), F.lit(NULL)) for name in ("partition", "offset")}
    )
    lowest = F.min(F.struct("key_seq", "key")).alias("lowest")
    kept = typed.groupBy("partition", "offset", "msg_id").agg(lowest)
    return kept.select(
        *[F.col(f"lowest.{c}") if c in ("key", "key_seq") else c for c in READBACK_COLUMNS]
    )


def _typed(frame: DataFrame, columns: Sequence[str], types: dict[str, str]) -> DataFrame:
    """The columns, cast where `types` names one (narrower integer files read the same)."""
    return frame.select(*[F.col(c).cast(types[c]) if c in types else F.col(c) for c in columns])


def progress_of(acked: DataFrame, records: DataFrame, unlocated: bool) -> tuple[Progress, int]:
    """How far the whole read-back got per partition (Progress.of over a whole run): the
    highest offset read, and under acks that allow an ok without an offset, the latest send of
    such a row whose message was read there; and how many distinct records it holds."""
    highest = records.groupBy("partition").agg(F.max("offset"), F.count(F.lit(1))).collect()
    later: dict[int, int] = {}
    if unlocated:
        rows = acked.filter(
            (F.col("at_offset") == NULL)
            & F.col("send_ts_us").isNotNull()
            & F.col("msg_id").isNotNull()
        ).select("msg_id", "send_ts_us")
        read_where = records.filter(F.col("msg_id").isNotNull()).select("msg_id", "partition")
        latest = rows.join(read_where, "msg_id").groupBy("partition").agg(F.max("send_ts_us"))
        later = {int(r[0]): int(r[1]) for r in latest.collect()}
    progress = Progress({int(r[0]): int(r[1]) for r in highest}, later)
    return progress, sum(int(r[2]) for r in highest)


def _status_code() -> Column:
    """CODE of each row's status, 0 for a value that is no status."""
    code = F.lit(0)
    for status in reversed(STATUSES):
        code = F.when(F.col("status") == status, F.lit(CODE[status])).otherwise(code)
    return code


def send_facts(acked: DataFrame) -> SendFacts:
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


def reordering(records: DataFrame) -> Reordering:
    """The order check of the whole read-back in Spark (classes.reordered over every record): a
    message's first read (its lowest partition and offset; every record not the producer's) with
    a key sequence is late when an earlier offset of its partition and key holds a higher one;
    the count, and the example rows of the lowest msg_ids (`example_order`)."""
    copies = Window.partitionBy("msg_id").orderBy("partition", "offset")
    firsts = records.withColumn("copy", F.row_number().over(copies)).filter(
        F.col("msg_id").isNull() | (F.col("copy") == 1)
    )
    earlier = (
        Window.partitionBy("partition", "key")
        .orderBy("offset", F.col("msg_id").asc_nulls_last())
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    late = (
        firsts.filter(F.col("key_seq").isNotNull())
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
