"""Large runs reconciled as Spark DataFrame operations: the message check of
analysis.checks.messages in the JVM, which spills to disk, so that no task holds a whole run and
no row crosses into Python.

A run with more than `chunk_rows` acked rows (analysis.spark.reconcile) is checked here; it gets
the RunFacts the one-process check (analysis.checks.messages.check_run) gives, field for field:

- the records are made distinct by (partition, offset), and each acked row is joined with the
  record at its acked slot (the holder);
- one group by msg_id over both sides is the message table: per message its acked rows, highest
  status, acked partition and offset, latest send, whether a record holds one of its slots and
  the lowest msg_id holding one, its reads and its first read (lowest slot);
- the anomaly classes are columns of that table (classes.RULES over its facts), counted in one
  pass, with the identity facts, and the sensitivity probe's tally;
- how far the read-back got per partition, the send timeline (percentile_disc is the same
  nearest-rank percentile), the order check (a window over each partition's records of one
  key in offset order), the example rows (a window over the anomalous messages by class), the
  counts per partition and per second of send, and the missing list are their own jobs, each
  collecting only small results.

Runs with transactions or a consumer group stay in the one-process check: those checks take
the run's message table as arrays.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import pyarrow.parquet as pq
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Row, SparkSession, Window
from pyspark.sql import functions as F

from analysis.checks.messages.classes import Fact, decide, loss_mask
from analysis.checks.messages.columns import CODE, NO_ID, NULL
from analysis.checks.messages.examples import MAX_EXAMPLES, MAX_MISSING
from analysis.checks.messages.facts import RunFacts, RunInput
from analysis.checks.messages.index import Progress
from analysis.checks.messages.probe import SENSITIVITY_ONE_IN, SENSITIVITY_SEED
from analysis.model.anomalies import (
    ANOMALY_NAMES,
    AT_ACKED_OFFSET,
    LOSS_CLASSES,
    AnomalyName,
    Check,
    CountName,
    classes_of,
)
from analysis.model.results import MISSING, ExampleRow, ExampleRows, Sensitivity
from analysis.spark import frames
from analysis.spark.frames import US_PER_S, Reordering, SendFacts
from harness.rundir import layout
from harness.rundir.records import Status

ROWS_PER_PARTITION = 1_000_000  # acked rows per shuffle partition (see _settings)
_UINT64 = 1 << 64


def check_in_spark(spark: SparkSession, run: RunInput) -> RunFacts:
    """The facts of one run (see the module docstring), in session settings sized for it."""
    with _session_settings(spark, _settings(spark, run)):
        return _check_one(spark, run)


def _settings(spark: SparkSession, run: RunInput) -> dict[str, str]:
    """The SQL settings a run is checked with: long arithmetic that wraps on overflow, as the
    probe's 64-bit hash needs (ANSI mode, Spark's default, raises instead); and about
    ROWS_PER_PARTITION acked rows per shuffle partition, at least two per core. Spark's default
    of 200 made a 1M-row run take 56 s instead of 18: a cached frame keeps every partition, and
    each costs its own task."""
    acked_rows = pq.ParquetFile(run.run_dir / layout.ACKED).metadata.num_rows
    cores = spark.sparkContext.defaultParallelism
    partitions = max(2 * cores, math.ceil(acked_rows / ROWS_PER_PARTITION))
    return {
        "spark.sql.ansi.enabled": "false",
        "spark.sql.shuffle.partitions": str(partitions),
        "spark.sql.join.preferSortMergeJoin": "false",
    }


@contextlib.contextmanager
def _session_settings(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """The session with `settings` for the duration; its own settings restored after."""
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, kept in before.items():
            if kept is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, kept)


def _check_one(spark: SparkSession, run: RunInput) -> RunFacts:
    """One run's facts."""
    acked = frames.acked_frame(spark, run)
    send = frames.send_facts(acked)
    if not run.complete:
        return RunFacts(send.seconds, send.counts, send.contract)
    # Made distinct once (a shuffle), then read by the progress, order and message jobs. Kept
    # on disk only: building a cached partition in memory ran a 1 GB driver out of heap at
    # 100M rows, where the disk copy sits in the page cache anyway.
    records = frames.records_frame(spark, run).persist(StorageLevel.DISK_ONLY)
    try:
        progress, read = frames.progress_of(acked, records, run.unlocated_acks)
        reordering = frames.reordering(records)
        contradicted = _contradictions(records)
        messages = _message_table(acked, records).persist(StorageLevel.DISK_ONLY)
        try:
            facts = _facts(messages, progress, run, send, reordering, read)
            facts.counts[AnomalyName.INCONSISTENT_OFFSETS] = contradicted[0]
            facts.examples[AnomalyName.INCONSISTENT_OFFSETS] = contradicted[1]
            return facts
        finally:
            messages.unpersist()
    finally:
        records.unpersist()


def _contradictions(records: DataFrame) -> tuple[int, list[ExampleRow]]:
    """The offsets holding more than one message (Reads.contradicted) and the first
    MAX_EXAMPLES of them in slot order, as Reads.contradiction_rows gives them."""
    ids = F.sort_array(F.collect_list(F.coalesce(F.col("msg_id"), F.lit(int(NO_ID)))))
    slots = (
        records.groupBy("partition", "offset")
        .agg(F.count(F.lit(1)).alias("reads"), ids.alias("ids"))
        .filter(F.col("reads") > 1)
    )
    counted = slots.withColumn("contradicted", F.count(F.lit(1)).over(Window.partitionBy()))
    rows = counted.orderBy("partition", "offset").limit(MAX_EXAMPLES).collect()
    if not rows:
        return 0, []
    return int(rows[0]["contradicted"]), [
        {
            "partition": int(row["partition"]),
            "offset": int(row["offset"]),
            "msg_id": None if row["ids"][0] == NO_ID else int(row["ids"][0]),
            "readback_msg_id_at_offset": None if row["ids"][1] == NO_ID else int(row["ids"][1]),
            "reads": int(row["reads"]),
        }
        for row in rows
    ]


def _message_table(acked: DataFrame, records: DataFrame) -> DataFrame:
    """One row per message key (msg_id, null for every row and record without one): the
    facts its classes are decided on (index.messages_of)."""
    located = (F.col("at_partition") != NULL) & (F.col("at_offset") != NULL)
    slot_keys = acked.withColumns(
        {
            "slot_partition": F.when(located, F.col("at_partition")),
            "slot_offset": F.when(located, F.col("at_offset")),
        }
    )
    # Per slot, its messages: an acked row is held by its own message where the read-back
    # holds it there, else by the lowest msg_id (index._holders).
    holders = records.groupBy(
        F.col("partition").alias("slot_partition"), F.col("offset").alias("slot_offset")
    ).agg(F.min("msg_id").alias("lowest"), F.collect_set("msg_id").alias("ids"))
    # An unlocated row has null slot keys: it never matches.
    held = (
        slot_keys.join(holders, ["slot_partition", "slot_offset"], "left")
        .withColumn("held", F.when(F.col("ids").isNotNull(), F.lit(1)))
        .withColumn(
            "held_by",
            F.when(F.array_contains("ids", F.col("msg_id")), F.col("msg_id")).otherwise(
                F.col("lowest")
            ),
        )
    )
    acked_side = held.select(
        "msg_id",
        F.lit(1).alias("acked"),
        F.lit(0).alias("read"),
        F.col("code"),
        F.when(F.col("at_partition") != NULL, F.col("at_partition")).alias("partition"),
        F.when(F.col("at_offset") != NULL, F.col("at_offset")).alias("offset"),
        F.col("send_ts_us").alias("send_ts"),
        F.coalesce(F.col("held"), F.lit(0)).alias("held"),
        F.col("held_by"),
        F.lit(None).cast("struct<partition:bigint,offset:bigint>").alias("first"),
    )
    records_side = records.select(
        "msg_id",
        F.lit(0).alias("acked"),
        F.lit(1).alias("read"),
        F.lit(None).cast("int").alias("code"),
        F.lit(None).cast("bigint").alias("partition"),
        F.lit(None).cast("bigint").alias("offset"),
        F.lit(None).cast("bigint").alias("send_ts"),
        F.lit(None).cast("int").alias("held"),
        F.lit(None).cast("bigint").alias("held_by"),
        F.struct("partition", "offset").alias("first"),
    )
    return (
        acked_side.unionByName(records_side)
        .groupBy("msg_id")
        .agg(
            F.sum("acked").alias("acked_rows"),
            F.sum("read").alias("reads"),
            F.coalesce(F.max("code"), F.lit(0)).alias("status"),
            F.coalesce(F.max("partition"), F.lit(NULL)).alias("partition"),
            F.coalesce(F.max("offset"), F.lit(NULL)).alias("offset"),
            F.max("send_ts").alias("send_ts"),
            (F.coalesce(F.max("held"), F.lit(0)) > 0).alias("slot_read"),
            F.min("held_by").alias("holder"),
            F.min("first").alias("first"),
        )
    )


def _per_partition(values: dict[int, int], default: int | None) -> Column:
    """values looked up by each message's acked partition, default where absent."""
    column = F.lit(default).cast("bigint")
    for partition, value in values.items():
        column = F.when(F.col("partition") == partition, F.lit(value)).otherwise(column)
    return column


def _facts_of(
    progress: Progress, log_start: dict[int, int], reads: Column | None = None
) -> dict[Fact, Column]:
    """Every Fact as a column of the message table (classes.facts_of's, in Spark); `reads`
    stands for the table's reads when given (the probe's, with its hidden records gone)."""
    status, offset = F.col("status"), F.col("offset")
    reads = F.col("reads") if reads is None else reads
    located = offset != NULL
    expired = located & (offset < _per_partition(log_start, 0))
    read_past = offset < _per_partition(progress.max_read_offset, NULL)
    later_read = F.coalesce(
        F.col("send_ts") < _per_partition(progress.max_read_send_ts, None), F.lit(False)
    )
    proven = F.when(located, F.col("slot_read") | read_past).otherwise(
        later_read & F.col("send_ts").isNotNull()
    )
    journalled = F.col("acked_rows") > 0
    return {
        Fact.JOURNALLED: journalled,
        Fact.OK: status == CODE[Status.OK],
        Fact.FAILED: status == CODE[Status.FAILED],
        Fact.INDETERMINATE: status == CODE[Status.INDETERMINATE],
        Fact.READ: reads > 0,
        Fact.READ_TWICE: reads > 1,
        Fact.EXPIRED: expired,
        Fact.PROVEN: proven,
        Fact.LOCATED: located & (F.col("partition") != NULL),
        Fact.SLOT_READ: F.col("slot_read"),
        Fact.ELSEWHERE: ~F.col("holder").eqNullSafe(F.col("msg_id")),
    }


def _facts(
    messages: DataFrame,
    progress: Progress,
    run: RunInput,
    send: SendFacts,
    reordering: Reordering,
    read: int,
) -> RunFacts:
    """A complete run's facts from its message table and the whole-run jobs' answers."""
    classes = decide(_facts_of(progress, run.log_start))
    loss = loss_mask(classes)
    table = messages.withColumns(
        {str(name): mask for name, mask in classes.items()} | {"loss": loss}
    )
    hidden = table.withColumn("hidden", _hidden(table))
    # The probe's loss: the loss classes' rules again, over the reads left once the hidden
    # records are gone (whichever of lost and unseen, a missing message is loss).
    left = F.col("reads") - F.col("hidden").cast("int")
    probe_classes = decide(_facts_of(progress, run.log_start, left), LOSS_CLASSES)
    probe = hidden.withColumn("probe_loss", loss_mask(probe_classes))
    counts, contract, sensitivity = _counted(probe)
    counts |= send.counts | {CountName.READ: read, AnomalyName.REORDERED: reordering.count}
    seconds = {second: dict(row) for second, row in send.seconds.items()}
    for second, row in _anomaly_seconds(table).items():
        if second in seconds:
            seconds[second].update(row)
    examples = _examples(table)
    examples[AnomalyName.REORDERED] = reordering.examples
    loss_by_partition, divergence_by_partition = _by_partition(table)
    return RunFacts(
        seconds=seconds,
        counts=counts,
        contract=send.contract | contract,
        loss_by_partition=loss_by_partition,
        divergence_by_partition=divergence_by_partition,
        examples=examples,
        missing=_missing(table),
        sensitivity=sensitivity,
    )


def _hidden(table: DataFrame) -> Column:
    """The messages whose one record the sensitivity probe hides: healthy (acknowledged, read
    exactly once, at the acked offset when there is one), each partition's last such record,
    and a hashed sample (probe._records_to_hide)."""
    healthy = (
        (F.col("status") == CODE[Status.OK])
        & (F.col("reads") == 1)
        & ((F.col("offset") == NULL) | F.col("holder").eqNullSafe(F.col("msg_id")))
    )
    read_partition, read_offset = F.col("first.partition"), F.col("first.offset")
    tails = table.filter(healthy).groupBy(read_partition).agg(F.max(read_offset)).collect()
    tail = F.lit(False)
    for partition, offset in tails:
        tail = tail | ((read_partition == partition) & (read_offset == offset))
    key = F.coalesce(F.col("msg_id"), F.lit(int(NO_ID)))
    sampled = _unsigned_mod(_splitmix64(key), SENSITIVITY_ONE_IN) == 0
    return healthy & (tail | sampled)


def _signed(value: int) -> int:
    """A 64-bit unsigned constant as the long with the same bits."""
    value %= _UINT64
    return value - _UINT64 if value >= 1 << 63 else value


def _splitmix64(value: Column) -> Column:
    """probe._seeded_hash in long arithmetic (wrapping; the bits are the unsigned hash's)."""
    x = value + F.lit(_signed(SENSITIVITY_SEED * 0x9E3779B97F4A7C15))
    x = (x.bitwiseXOR(F.shiftrightunsigned(x, 30))) * F.lit(_signed(0xBF58476D1CE4E5B9))
    x = (x.bitwiseXOR(F.shiftrightunsigned(x, 27))) * F.lit(_signed(0x94D049BB133111EB))
    return x.bitwiseXOR(F.shiftrightunsigned(x, 31))


def _unsigned_mod(value: Column, divisor: int) -> Column:
    """The long's bits read as an unsigned number, modulo divisor (< 2^31)."""
    half = F.shiftrightunsigned(value, 1)  # non-negative: plain % applies
    return ((half % divisor) * 2 + value.bitwiseAND(F.lit(1))) % divisor


def _counted(table: DataFrame) -> tuple[dict[str, int], dict[str, int], Sensitivity]:
    """In one pass: each class's count (phantom counts the records holding them), the identity
    facts, and the sensitivity probe's tally."""
    weights = {
        str(name): F.sum(
            F.when(F.col(str(name)), F.col("reads") if name == AnomalyName.PHANTOM else F.lit(1))
        )
        for name in classes_of(Check.MESSAGE)
    }
    identified = F.col("msg_id").isNotNull()
    probe_loss = F.col("probe_loss")
    row = table.agg(
        *(value.alias(name) for name, value in weights.items()),
        F.sum(F.when(identified & (F.col("acked_rows") > 1), 1)).alias("repeated"),
        F.sum(F.when(~identified, F.col("acked_rows"))).alias("unidentified"),
        F.sum(F.when(F.col("hidden"), 1)).alias("removed"),
        F.sum(F.when(F.col("hidden") & probe_loss, 1)).alias("found"),
        F.sum(F.when(probe_loss, 1)).alias("probe_loss"),
        F.sum(F.when(F.col("loss"), 1)).alias("loss"),
    ).first()
    assert row is not None, "an aggregation gives one row"
    counts = {name: int(row[name] or 0) for name in weights}
    contract = {
        "repeated_msg_ids": int(row["repeated"] or 0),
        "unidentified_rows": int(row["unidentified"] or 0),
    }
    removed, found = int(row["removed"] or 0), int(row["found"] or 0)
    extra = int(row["probe_loss"] or 0) - int(row["loss"] or 0) - found
    return counts, contract, Sensitivity.of(removed, found, clean=extra == 0)


def _second_of_send() -> Column:
    """The epoch second of each message's latest send (floor division, as numpy's)."""
    return F.floor(F.col("send_ts") / F.lit(US_PER_S)).cast("bigint")


def _anomaly_seconds(table: DataFrame) -> dict[int, dict[str, int]]:
    """Per epoch second of send: the acked messages sent then and later missing or duplicated,
    only the nonzero counts (timeline.anomaly_seconds)."""
    duplicated = str(AnomalyName.DUPLICATED)
    rows = (
        table.filter(F.col("send_ts").isNotNull() & (F.col("loss") | F.col(duplicated)))
        .groupBy(_second_of_send().alias("second"))
        .agg(
            F.sum(F.when(F.col("loss"), 1).otherwise(0)).alias(MISSING),
            F.sum(F.when(F.col(duplicated), 1).otherwise(0)).alias(duplicated),
        )
        .collect()
    )
    return {
        int(r["second"]): {name: int(r[name]) for name in (MISSING, duplicated) if r[name]}
        for r in rows
    }


def _by_partition(table: DataFrame) -> tuple[dict[str, int], dict[str, int]]:
    """How many lost and how many offset-divergent messages each acked partition holds
    ("unknown": none), partitions without any left out."""
    divergent = str(AnomalyName.OFFSET_DIVERGENT)
    rows = (
        table.filter(F.col("loss") | F.col(divergent))
        .groupBy("partition")
        .agg(
            F.sum(F.when(F.col("loss"), 1).otherwise(0)).alias("loss"),
            F.sum(F.when(F.col(divergent), 1).otherwise(0)).alias("divergent"),
        )
        .collect()
    )

    def counted(name: str) -> dict[str, int]:
        return {
            "unknown" if r["partition"] == NULL else str(r["partition"]): int(r[name])
            for r in sorted(rows, key=lambda r: r["partition"])
            if r[name]
        }

    return counted("loss"), counted("divergent")


def _by_msg_id() -> list[Column]:
    """Lowest msg_id first, the message without one last."""
    return [F.col("msg_id").asc_nulls_last()]


def _examples(table: DataFrame) -> ExampleRows:
    """Up to MAX_EXAMPLES rows per class, lowest msg_id first (none last): at the acked
    location or where first read, as the class says (examples.examples_of)."""
    names = classes_of(Check.MESSAGE)
    in_class = F.filter(
        F.array(*[F.when(F.col(str(n)), F.lit(str(n))) for n in names]), lambda x: x.isNotNull()
    )
    rank = Window.partitionBy("class").orderBy(*_by_msg_id())
    rows = (
        table.filter(F.size(in_class) > 0)
        .select("*", F.explode(in_class).alias("class"))
        .withColumn("rank", F.row_number().over(rank))
        .filter(F.col("rank") <= MAX_EXAMPLES)
        .collect()
    )
    examples: ExampleRows = {name: [] for name in ANOMALY_NAMES}
    for row in sorted(rows, key=lambda r: (r["class"], r["rank"])):
        examples[row["class"]].append(_example(row))
    return examples


def _example(row: Row) -> ExampleRow:
    """The example row of one message in one class."""
    if row["class"] in AT_ACKED_OFFSET:
        partition = None if row["partition"] == NULL else int(row["partition"])
        offset = None if row["offset"] == NULL else int(row["offset"])
    elif row["first"] is not None:
        partition, offset = int(row["first"]["partition"]), int(row["first"]["offset"])
    else:
        partition = offset = None
    return {
        "msg_id": row["msg_id"],
        "partition": partition,
        "offset": offset,
        "readback_msg_id_at_offset": row["holder"],
        "reads": int(row["reads"]),
    }


def _missing(table: DataFrame) -> list[tuple[int | None, int | None, int | None]]:
    """Up to MAX_MISSING missing acknowledged messages, lowest msg_id first: (msg_id, acked
    partition, acked offset), for the attribution."""
    rows = (
        table.filter(F.col("loss"))
        .select("msg_id", "partition", "offset")
        .orderBy(*_by_msg_id())
        .limit(MAX_MISSING)
        .collect()
    )
    return [
        (
            r["msg_id"],
            None if r["partition"] == NULL else int(r["partition"]),
            None if r["offset"] == NULL else int(r["offset"]),
        )
        for r in rows
    ]
