"""acked.parquet assembled from the producers' journals: read each journal (a torn last batch
left out), add the send times, merge the producers, write the table (also after a crash, by
`kafka-chaos report`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness.rundir import layout
from harness.rundir.records import (
    ACK_SCHEMA,
    ACKED_SCHEMA,
    CHECKPOINT_SCHEMA,
    NO_REPORT,
    PRODUCER_COLUMN,
    Status,
)
from harness.rundir.streams import read_stream
from harness.workload.journal import SOLE, ProducerSlot, key_of


def finalize(run_dir: Path) -> pa.Table:
    """Build acked.parquet from the journal, or from every producer's journal when the run had
    several (their union, by msg_id, with a `producer` column); see `journal_table`."""
    if (run_dir / layout.JOURNAL_META).exists() or not producer_slots(run_dir):
        table = journal_table(run_dir, SOLE)
    else:
        table = merge_producers(
            [(slot, journal_table(run_dir, slot)) for slot in producer_slots(run_dir)]
        )
    pq.write_table(table, run_dir / layout.ACKED)
    return table


def producer_slots(run_dir: Path) -> list[ProducerSlot]:
    """The producers whose journals a several-producer run directory holds, by index."""
    metas = (json.loads(path.read_text()) for path in run_dir.glob(layout.PRODUCER_JOURNAL_METAS))
    return sorted((ProducerSlot.from_meta(meta) for meta in metas), key=lambda s: s.index or 0)


def merge_producers(tables: Sequence[tuple[ProducerSlot, pa.Table]]) -> pa.Table:
    """The union of the producers' acked tables, ordered by msg_id, each row tagged with its
    producer (rows without a msg_id last, as in one producer's table)."""
    tagged = [
        table.append_column(
            PRODUCER_COLUMN, pa.repeat(pa.scalar(slot.index, pa.int32()), table.num_rows)
        )
        for slot, table in tables
    ]
    schema = ACKED_SCHEMA.append(pa.field(PRODUCER_COLUMN, pa.int32()))
    if not tagged:
        return schema.empty_table()
    return pa.concat_tables(tagged).sort_by("msg_id")  # nulls (orphan reports) last


def journal_table(run_dir: Path, slot: ProducerSlot) -> pa.Table:
    """One recorder's acked rows from its journal: one row per send, plus one per report whose
    value names no send (msg_id null, kept so no report is lost); sends with no report are
    indeterminate with error NO_REPORT."""
    files = slot.files
    keys = json.loads((run_dir / files.meta).read_text())["keys"]
    checkpoints = read_stream(run_dir / files.sends, CHECKPOINT_SCHEMA)
    acks = read_stream(run_dir / files.acks, ACK_SCHEMA)  # one delivery report per message
    base = slot.id_base
    sent = max(_max_or(checkpoints["sent_upto"], 0), _max_or(acks["msg_id"], base - 1) + 1 - base)
    local = np.arange(sent, dtype=np.int64)  # the producer's own count of its sends
    names = pa.array([key_of(i, slot.key_prefix) for i in range(keys)])
    sends = pa.table(
        {
            "msg_id": local + base,
            "key": names.take(pa.array(local % keys)),
            "key_seq": local // keys,
            "estimated_send_us": _interpolated_send_times(local, checkpoints),
        }
    )
    joined = sends.join(acks, keys="msg_id", join_type="left outer").sort_by("msg_id")
    no_report = pc.is_null(joined["status"])
    table = pa.table({
        "msg_id": joined["msg_id"], "key": joined["key"], "key_seq": joined["key_seq"],
        "status": pc.fill_null(joined["status"], Status.INDETERMINATE.value),
        "partition": joined["partition"], "offset": joined["offset"],
        "error": pc.if_else(no_report, pa.scalar(NO_REPORT), joined["error"]),
        "send_ts_us": _send_times(joined, joined["estimated_send_us"]),
        "ack_ts_us": joined["ack_ts_us"],
    }, schema=ACKED_SCHEMA)  # fmt: skip
    orphans = acks.filter(pc.is_null(acks["msg_id"]))
    if orphans.num_rows:
        table = pa.concat_tables([table, _orphan_rows(orphans)])
    return table


def _send_times(acks: pa.Table, estimated: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray:
    """Ack time minus librdkafka's latency; `estimated` where the latency is unknown."""
    return pc.if_else(
        pc.is_null(acks["latency_us"]),
        estimated,
        pc.subtract(acks["ack_ts_us"], acks["latency_us"]),
    )


def _orphan_rows(orphans: pa.Table) -> pa.Table:
    """acked.parquet rows for reports whose value names no send: what the report knows."""
    n = orphans.num_rows
    return pa.table({
        "msg_id": pa.nulls(n, pa.int64()), "key": pa.nulls(n, pa.string()),
        "key_seq": pa.nulls(n, pa.int64()), "status": orphans["status"],
        "partition": orphans["partition"], "offset": orphans["offset"],
        "error": orphans["error"], "send_ts_us": _send_times(orphans, pa.nulls(n, pa.int64())),
        "ack_ts_us": orphans["ack_ts_us"],
    }, schema=ACKED_SCHEMA)  # fmt: skip


def _max_or(column: pa.ChunkedArray, default: int) -> int:
    value = pc.max(column).as_py() if len(column) else None
    return default if value is None else value


def _interpolated_send_times(ids: np.ndarray, checkpoints: pa.Table) -> np.ndarray:
    """Send time estimates from the checkpoints (id count → time), for sends with no report."""
    if not len(ids):
        return np.array([], dtype=np.int64)
    upto = checkpoints["sent_upto"].to_numpy()
    ts = checkpoints["ts_us"].to_numpy()
    if not len(upto):
        return np.zeros(len(ids), dtype=np.int64)
    return np.interp(ids, upto, ts).astype(np.int64)
