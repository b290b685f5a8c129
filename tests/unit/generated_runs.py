"""Generated run directories for the property tests: a ground truth, its files, and an oracle.

The strategy draws what happened to every send of a run (kept in the log, missing mid-log, in a
truncated tail, moved to a later offset, written twice, deleted below the log start, its offset
rewritten by another message, a whole partition or the whole topic gone, phantom and
unparseable records, failed and indeterminate sends in the log or not, a consumer that read a
record twice, a journal with or without offsets, a missing read-back) and writes the run
directory the harness would have written. `expected_counts` answers every count from the
ground truth with plain Python sets and dicts, from the definitions in README.md and
docs/kafka-reliability.md, never from the project's own functions.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import strategies as st

from harness.rundir import layout
from harness.rundir.records import ACKED_SCHEMA, READBACK_SCHEMA

T0_US = 1_700_000_000_000_000
PHANTOM_BASE = 1 << 40  # msg_ids of phantom records: never sent
OK, FAILED, INDETERMINATE = "ok", "failed", "indeterminate"
LIBRDKAFKA_NO_OFFSET = -1001  # what librdkafka reports under acks=0


@dataclass(frozen=True)
class Send:
    """One row of acked.parquet: a send and what the producer was told."""

    msg_id: int
    key: str
    key_seq: int
    status: str
    partition: int
    offset: int | None  # the acknowledged offset; None when the journal has none
    send_us: int


@dataclass(frozen=True)
class Record:
    """One record of the final log, as the read-back returns it."""

    msg_id: int | None  # None: a value the checker cannot parse
    key: str | None
    key_seq: int | None
    partition: int
    offset: int


@dataclass
class GeneratedRun:
    """The ground truth of one run."""

    sends: list[Send]
    log: list[Record]  # distinct (partition, offset) records of the final log
    reread: list[Record]  # records the consumer returned a second time
    log_start: dict[int, int]
    located: bool  # acks 1/all: every ok send carries its offset (acks=0: none does)
    complete: bool  # the read-back was taken (readback.parquet exists)
    acks: str = "all"
    order: list[int] = field(default_factory=list)  # the read-back's row order

    @property
    def readback(self) -> list[Record]:
        """The read-back's rows in the order the consumer wrote them."""
        rows = self.log + self.reread
        return [rows[i] for i in self.order] if self.order else rows


@st.composite
def _partition(
    draw: st.DrawFn, p: int, first_id: int, located: bool, healthy: bool
) -> tuple[list[Send], list[Record], int]:
    """The sends to partition p (msg_ids from first_id), its final log and its log-start;
    healthy: the log is the original one, plus unparseable records at most."""
    n = draw(st.integers(0, 12))
    statuses = draw(
        st.lists(st.sampled_from([OK, OK, OK, FAILED, INDETERMINATE]), min_size=n, max_size=n)
    )
    in_log = draw(st.lists(st.booleans(), min_size=n, max_size=n))  # failed/indeterminate only
    keys = draw(st.integers(1, 3))
    seqs: dict[str, int] = defaultdict(int)
    sends, original = [], []  # original: the log before any fault, one entry per offset
    for i, status in enumerate(statuses):
        msg_id, key = first_id + i, f"p{p}k{i % keys}"
        written = status == OK or in_log[i]
        offset = len(original) if written else None
        acked_offset = offset if (status == OK and located) else None
        sends.append(Send(msg_id, key, seqs[key], status, p, acked_offset, T0_US + msg_id * 1000))
        if written:
            original.append(Record(msg_id, key, seqs[key], p, offset))
        seqs[key] += 1
    size = len(original)
    if healthy:
        junk = draw(st.integers(0, 2))
        return sends, original + [Record(None, None, None, p, size + j) for j in range(junk)], 0
    log_start = draw(st.one_of(st.just(0), st.integers(0, size)))
    truncated_at = draw(st.one_of(st.just(size), st.integers(log_start, size)))
    holes = draw(st.sets(st.integers(log_start, max(log_start, truncated_at - 1)), max_size=3))
    kept = [r for r in original[log_start:truncated_at] if r.offset not in holes]
    # Appended after the truncation point: sends re-written (moved, or a second copy), and
    # records nobody sent.
    rewritten = draw(st.lists(st.sampled_from(original), max_size=4)) if original else []
    phantoms = draw(
        st.lists(
            st.one_of(
                st.just(Record(None, None, None, p, 0)),
                st.builds(
                    lambda i, s: Record(PHANTOM_BASE + i, f"p{p}k0", s, p, 0),
                    st.integers(0, 3),
                    st.integers(0, 20),
                ),
            ),
            max_size=2,
        )
    )
    tail = draw(st.permutations(rewritten + phantoms))
    log = kept + [
        Record(r.msg_id, r.key, r.key_seq, p, truncated_at + j) for j, r in enumerate(tail)
    ]
    return sends, log, log_start


@st.composite
def runs(
    draw: st.DrawFn,
    max_partitions: int = 8,
    acks: str | None = None,
    complete: bool | None = None,
    healthy: bool = False,
) -> GeneratedRun:
    """A whole generated run: 0 to max_partitions partitions (see the module docstring), with
    the producer's acks and whether the read-back was taken drawn unless given; healthy: no
    fault touched the logs (failed and indeterminate sends and unparseable records remain)."""
    acks = acks or draw(st.sampled_from(["all", "1", "0"]))
    located = acks != "0"
    partitions = draw(st.integers(0, max_partitions))
    sends, log, log_start = [], [], {}
    for p in range(partitions):
        first_id = 1000 * p + draw(st.integers(0, 5))
        p_sends, p_log, start = draw(_partition(p, first_id, located, healthy))
        sends += p_sends
        if healthy or draw(st.sampled_from([True] * 9 + [False])):  # one in ten lost entirely
            log += p_log
        log_start[p] = start
    if not healthy and draw(st.sampled_from([False] * 9 + [True])):  # the topic recreated
        log = []
    reread = draw(st.lists(st.sampled_from(log), max_size=3)) if log else []
    order = draw(st.permutations(range(len(log) + len(reread))))
    return GeneratedRun(
        sends=sends,
        log=log,
        reread=reread,
        log_start=log_start,
        located=located,
        complete=draw(st.sampled_from([True] * 9 + [False])) if complete is None else complete,
        acks=acks,
        order=list(order),
    )


# ---------------------------------------------------------------------------------------------
# The run directory


def write_run_dir(
    run: GeneratedRun,
    run_dir: Path,
    config: dict | None = None,
    cell: str = "cell",
    *,
    timed_out: bool = False,
) -> Path:
    """Write the run as the harness would: spec.json, events.jsonl, acked and readback Parquet;
    `timed_out`: the read-back stopped before the high watermarks (its event says so)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    spec = {
        "experiment": "generated",
        "cell": cell,
        "repetition": 0,
        "seed": 7,
        "axes": {},
        "config": (config or {}) | {"acks": run.acks},
    }
    (run_dir / layout.SPEC).write_text(json.dumps(spec))
    events = [
        {
            "type": "recorder_tally",
            "ts_us": T0_US,
            "reports": {
                status: sum(s.status == status for s in run.sends)
                for status in (OK, FAILED, INDETERMINATE)
            },
            "journal_error": None,
        }
    ]
    if run.complete:
        events.append(
            {
                "type": "readback",
                "ts_us": T0_US + 1,
                "complete": not timed_out,
                "records": len(run.readback),
                "high_watermarks": {str(p): 0 for p in run.log_start},
                "log_start_offsets": {str(p): o for p, o in run.log_start.items()},
            }
        )
    (run_dir / layout.EVENTS).write_text("".join(json.dumps(e) + "\n" for e in events))
    acked = [_acked_row(s, run.located) for s in run.sends]
    pq.write_table(pa.Table.from_pylist(acked, schema=ACKED_SCHEMA), run_dir / layout.ACKED)
    if run.complete:
        rows = [
            {"msg_id": r.msg_id, "key": r.key, "key_seq": r.key_seq, "partition": r.partition,
             "offset": r.offset, "ts_us": T0_US}
            for r in run.readback
        ]  # fmt: skip
        table = pa.Table.from_pylist(rows, schema=READBACK_SCHEMA)
        pq.write_table(table, run_dir / layout.READBACK)
    return run_dir


def _acked_row(send: Send, located: bool) -> dict:
    """The acked.parquet row of a send; under acks=0 librdkafka's 'no offset' marker."""
    offset = send.offset
    if send.status == OK and not located:
        offset = LIBRDKAFKA_NO_OFFSET
    return {
        "msg_id": send.msg_id,
        "key": send.key,
        "key_seq": send.key_seq,
        "status": send.status,
        "partition": send.partition if send.status == OK else None,
        "offset": offset,
        "error": None if send.status == OK else "Local: Message timed out",
        "send_ts_us": send.send_us,
        "ack_ts_us": send.send_us + 700 if send.status == OK else None,
    }


# ---------------------------------------------------------------------------------------------
# The oracle


def expected_counts(run: GeneratedRun) -> dict[str, int]:
    """Every count of the run from its ground truth, by the documented definitions."""
    counts = {
        "sent": len(run.sends),
        "acked": sum(s.status == OK for s in run.sends),
        "failed": sum(s.status == FAILED for s in run.sends),
        "indeterminate": sum(s.status == INDETERMINATE for s in run.sends),
    }
    if not run.complete:
        return counts
    # One record per (partition, offset): the consumer reading a record twice is one record.
    at = {(r.partition, r.offset): r for r in run.readback}
    reads: dict[int | None, set] = defaultdict(set)
    for slot, r in at.items():
        reads[r.msg_id].add(slot)
    sent_ids = {s.msg_id for s in run.sends}
    found = defaultdict(int)
    for s in run.sends:
        n = len(reads.get(s.msg_id, ()))
        if s.status != OK:
            found["failed_present" if s.status == FAILED else "indeterminate_present"] += n > 0
            found["duplicated_unacked"] += n > 1
            continue
        found["duplicated"] += n > 1
        located = s.offset is not None
        if located:
            holder = at.get((s.partition, s.offset))
            found["offset_divergent"] += holder is not None and holder.msg_id != s.msg_id
            found["moved"] += n > 0 and (holder is None or holder.msg_id != s.msg_id)
        if n:
            continue
        if located and s.offset < run.log_start.get(s.partition, 0):
            found["expired"] += 1
        elif _proven_missing(run, s, at):
            found["lost"] += 1
        else:
            found["unseen"] += 1
    found["phantom"] = sum(r.msg_id is None or r.msg_id not in sent_ids for r in at.values())
    found["misplaced"] = sum(_misplaced(r, run.sends) for r in at.values())
    found["reordered"] = _reordered(at)
    counts["read"] = len(at)
    return counts | dict(found)


def _misplaced(r: Record, sends: list[Send]) -> bool:
    """A record not where, or not what, its message's sends say: on none of their partitions,
    with another key of the harness's form, or another key sequence."""
    mine = [s for s in sends if s.msg_id == r.msg_id and r.msg_id is not None]
    partitions = {s.partition for s in mine if s.partition is not None}
    keys = {s.key for s in mine if s.key is not None}
    seqs = {s.key_seq for s in mine if s.key_seq is not None}
    ours = r.key is not None and re.fullmatch(r"(p[0-9]+-)?k[0-9]+", r.key) is not None
    return bool(
        (partitions and r.partition not in partitions)
        or (keys and ours and r.key not in keys)
        or (seqs and r.key_seq not in seqs)
    )


def _proven_missing(run: GeneratedRun, s: Send, at: dict[tuple[int, int], Record]) -> bool:
    """A missing send is proven lost when its partition was read at or past its acked offset;
    without an offset, when a later send (with no offset either) was read in its partition."""
    if s.offset is not None:
        return any(p == s.partition and o >= s.offset for p, o in at)
    later = {x.msg_id for x in run.sends if x.offset is None and x.send_us > s.send_us}
    return any(p == s.partition and r.msg_id in later for (p, _), r in at.items())


def _reordered(at: dict[tuple[int, int], Record]) -> int:
    """Records read after a higher key_seq of the same key in the same partition, each message
    by its first read (a later copy is a duplicate, not a late record)."""
    late, highest, seen = 0, {}, set()
    for (p, _), r in sorted(at.items()):
        if r.msg_id is not None:
            if r.msg_id in seen:
                continue
            seen.add(r.msg_id)
        if r.key_seq is None:
            continue
        before = highest.get((p, r.key))
        late += before is not None and r.key_seq < before
        highest[(p, r.key)] = max(r.key_seq, before if before is not None else r.key_seq)
    return late
