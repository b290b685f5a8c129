"""acked.parquet assembled from the producers' journals (also after a crash, by `kafka-chaos
report`), in memory bounded by a range of msg_ids whatever the run's length.

Each journal's delivery reports are read batch by batch (a torn last batch left out) and
spilled to temporary streams, one per range of msg_ids; then the rows are built range by
range (the range's sends, their reports, the send times) and appended to the Parquet file.
Several producers follow one another: each one's ids lie in a range of their own, so the file
is in msg_id order. Reports whose value names no send come last, producer by producer.
The spill takes as much disk as the reports' journal, in a hidden folder of the run
directory that finalize removes (a killed finalize's, at its next start).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyarrow import ipc

from harness.rundir import layout
from harness.rundir.records import (
    ACK_SCHEMA,
    ACKED_SCHEMA,
    CHECKPOINT_SCHEMA,
    NO_REPORT,
    PRODUCER_COLUMN,
    Status,
)
from harness.rundir.streams import iter_stream, read_stream
from harness.workload.journal import SOLE, ProducerSlot, key_of

# msg_ids per step: the sends of a range and their reports are what finalize holds in memory
# (its peak RSS is about 200 MB above the interpreter's at 500,000 whatever the run's length:
# bench/recording_bench.py); a row group of acked.parquet per range.
CHUNK_IDS: Final = 500_000
# acked.parquet while it is written: renamed when whole, so a file by the final name is complete
# (`kafka-chaos report` finalizes again a run directory without one).
PARTIAL_ACKED: Final = ".acked.parquet.partial"
SCRATCH_PREFIX: Final = ".finalize-"  # the folder of the spilled reports
# The spill key of reports whose value names no send (ranges are numbered from 0).
ORPHANS: Final = -1


def finalize(run_dir: Path, chunk_ids: int = CHUNK_IDS) -> int:
    """Build acked.parquet from the journal, or from every producer's journal when the run had
    several (their union, by msg_id, with a `producer` column); the number of rows written.

    One row per send (a send with no report is indeterminate, error NO_REPORT), plus one per
    report whose value names no send (msg_id null, kept so no report is lost). At most
    `chunk_ids` msg_ids' rows are in memory at once. An exception leaves no acked.parquet."""
    if chunk_ids < 1:
        raise ValueError(f"chunk_ids must be at least 1 (got {chunk_ids})")
    slots, schema = journal_slots(run_dir)
    for leftover in run_dir.glob(f"{SCRATCH_PREFIX}*"):  # a finalize killed mid-way left it
        shutil.rmtree(leftover, ignore_errors=True)
    partial = run_dir / PARTIAL_ACKED
    try:
        with tempfile.TemporaryDirectory(prefix=SCRATCH_PREFIX, dir=run_dir) as scratch:
            rows = _write(run_dir, slots, schema, partial, Path(scratch), chunk_ids)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    partial.replace(run_dir / layout.ACKED)
    return rows


def journal_slots(run_dir: Path) -> tuple[list[ProducerSlot], pa.Schema]:
    """The recorders whose journals `run_dir` holds, and the schema of their acked.parquet:
    ACKED_SCHEMA for the sole recorder, with the `producer` column for several."""
    if (run_dir / layout.JOURNAL_META).exists() or not (slots := producer_slots(run_dir)):
        return [SOLE], ACKED_SCHEMA
    return slots, ACKED_SCHEMA.append(pa.field(PRODUCER_COLUMN, pa.int32()))


def producer_slots(run_dir: Path) -> list[ProducerSlot]:
    """The producers whose journals a several-producer run directory holds, by index."""
    metas = (json.loads(path.read_text()) for path in run_dir.glob(layout.PRODUCER_JOURNAL_METAS))
    return sorted((ProducerSlot.from_meta(meta) for meta in metas), key=lambda s: s.index or 0)


def _write(
    run_dir: Path,
    slots: list[ProducerSlot],
    schema: pa.Schema,
    partial: Path,
    scratch: Path,
    chunk_ids: int,
) -> int:
    """Write every slot's rows to `partial` (`scratch` holds the spilled reports): the sends
    of each slot in turn, then each slot's reports that name no send; the row count."""
    rows = 0
    journals = []
    with pq.ParquetWriter(str(partial), schema) as writer:
        for number, slot in enumerate(slots):
            journal = SpilledJournal.read(run_dir, slot, scratch / str(number), chunk_ids)
            journals.append(journal)
            for table in journal.send_rows():
                writer.write_table(_tagged(table, slot, schema))
                rows += table.num_rows
                del table  # not held while the next range is built
        for journal in journals:
            for table in journal.orphan_rows():
                writer.write_table(_tagged(table, journal.slot, schema))
                rows += table.num_rows
        if not rows:  # a file with the schema and no rows, as for a run that sent nothing
            writer.write_table(schema.empty_table())
    return rows


def _tagged(table: pa.Table, slot: ProducerSlot, schema: pa.Schema) -> pa.Table:
    """`table` with its producer's index as the `producer` column, when `schema` has one."""
    if PRODUCER_COLUMN not in schema.names:
        return table
    producer = pa.repeat(pa.scalar(slot.index, pa.int32()), table.num_rows)
    return table.append_column(schema.field(PRODUCER_COLUMN), producer)


@dataclass(frozen=True)
class SpilledJournal:
    """One recorder's journal, its reports spilled by range of ids: what its rows are built of.

    `sent` is the recorder's own count of its sends as the journal shows them (the highest
    checkpoint, or one past the highest id reported if higher); `upto` and `ts` are the
    checkpoints (sends counted → time), which estimate the time of a send without a latency.
    """

    slot: ProducerSlot
    names: pa.Array  # the recorder's keys, by key index
    upto: np.ndarray
    ts: np.ndarray
    sent: int
    spill: Spill
    chunk_ids: int

    @classmethod
    def read(
        cls, run_dir: Path, slot: ProducerSlot, folder: Path, chunk_ids: int
    ) -> SpilledJournal:
        """Read `slot`'s journal: its checkpoints whole (a few a second of the run), its
        reports batch by batch into spill files under `folder`, `chunk_ids` ids a file."""
        files = slot.files
        keys = json.loads((run_dir / files.meta).read_text())["keys"]
        checkpoints = read_stream(run_dir / files.sends, CHECKPOINT_SCHEMA)
        spill = Spill(folder)
        highest: int | None = None  # the highest id reported
        try:
            for batch in iter_stream(run_dir / files.acks, ACK_SCHEMA):
                found = _spill_batch(spill, batch, slot.id_base, chunk_ids)
                if found is not None:
                    highest = found if highest is None else max(highest, found)
        finally:
            spill.seal()
        reported = slot.id_base - 1 if highest is None else highest
        checkpointed = pc.max(checkpoints["sent_upto"]).as_py() if checkpoints.num_rows else None
        sent = max(0 if checkpointed is None else checkpointed, reported + 1 - slot.id_base)
        names = pa.array([key_of(i, slot.key_prefix) for i in range(keys)], pa.string())
        upto, ts = checkpoints["sent_upto"].to_numpy(), checkpoints["ts_us"].to_numpy()
        return cls(slot, names, upto, ts, sent, spill, chunk_ids)

    def send_rows(self) -> Iterator[pa.Table]:
        """The rows of every send, in msg_id order, `chunk_ids` sends at a time."""
        for start in range(0, self.sent, self.chunk_ids):
            local = np.arange(start, min(start + self.chunk_ids, self.sent), dtype=np.int64)
            reports = self.spill.take(start // self.chunk_ids)
            yield self._rows(local, pa.Table.from_batches(list(reports), schema=ACK_SCHEMA))

    def orphan_rows(self) -> Iterator[pa.Table]:
        """The rows of the reports that name no send, in journal order."""
        for reports in _regrouped(self.spill.take(ORPHANS), self.chunk_ids):
            yield _orphan_rows(reports)

    def _rows(self, local: np.ndarray, reports: pa.Table) -> pa.Table:
        """The rows of the consecutive sends `local` (own counts), given every report that
        names one of them: a row per report, in journal order, or for a send without any a
        row of status indeterminate and error NO_REPORT."""
        ids_named = reports["msg_id"].to_numpy().astype(np.int64, copy=False)
        where = ids_named - self.slot.id_base - local[0]
        counts = np.bincount(where, minlength=len(local))
        per_send = np.maximum(counts, 1)
        reported = np.repeat(counts > 0, per_send)
        picks = np.zeros(len(reported), dtype=np.int64)
        picks[reported] = np.argsort(where, kind="stable")  # by id, repeats in journal order
        joined = reports.take(pa.array(picks, mask=~reported))
        ids = np.repeat(local, per_send)
        no_report = pc.is_null(joined["status"])
        estimated = pa.array(_interpolated_send_times(ids, self.upto, self.ts))
        return pa.table({
            "msg_id": pa.array(ids + self.slot.id_base), "key": self._keys(ids),
            "key_seq": pa.array(ids // len(self.names)),
            "status": pc.fill_null(joined["status"], Status.INDETERMINATE.value),
            "partition": joined["partition"], "offset": joined["offset"],
            "error": pc.if_else(no_report, pa.scalar(NO_REPORT), joined["error"]),
            "send_ts_us": _send_times(joined, estimated), "ack_ts_us": joined["ack_ts_us"],
        }, schema=ACKED_SCHEMA)  # fmt: skip

    def _keys(self, ids: np.ndarray) -> pa.Array:
        """The key of each send: keys are assigned round-robin by own count."""
        return self.names.take(pa.array(ids % len(self.names)))


def _spill_batch(spill: Spill, batch: pa.RecordBatch, base: int, chunk_ids: int) -> int | None:
    """File a batch of reports under the range of its ids (`chunk_ids` ids a range, from
    `base`) or under ORPHANS when its value names no send; the highest id in it (None: none).

    Ids below `base` name no send of this recorder: like the join that matched reports to
    sends, they are left out."""
    named = pc.is_valid(batch["msg_id"])
    if not pc.all(named).as_py():
        spill.write(ORPHANS, batch.filter(pc.invert(named)))
        batch = batch.filter(named)
    if not batch.num_rows:
        return None
    local = batch["msg_id"].to_numpy() - base
    ranges = local // chunk_ids  # negative below `base`
    if (ranges == ranges[0]).all():  # the usual batch: recent sends, one range
        if ranges[0] >= 0:
            spill.write(int(ranges[0]), batch)
    else:
        order = np.argsort(ranges, kind="stable")  # journal order within each range
        for piece in np.split(order, np.flatnonzero(np.diff(ranges[order])) + 1):
            if ranges[piece[0]] >= 0:
                spill.write(int(ranges[piece[0]]), batch.take(pa.array(piece)))
    return int(local.max()) + base


def _regrouped(batches: Iterable[pa.RecordBatch], rows: int) -> Iterator[pa.Table]:
    """The batches in order, as tables of at least `rows` rows each but the last."""
    group: list[pa.RecordBatch] = []
    size = 0
    for batch in batches:
        group.append(batch)
        size += batch.num_rows
        if size >= rows:
            yield pa.Table.from_batches(group, schema=ACK_SCHEMA)
            group, size = [], 0
    if group:
        yield pa.Table.from_batches(group, schema=ACK_SCHEMA)


class Spill:
    """Batches of reports filed under integer keys in Arrow stream files under `folder`, read
    back key by key in the order written.

    At most MAX_OPEN files are open: writing to a key whose file was closed (the least
    recently written) opens another for it, and its batches then span several files.
    """

    MAX_OPEN: Final = 32

    def __init__(self, folder: Path):
        folder.mkdir()
        self.folder = folder
        self._files: dict[int, list[Path]] = {}
        self._open: OrderedDict[int, tuple[ipc.RecordBatchStreamWriter, pa.NativeFile]] = (
            OrderedDict()
        )

    def write(self, key: int, batch: pa.RecordBatch) -> None:
        """Append `batch` to `key`'s batches."""
        writer = self._open.pop(key, None) or self._new_file(key)
        self._open[key] = writer  # now the most recently written
        writer[0].write_batch(batch)
        if len(self._open) > self.MAX_OPEN:
            _close(self._open.popitem(last=False)[1])

    def _new_file(self, key: int) -> tuple[ipc.RecordBatchStreamWriter, pa.NativeFile]:
        files = self._files.setdefault(key, [])
        files.append(self.folder / f"{key}-{len(files)}.arrows")
        sink = pa.OSFile(str(files[-1]), "wb")
        return ipc.new_stream(sink, ACK_SCHEMA), sink

    def seal(self) -> None:
        """Close every file: what was written can be taken."""
        while self._open:
            _close(self._open.popitem()[1])

    def take(self, key: int) -> Iterator[pa.RecordBatch]:
        """Every batch filed under `key` (none if none was), in the order written; each file
        is deleted once read."""
        for path in self._files.pop(key, []):
            with pa.OSFile(str(path)) as source:
                yield from ipc.open_stream(source)
            path.unlink()


def _close(writer: tuple[ipc.RecordBatchStreamWriter, pa.NativeFile]) -> None:
    """End a spill file's stream and close the file."""
    writer[0].close()
    writer[1].close()


def _send_times(acks: pa.Table, estimated: pa.Array) -> pa.ChunkedArray:
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


def _interpolated_send_times(ids: np.ndarray, upto: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """Send time estimates from the checkpoints (sends counted `upto` → time `ts`), for sends
    without a latency: interpolated by own count, zero when there is no checkpoint."""
    if not len(ids):
        return np.array([], dtype=np.int64)
    if not len(upto):
        return np.zeros(len(ids), dtype=np.int64)
    return np.interp(ids, upto, ts).astype(np.int64)
