"""finalize in bounded memory (range by range of msg_ids) writes what a whole-journal reading
of the same journals says acked.parquet holds: the oracle here, one Python row at a time."""

from __future__ import annotations

import itertools
import json
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.rundir import layout
from harness.rundir.records import (
    ACK_SCHEMA,
    ACKED_SCHEMA,
    CHECKPOINT_SCHEMA,
    NO_REPORT,
    PRODUCER_COLUMN,
    STATUSES,
    Status,
)
from harness.rundir.streams import StreamWriter, read_stream
from harness.workload.finalize import PARTIAL_ACKED, SCRATCH_PREFIX, Spill, finalize
from harness.workload.journal import SOLE, ProducerSlot, key_of, write_meta
from tests.unit.finalized import finalized

STAMP_US = 1_700_000_000_000_000
ERRORS = ("_MSG_TIMED_OUT", "NOT_ENOUGH_REPLICAS", "MSG_SIZE_TOO_LARGE")


@dataclass(frozen=True)
class Journal:
    """One recorder's journal as the test writes it: checkpoints (sent_upto, ts_us), batches of
    reports (ACK_SCHEMA rows) in journal order, and bytes cut off the reports' stream."""

    slot: ProducerSlot
    keys: int
    checkpoints: list[tuple[int, int]]
    batches: list[list[dict[str, Any]]]
    torn: int  # bytes cut off the end of the reports' stream (a writer killed mid-batch)
    written: bool  # False: the meta file only (a producer that never journalled)


@st.composite
def reports(draw: st.DrawFn, base: int, sent: int) -> dict[str, Any]:
    """One delivery report: mostly of a send (some past the last checkpoint), some of a value
    that names no send (msg_id null) or names an id below this recorder's."""
    kind = draw(st.sampled_from(("send", "send", "send", "orphan", "foreign")))
    msg_id = {
        "send": base + draw(st.integers(0, sent + 2)),
        "orphan": None,
        "foreign": base - draw(st.integers(1, 3)),
    }[kind]
    status = draw(st.sampled_from(STATUSES))
    return {
        "msg_id": msg_id,
        "status": status,
        "partition": draw(st.none() | st.integers(0, 5)),
        "offset": draw(st.none() | st.integers(0, 10**6)),
        "error": None if status == Status.OK else draw(st.sampled_from(ERRORS)),
        "ack_ts_us": STAMP_US + draw(st.integers(0, 10**7)),
        "latency_us": draw(st.none() | st.integers(0, 10**5)),
    }


@st.composite
def journals(draw: st.DrawFn, slot: ProducerSlot) -> Journal:
    """A journal of `slot`: up to 40 sends, strictly increasing checkpoints, reports in
    batches (each send's report at most once, or with repeats when drawn so)."""
    sent = draw(st.integers(0, 40))
    uptos = sorted(draw(st.sets(st.integers(1, sent), max_size=5))) if sent else []
    stamps = sorted(draw(st.lists(st.integers(0, 10**7), min_size=len(uptos), max_size=len(uptos))))
    drawn = draw(st.lists(reports(slot.id_base, sent), max_size=50))
    if not draw(st.booleans()):
        drawn = first_reports(drawn)
    cuts = sorted(draw(st.lists(st.integers(0, len(drawn)), max_size=6)))
    bounds = [0, *cuts, len(drawn)]
    batches = [drawn[a:b] for a, b in itertools.pairwise(bounds)]
    return Journal(
        slot,
        keys=draw(st.integers(1, 5)),
        checkpoints=[(upto, STAMP_US + stamp) for upto, stamp in zip(uptos, stamps, strict=True)],
        batches=batches,
        torn=draw(st.just(0) | st.integers(1, 80)),
        written=draw(st.sampled_from((True, True, True, False))),
    )


def first_reports(drawn: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The reports without repeats: one per send, as librdkafka gives."""
    seen: set[int] = set()
    kept = []
    for report in drawn:
        if report["msg_id"] is None or report["msg_id"] not in seen:
            kept.append(report)
            seen.add(report["msg_id"])
    return kept


@st.composite
def runs(draw: st.DrawFn) -> list[Journal]:
    """The journals of a run: the sole recorder's, or those of one to three producers."""
    if draw(st.booleans()):
        return [draw(journals(SOLE))]
    indices = draw(st.lists(st.integers(0, 3), min_size=1, max_size=3, unique=True))
    return [draw(journals(ProducerSlot(index))) for index in sorted(indices)]


def write_run(run_dir: Path, run: list[Journal]) -> None:
    """Write the journals as the recorders do: a meta file, then the two Arrow streams."""
    for journal in run:
        write_meta(run_dir, journal.slot, journal.keys)
        if not journal.written:
            continue
        files = journal.slot.files
        sends = StreamWriter(run_dir / files.sends, CHECKPOINT_SCHEMA)
        for upto, ts in journal.checkpoints:
            checkpoint = {"sent_upto": upto, "ts_us": ts}
            sends.write(pa.RecordBatch.from_pylist([checkpoint], schema=CHECKPOINT_SCHEMA))
        sends.close()
        acks = StreamWriter(run_dir / files.acks, ACK_SCHEMA)
        for batch in journal.batches:
            acks.write(pa.RecordBatch.from_pylist(batch, schema=ACK_SCHEMA))
        acks.close()
        data = (run_dir / files.acks).read_bytes()
        (run_dir / files.acks).write_bytes(data[: max(0, len(data) - journal.torn)])


# --- The oracle: the whole journal in memory, row by row -------------------------------------


def oracle(run_dir: Path) -> pa.Table:
    """acked.parquet as the journal defines it: per recorder, one row per send (own counts
    0 .. sent-1) with each of its reports in journal order, or one NO_REPORT row; several
    recorders' rows sorted by msg_id with a producer column; rows of reports that name no
    send last, recorder by recorder."""
    metas = [json.loads(p.read_text()) for p in run_dir.glob(layout.PRODUCER_JOURNAL_METAS)]
    several = not (run_dir / layout.JOURNAL_META).exists() and bool(metas)
    slots = [ProducerSlot(meta["producer"]) for meta in metas] if several else [SOLE]
    rows, orphans = [], []
    for slot in sorted(slots, key=lambda s: s.index or 0):
        sends, strays = oracle_rows(run_dir, slot)
        tag = {PRODUCER_COLUMN: slot.index} if several else {}
        rows += [row | tag for row in sends]
        orphans += [row | tag for row in strays]
    rows.sort(key=lambda row: row["msg_id"])  # stable: one recorder's repeats keep their order
    schema = ACKED_SCHEMA.append(pa.field(PRODUCER_COLUMN, pa.int32())) if several else ACKED_SCHEMA
    return pa.Table.from_pylist(rows + orphans, schema=schema)


def oracle_rows(run_dir: Path, slot: ProducerSlot) -> tuple[list[dict], list[dict]]:
    """(rows of the sends, rows of the reports naming no send) of one recorder's journal."""
    files = slot.files
    keys = json.loads((run_dir / files.meta).read_text())["keys"]
    checkpoints = read_stream(run_dir / files.sends, CHECKPOINT_SCHEMA).to_pylist()
    acks = read_stream(run_dir / files.acks, ACK_SCHEMA).to_pylist()
    base = slot.id_base
    named = [a for a in acks if a["msg_id"] is not None]
    sent = max(
        max((c["sent_upto"] for c in checkpoints), default=0),
        max((a["msg_id"] for a in named), default=base - 1) + 1 - base,
    )
    by_id = defaultdict(list)
    for ack in named:
        by_id[ack["msg_id"]].append(ack)
    upto = np.array([c["sent_upto"] for c in checkpoints], dtype=np.int64)
    ts = np.array([c["ts_us"] for c in checkpoints], dtype=np.int64)
    rows = []
    for local in range(sent):
        estimated = int(np.interp(local, upto, ts)) if len(upto) else 0
        send = {"msg_id": base + local, "key": key_of(local % keys, slot.key_prefix)}
        send["key_seq"] = local // keys
        for ack in by_id[base + local] or [None]:
            rows.append(send | report_fields(ack, estimated))
    nothing = {"msg_id": None, "key": None, "key_seq": None}
    strays = [nothing | report_fields(a, None) for a in acks if a["msg_id"] is None]
    return rows, strays


def report_fields(ack: dict | None, estimated: int | None) -> dict[str, Any]:
    """What a report gives a row; a send without one is indeterminate, NO_REPORT."""
    if ack is None:
        ack = dict.fromkeys(("status", "partition", "offset", "error", "ack_ts_us", "latency_us"))
    latency = ack["latency_us"]
    return {
        "status": ack["status"] or Status.INDETERMINATE.value,
        "partition": ack["partition"],
        "offset": ack["offset"],
        "error": NO_REPORT if ack["status"] is None else ack["error"],
        "send_ts_us": estimated if latency is None else ack["ack_ts_us"] - latency,
        "ack_ts_us": ack["ack_ts_us"],
    }


# --- Properties and cases --------------------------------------------------------------------


@pytest.mark.property
@given(run=runs(), chunk_ids=st.integers(1, 8), max_open=st.sampled_from((1, 2, 32)))
def test_finalize_range_by_range_writes_what_the_whole_journal_says(
    run: list[Journal], chunk_ids: int, max_open: int
) -> None:
    """Whatever the ranges (a few ids each, so many) and however few spill files may stay
    open: acked.parquet has the oracle's rows, in its order, with its schema; nothing of the
    work is left in the run directory."""
    with tempfile.TemporaryDirectory() as folder:
        run_dir = Path(folder)
        write_run(run_dir, run)
        journal_files = set(run_dir.iterdir())
        with mock.patch.object(Spill, "MAX_OPEN", max_open):
            table = finalized(run_dir, chunk_ids)
        expected = oracle(run_dir)
        assert table.schema.equals(expected.schema)
        assert table.to_pylist() == expected.to_pylist()
        assert set(run_dir.iterdir()) == journal_files | {run_dir / layout.ACKED}


def test_each_range_of_ids_is_its_own_row_group(tmp_path: Path) -> None:
    write_run(tmp_path, [Journal(SOLE, 2, [(10, STAMP_US)], [], torn=0, written=True)])
    assert finalize(tmp_path, chunk_ids=3) == 10
    metadata = pq.ParquetFile(tmp_path / layout.ACKED).metadata
    assert [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)] == [3, 3, 3, 1]


def test_a_run_that_sent_nothing_has_the_schema_and_no_rows(tmp_path: Path) -> None:
    write_meta(tmp_path, SOLE, 4)  # the recorder died before its first flush
    assert finalize(tmp_path) == 0
    table = pq.read_table(tmp_path / layout.ACKED)
    assert table.num_rows == 0 and table.schema.equals(ACKED_SCHEMA)


def test_a_failure_midway_leaves_no_acked_parquet(tmp_path: Path) -> None:
    """Producer 0's rows are written when producer 1's meta turns out unreadable: no
    acked.parquet (`kafka-chaos report` then finalizes again), nothing half-written."""
    write_run(tmp_path, [Journal(ProducerSlot(0), 2, [(5, STAMP_US)], [], 0, True)])
    (tmp_path / ProducerSlot(1).files.meta).write_text(json.dumps({"producer": 1}))
    with pytest.raises(KeyError, match="keys"):
        finalize(tmp_path, chunk_ids=2)
    assert not (tmp_path / layout.ACKED).exists()
    assert not (tmp_path / PARTIAL_ACKED).exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_what_a_killed_finalize_left_is_cleared(tmp_path: Path) -> None:
    write_run(tmp_path, [Journal(SOLE, 2, [(4, STAMP_US)], [], torn=0, written=True)])
    leftover = tmp_path / f"{SCRATCH_PREFIX}dead" / "0"
    leftover.mkdir(parents=True)
    (leftover / "0-0.arrows").write_bytes(b"spilled")
    (tmp_path / PARTIAL_ACKED).write_bytes(b"PAR1 half")
    assert finalize(tmp_path) == 4
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_spilled_batches_come_back_by_key_in_the_order_written(tmp_path: Path) -> None:
    """With one file open at a time, every switch of key starts a file: each key's batches
    still come back in order, and each file is gone once read."""

    def batch(msg_id: int) -> pa.RecordBatch:
        return pa.RecordBatch.from_pylist([{"msg_id": msg_id}], schema=ACK_SCHEMA)

    with mock.patch.object(Spill, "MAX_OPEN", 1):
        spill = Spill(tmp_path / "spill")
        for msg_id in (1, 10, 2, 20, 3, 11):
            spill.write(msg_id // 10, batch(msg_id))
        spill.seal()
    taken = {key: [b["msg_id"][0].as_py() for b in spill.take(key)] for key in (0, 1, 2, 7)}
    assert taken == {0: [1, 2, 3], 1: [10, 11], 2: [20], 7: []}
    assert list((tmp_path / "spill").iterdir()) == []
