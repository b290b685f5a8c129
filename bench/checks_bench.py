"""Time the checker's per-run checks on generated histories and print transactions and records
per second for each, with the anomalies each found beside those planted.

    .venv/bin/python bench/checks_bench.py [--sizes 1000000] [--message-scale 10]

For each size N the history is N transactions of RECORDS messages each, written by one
transactional producer over PARTITIONS partitions (transaction t's message j goes to partition
(t + j) % PARTITIONS), in memory as numpy arrays: every transaction reads one message of the
transaction READ_BACK before it (consume-transform-produce), and three consumer members each
process the read-back of two partitions. One transaction in PLANT_EVERY is planted with one
anomaly, by its residue (PLANTS): aborted, unknown, aborted and read, committed and lost whole
or in part, a late write (G0), a read of a later transaction's write (G1c), a member that skips
or re-reads a transaction's records, and a skip across a rebalance that must not count.
Timed, each through its adapter below (the one place a signature change is edited):

- cycles: analysis.checks.cycles over the read-back's records and the transactions' reads;
- polls: analysis.checks.polls over the members' journals and the read-back's offsets;
- transactions: analysis.checks.transactions over every message (read or not), with its probe;
- messages: analysis.checks.messages.check_run on a run directory of N x --message-scale
  acked and read-back rows in a temporary folder (reconcile_bench.py's generator, about 0.1 %
  of messages in each class), removed after.

Each check runs once after an untimed warm-up on a small history. The machine is shared, so
each line carries a ratio to a baseline timed in the same run: for the three transactional
checks a numpy lexsort of the read-back's records by (partition, offset), the least work any
of them does; for the message check reconcile_bench.py's pyarrow reference of its three core
counts. A `found` that differs from `planted` is printed as MISMATCH and the exit code is 1.
Target: the cycle check at least 200k transactions/s at 1M transactions on 2 cores (Elle is
quoted at 100-160k transactions/s; not measured here).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from analysis.checks import transactions
from analysis.checks.cycles import cycle_facts
from analysis.checks.messages import RunInput, check_run
from analysis.checks.polls import FinalLog, MemberStart, poll_facts
from analysis.checks.transactions import ABORTED, COMMITTED, UNKNOWN, MessageView, Transactions
from analysis.model.anomalies import AnomalyName
from analysis.model.cycles import TxnReads

PARTITIONS = 6
RECORDS = 5  # messages a transaction holds
MEMBERS = 3  # consumer members, each holding PARTITIONS // MEMBERS partitions
READ_BACK = 10  # transaction t reads a message of transaction t - READ_BACK
PLANT_EVERY = 1000
T0_US = 1_700_000_000_000_000
TARGET_TXNS, TARGET_RATE = 1_000_000, 200_000
WARMUP_TXNS = 5_000


@dataclass(frozen=True)
class Plants:
    """The residues modulo PLANT_EVERY of the transactions planted with each anomaly."""

    aborted: int = 1
    aborted_read: int = 2  # aborted, its first message in the read-back
    unknown: int = 3
    lost: int = 4  # committed, no message in the read-back
    torn: int = 5  # committed, its first message missing from the read-back
    late_write: int = 500  # its record and the next transaction's swapped in one partition
    future_read: int = 700  # reads a message of the next transaction
    poll_skip: int = 300  # the members skip its records
    poll_repeat: int = 320  # the members process its records twice in a row
    rebalanced_skip: int = 340  # skipped, with an assignment change stamped at the next record


PLANTS = Plants()


@dataclass(frozen=True)
class History:
    """One generated transactional run: its transactions, every message (msg_id = index), the
    read_committed read-back, the transactions' reads and the members' journals."""

    n: int
    txns: Transactions
    partition: np.ndarray  # of each message
    offset: np.ndarray
    read: np.ndarray  # whether the read-back holds the message
    in_log: np.ndarray  # whether the log holds it (what read_uncommitted would return)
    readback: tuple[np.ndarray, np.ndarray, np.ndarray]  # msg_id, partition, offset
    reads: TxnReads
    members: list[MemberStart]

    @property
    def records(self) -> int:
        """Messages of the history."""
        return self.n * RECORDS


def residue(t: np.ndarray, name: str) -> np.ndarray:
    """Transactions planted with anomaly `name`."""
    planted: bool | np.ndarray = t % PLANT_EVERY == getattr(PLANTS, name)
    return np.asarray(planted)


def history(n: int) -> History:
    """The history of n transactions described in the module docstring."""
    t = np.arange(n, dtype=np.int64)
    outcome = np.full(n, COMMITTED, dtype=np.int8)
    outcome[residue(t, "aborted") | residue(t, "aborted_read")] = ABORTED
    outcome[residue(t, "unknown")] = UNKNOWN
    txns = Transactions(
        txn=t,
        first=t * RECORDS,
        size=np.full(n, RECORDS, dtype=np.int64),
        outcome=outcome,
        uncommitted=outcome == ABORTED,
        began=T0_US + t * 1000,
        ended=T0_US + t * 1000 + 900,
        errors=(None,) * n,
    )
    msg_id = np.arange(n * RECORDS, dtype=np.int64)
    owner, j = msg_id // RECORDS, msg_id % RECORDS
    partition = ((owner + j) % PARTITIONS).astype(np.int64)
    order = np.lexsort((owner, partition))
    rank = np.empty_like(msg_id)
    starts = np.searchsorted(partition[order], np.arange(PARTITIONS))
    rank[order] = np.arange(len(order)) - starts[partition[order]]
    offset = 2 * rank  # each record followed by its transaction's marker
    _late_writes(owner, j, offset)
    first = j == 0
    gone = residue(owner, "lost") | (residue(owner, "torn") & first)
    in_log = ~gone
    read = in_log & ((outcome[owner] != ABORTED) | (residue(owner, "aborted_read") & first))
    ids = msg_id[read]
    readback = (ids, partition[read], offset[read])
    return History(
        n, txns, partition, offset, read, in_log, readback, _reads(t), _members(readback)
    )


def _late_writes(owner: np.ndarray, j: np.ndarray, offset: np.ndarray) -> None:
    """Swap, in partition (t + 1) % PARTITIONS, the records of each late_write transaction t
    and of t + 1 (t's message 1 and t + 1's message 0 share it)."""
    t = np.flatnonzero(residue(np.arange(owner[-1] + 1), "late_write"))
    t = t[t + 1 <= owner[-1]]
    mine, next_one = t * RECORDS + 1, (t + 1) * RECORDS
    assert (j[mine] == 1).all() and (j[next_one] == 0).all()
    offset[mine], offset[next_one] = offset[next_one].copy(), offset[mine].copy()


def _reads(t: np.ndarray) -> TxnReads:
    """Transaction t reads message j = t % RECORDS of t - READ_BACK; a future_read transaction
    also reads the first message of t + 1."""
    reader = t[t >= READ_BACK]
    source = (reader - READ_BACK) * RECORDS + reader % RECORDS
    future = t[residue(t, "future_read") & (t + 1 < len(t))]
    txn = np.concatenate([reader, future])
    msg_id = np.concatenate([source, (future + 1) * RECORDS])
    return TxnReads(txn=txn, msg_id=msg_id)


def _members(readback: tuple[np.ndarray, np.ndarray, np.ndarray]) -> list[MemberStart]:
    """Each member processes its partitions' read-back records in offset order (interleaved
    across its partitions), 10 µs apart, but for the poll plants."""
    ids, partition, offset = readback
    owner = ids // RECORDS
    starts = []
    for member in range(MEMBERS):
        mine = np.flatnonzero(partition // (PARTITIONS // MEMBERS) == member)
        mine = mine[~residue(owner[mine], "poll_skip")]
        dropped = mine[residue(owner[mine], "rebalanced_skip")]
        mine = mine[~residue(owner[mine], "rebalanced_skip")]
        again = mine[residue(owner[mine], "poll_repeat")]  # processed twice in a row
        journal = np.concatenate([mine, again])
        copy = np.concatenate([np.zeros(len(mine)), np.ones(len(again))])
        journal = journal[np.lexsort((copy, partition[journal], offset[journal]))]
        ts = T0_US + np.arange(len(journal), dtype=np.int64) * 10
        breaks = {
            p: _rebalances(
                offset[journal],
                ts,
                partition[journal] == p,
                offset[dropped[partition[dropped] == p]],
            )
            for p in np.unique(partition[mine]).tolist()
        }
        starts.append(
            MemberStart(
                member, partition[journal], offset[journal], ts, breaks, msg_id=ids[journal]
            )
        )
    return starts


def _rebalances(
    offset: np.ndarray, ts: np.ndarray, here: np.ndarray, dropped: np.ndarray
) -> np.ndarray:
    """One partition's assignment stamps: the member's start, and a change stamped with the
    record after each dropped offset of the partition (so the step over it is not judged)."""
    held, stamps = offset[here], ts[here]
    dropped = dropped[(dropped > held.min(initial=0)) & (dropped < held.max(initial=0))]
    after = np.searchsorted(held, dropped)
    return np.sort(np.concatenate([[T0_US - 1], stamps[after]]))


# The adapters: the one call each check is timed through.


def check_cycles(h: History) -> dict[str, int]:
    """G0 and G1c over the read-back and the reads."""
    return cycle_facts(h.txns, *h.readback, h.reads).counts


def check_polls(h: History) -> dict[str, int]:
    """Poll skips and non-monotonic polls of the members."""
    ids, partition, offset = h.readback
    return poll_facts(h.members, FinalLog.of(partition, offset, ids)).counts


def check_transactions(h: History) -> dict[str, int]:
    """Aborted reads, lost and torn transactions over every message, with the probe."""
    messages = len(h.partition)
    none = np.full(messages, -1, dtype=np.int64)
    view = MessageView(
        msg_id=np.arange(messages, dtype=np.int64),
        sent=np.ones(messages, dtype=bool),
        reads=h.read.astype(np.int64),
        partition=h.partition,
        offset=h.offset,
        read_partition=np.where(h.read, h.partition, none),
        read_offset=np.where(h.read, h.offset, none),
        expired=np.zeros(messages, dtype=bool),
        consumed=np.zeros(messages, dtype=np.int64),
    )
    uncommitted = np.flatnonzero(h.in_log).astype(np.int64)
    return transactions.check(h.txns, view, uncommitted).counts


def check_messages(run_dir: Path) -> dict[str, int]:
    """Every message class of one run directory."""
    return check_run(RunInput(run_dir, complete=True, unlocated_acks=False)).counts


def planted(h: History) -> dict[str, dict[str, int]]:
    """What each check must find, from the plants alone."""
    t = np.arange(h.n)
    count = {name: int(np.count_nonzero(residue(t, name))) for name in vars(PLANTS)}
    late = int(np.count_nonzero(residue(t, "late_write") & (t + 1 < h.n)))
    future = int(np.count_nonzero(residue(t, "future_read") & (t + 1 < h.n)))
    return {
        "cycles": {AnomalyName.G0: 2 * late, AnomalyName.G1C: 2 * future},
        "polls": {
            AnomalyName.POLL_SKIP: RECORDS * count["poll_skip"],
            AnomalyName.NONMONOTONIC_POLL: RECORDS * count["poll_repeat"],
        },
        "transactions": {
            AnomalyName.ABORTED_READ: count["aborted_read"],
            AnomalyName.COMMITTED_LOST: count["lost"] + count["torn"],
            AnomalyName.TORN_TRANSACTION: count["torn"],
        },
    }


def timed(call: Callable[..., Any], *args: Any) -> tuple[float, Any]:
    """Seconds call(*args) takes, and its value."""
    started = time.perf_counter()
    value = call(*args)
    return time.perf_counter() - started, value


def sort_floor(h: History) -> float:
    """Seconds numpy takes to lexsort the read-back's records by (partition, offset)."""
    _, partition, offset = h.readback
    return timed(np.lexsort, (offset, partition))[0]


@dataclass(frozen=True)
class Line:
    """One printed line: a check at one size."""

    check: str
    txns: int
    records: int
    seconds: float
    baseline_s: float
    found: dict[str, int]
    expected: dict[str, int]
    expected_by: str = "planted"  # or "reference": the pyarrow reference's counts

    def text(self) -> str:
        """The line of the table, and the counts beside it."""
        txn_rate = f"{self.txns / self.seconds:>12,.0f}" if self.txns else f"{'-':>12}"
        found = " ".join(f"{k}={self.found.get(k)}" for k in self.expected)
        wanted = " ".join(f"{k}={v}" for k, v in self.expected.items())
        agree = "" if self.agrees else f"  MISMATCH: {self.expected_by} {wanted}"
        return (
            f"{self.check:<13} {f'{self.txns:,}' if self.txns else '-':>10} {self.records:>11,} "
            f"{self.seconds:>8.2f} "
            f"{txn_rate} {self.records / self.seconds:>12,.0f} "
            f"{self.seconds / self.baseline_s:>8.1f}x  found {found}{agree}"
        )

    @property
    def agrees(self) -> bool:
        """Whether the check found what was planted."""
        return {k: self.found.get(k) for k in self.expected} == self.expected


def transactional_lines(n: int) -> list[Line]:
    """The three transactional checks on a history of n transactions."""
    h = history(n)
    expected = planted(h)
    floor = sort_floor(h)
    checks = {"cycles": check_cycles, "polls": check_polls, "transactions": check_transactions}
    lines = []
    for name, check in checks.items():
        seconds, found = timed(check, h)
        lines.append(Line(name, n, h.records, seconds, floor, found, expected[name]))
    return lines


def message_line(rows: int, tmp: Path) -> Line:
    """The message check on a run directory of `rows` acked and read-back rows."""
    # reconcile_bench brings Spark's reconciliation in; the transactional checks need none of it.
    from reconcile_bench import arrow_reference, write_run

    root = Path(tempfile.mkdtemp(prefix=f"checks-bench-{rows}-", dir=tmp))
    try:
        run_dir = root / "run"
        write_run(run_dir, rows, "bench")
        seconds, found = timed(check_messages, run_dir)
        reference_s, reference = timed(arrow_reference, run_dir)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    missing = found[AnomalyName.LOST] + found[AnomalyName.UNSEEN]
    summed = {
        "missing": missing,
        "duplicated": found[AnomalyName.DUPLICATED],
        "offset_divergent": found[AnomalyName.OFFSET_DIVERGENT],
    }
    return Line("messages", 0, rows, seconds, reference_s, summed, reference, "reference")


def main(argv: list[str] | None = None) -> int:
    """Print one line per check and size; exit 1 if a check missed a plant."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=str(TARGET_TXNS), help="transactions, comma-separated")
    parser.add_argument(
        "--message-scale", type=int, default=10, help="message check rows per transaction"
    )
    parser.add_argument("--skip-messages", action="store_true")
    parser.add_argument("--tmp", type=Path, default=Path(tempfile.gettempdir()))
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    transactional_lines(WARMUP_TXNS)
    print(
        f"{RECORDS} records a transaction over {PARTITIONS} partitions, one transaction in "
        f"{PLANT_EVERY} planted; baseline: lexsort of the read-back (transactional checks), "
        "pyarrow reference (messages)"
    )
    print(
        f"{'check':<13} {'txns':>10} {'records':>11} {'seconds':>8} {'txns/s':>12} "
        f"{'records/s':>12} {'baseline':>9}"
    )
    lines = []
    for n in sizes:
        for line in transactional_lines(n):
            print(line.text(), flush=True)
            lines.append(line)
            if line.check == "cycles" and n == TARGET_TXNS:
                met = n / line.seconds >= TARGET_RATE
                print(f"{'':13} target {TARGET_RATE:,} txns/s: {'met' if met else 'MISSED'}")
        if not args.skip_messages:
            line = message_line(n * args.message_scale, args.tmp)
            print(line.text(), flush=True)
            lines.append(line)
    return 0 if all(line.agrees for line in lines) else 1


if __name__ == "__main__":
    sys.exit(main())
