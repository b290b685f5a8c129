"""Property tests of the reconciliation: generated runs against an oracle written in the test.

tests/unit/generated_runs.py draws a ground truth and writes its run directory; the checker's
counts (numpy, in this process) and the Spark job's (on a smaller budget) must equal what the
oracle derives from the ground truth with plain sets.
"""

from __future__ import annotations

import tempfile
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from analysis.checks.messages import RunInput, check_run
from analysis.model.anomalies import AT_ACKED_OFFSET, AnomalyName, Check, anomaly
from analysis.spark.reconcile import reconcile, reconcile_in_process
from tests.unit.generated_runs import (
    FAILED,
    OK,
    T0_US,
    GeneratedRun,
    Record,
    Send,
    expected_counts,
    runs,
    write_run_dir,
)

pytestmark = pytest.mark.property


def _checked(run: GeneratedRun) -> dict[str, int]:
    """The checker's counts of the generated run, through its run directory."""
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = write_run_dir(run, Path(tmp) / "run")
        facts = check_run(
            RunInput(run_dir, run.complete, unlocated_acks=not run.located, log_start=run.log_start)
        )
    return facts.counts


def _same(actual: dict[str, int], expected: dict[str, int]) -> None:
    """Every count either side names is equal (absent counts are 0)."""
    names = set(actual) | set(expected)
    diff = {n: (actual.get(n, 0), expected.get(n, 0)) for n in names}
    assert {n: a for n, (a, e) in diff.items() if a != e} == {
        n: e for n, (a, e) in diff.items() if a != e
    }


def _sends(*rows: tuple[int, str, int | None]) -> list[Send]:
    """Sends of partition 0 from (msg_id, status, acked offset), each its own key."""
    return [Send(m, f"k{m}", 0, status, 0, off, T0_US + m * 1000) for m, status, off in rows]


def _records(*rows: tuple[int | None, int]) -> list[Record]:
    """Records of partition 0 from (msg_id, offset)."""
    return [Record(m, None if m is None else f"k{m}", 0, 0, off) for m, off in rows]


EVERYTHING_GONE = GeneratedRun(
    sends=_sends((1, OK, 0), (2, OK, 1)), log=[], reread=[], log_start={0: 0}, located=True,
    complete=True,
)  # fmt: skip
ONE_LOST_ALONE = GeneratedRun(
    sends=_sends((1, OK, 0)), log=[], reread=[], log_start={0: 0}, located=True, complete=True
)
NOTHING_ACKED = GeneratedRun(
    sends=_sends((1, FAILED, None)), log=_records((None, 0)), reread=[], log_start={0: 0},
    located=True, complete=True,
)  # fmt: skip
REWRITTEN_AND_MOVED = GeneratedRun(
    sends=_sends((1, OK, 0), (2, OK, 1)), log=_records((2, 0), (1, 1)), reread=[],
    log_start={0: 0}, located=True, complete=True,
)  # fmt: skip
ACKS0_PROVEN_BY_A_FAILED_LATER_SEND = GeneratedRun(
    sends=_sends((1, OK, None), (2, FAILED, None)), log=_records((2, 0)), reread=[],
    log_start={0: 0}, located=False, complete=True, acks="0",
)  # fmt: skip

# acks=0: a send at the same µs as the one read proves nothing (only a later send does).
ACKS0_A_SEND_AT_THE_SAME_TIME_READ = GeneratedRun(
    sends=[Send(m, f"k{m}", 0, OK, 0, None, T0_US + 1000) for m in (1, 2)],
    log=_records((2, 0)), reread=[], log_start={0: 0}, located=False, complete=True, acks="0",
)  # fmt: skip
# acks=0: message 2, sent after 1, written to partitions 0 and 1 (3 after both, in 2): p1's
# copy proves 1 lost.
ACKS0_A_LATER_SEND_READ_IN_TWO_PARTITIONS = GeneratedRun(
    sends=[Send(m, f"k{m}", 0, OK, p, None, T0_US + m * 1000) for m, p in ((1, 1), (2, 0), (3, 2))],
    log=[Record(2, "k2", 0, 0, 0), Record(2, "k2", 0, 1, 0), Record(3, "k3", 0, 2, 0)],
    reread=[], log_start={0: 0, 1: 0, 2: 0}, located=False, complete=True, acks="0",
)  # fmt: skip

# Message 2 missing at p0@1 below p0@2, read, with partition 1 read after partition 0.
A_HOLE_BEFORE_ANOTHER_PARTITION = GeneratedRun(
    sends=[*_sends((1, OK, 0), (2, OK, 1), (3, OK, 2)), Send(4, "k4", 0, OK, 1, 0, T0_US)],
    log=[*_records((1, 0), (3, 2)), Record(4, "k4", 0, 1, 0)], reread=[],
    log_start={0: 0, 1: 0}, located=True, complete=True,
)  # fmt: skip
# Two msg_ids next to each other near 2^62 (beyond what a float tells apart), each at the
# other's acked offset.
HIGH = 2**62
HIGH_IDS_SWAPPED = GeneratedRun(
    sends=[Send(HIGH + m, f"k{m}", 0, OK, 0, m - 1, T0_US + m) for m in (1, 2)],
    log=[Record(HIGH + 2, "k2", 0, 0, 0), Record(HIGH + 1, "k1", 0, 0, 1)], reread=[],
    log_start={0: 0}, located=True, complete=True,
)  # fmt: skip


@given(runs())
@example(EVERYTHING_GONE)
@example(ONE_LOST_ALONE)
@example(NOTHING_ACKED)
@example(REWRITTEN_AND_MOVED)
@example(ACKS0_PROVEN_BY_A_FAILED_LATER_SEND)
@example(ACKS0_A_SEND_AT_THE_SAME_TIME_READ)
@example(ACKS0_A_LATER_SEND_READ_IN_TWO_PARTITIONS)
@example(A_HOLE_BEFORE_ANOTHER_PARTITION)
@example(HIGH_IDS_SWAPPED)
def test_the_checker_counts_what_the_oracle_counts(run: GeneratedRun) -> None:
    _same(_checked(run), expected_counts(run))


# Messages 1..8, each written twice (at m - 1 and m + 7): an example names the lower offset.
ALL_WRITTEN_TWICE = GeneratedRun(
    sends=_sends(*((m, OK, m - 1) for m in range(1, 9))),
    log=_records(*((m, m - 1) for m in range(1, 9)), *((m, m + 7) for m in range(1, 9))),
    reread=[], log_start={0: 0}, located=True, complete=True,
)  # fmt: skip

# Key k's second send (2) logged before its first (1): 1 is read late.
KEY_READ_OUT_OF_ORDER = GeneratedRun(
    sends=[Send(m, "k", m - 1, OK, 0, 2 - m, T0_US + m * 1000) for m in (1, 2)],
    log=[Record(2, "k", 1, 0, 0), Record(1, "k", 0, 0, 1)], reread=[], log_start={0: 0},
    located=True, complete=True,
)  # fmt: skip


@given(runs(complete=True))
@example(ALL_WRITTEN_TWICE)
@example(REWRITTEN_AND_MOVED)
@example(KEY_READ_OUT_OF_ORDER)
def test_each_example_names_where_its_message_was_acked_or_first_read(run: GeneratedRun) -> None:
    """A class of AT_ACKED_OFFSET shows the acked location and the record there; the others
    the message's lowest (partition, offset) read; every one how many records hold it."""
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = write_run_dir(run, Path(tmp) / "run")
        facts = check_run(
            RunInput(run_dir, True, unlocated_acks=not run.located, log_start=run.log_start)
        )
    at = {(r.partition, r.offset): r for r in run.readback}
    slots: dict[int | None, list[tuple[int, int]]] = defaultdict(list)
    for slot, record in sorted(at.items()):
        slots[record.msg_id].append(slot)
    acked = {s.msg_id: (s.partition, s.offset) for s in run.sends if s.status == OK}
    for name, rows in facts.examples.items():
        if anomaly(name).check == Check.SENDS:  # a row per send (tests/unit/test_send_order.py)
            continue
        if name == AnomalyName.REORDERED:  # a row per record read late, not per message
            assert all(
                row["msg_id"] == at[(row["partition"], row["offset"])].msg_id for row in rows
            )
            continue
        for row in rows:
            mine = slots.get(row["msg_id"], [])
            where = acked.get(row["msg_id"], (None, None))
            holder = at.get(where) if where[1] is not None else None
            assert row["readback_msg_id_at_offset"] == (holder and holder.msg_id)
            assert row["reads"] == len(mine)
            if name not in AT_ACKED_OFFSET:
                where = mine[0] if mine else (None, None)
            assert (row["partition"], row["offset"]) == where, (name, row)


@given(runs())
def test_loss_is_every_missing_acknowledged_message_once(run: GeneratedRun) -> None:
    counts = _checked(run)
    if not run.complete:
        # An incomplete read-back proves nothing missing: no message may count as lost.
        assert counts.get("lost", 0) == counts.get("unseen", 0) == 0, counts
        assert counts["acked"] == sum(s.status == OK for s in run.sends)
        return
    read_ids = {r.msg_id for r in run.log}
    missing = {
        s.msg_id
        for s in run.sends
        if s.status == OK
        and s.msg_id not in read_ids
        and not (s.offset is not None and s.offset < run.log_start.get(s.partition, 0))
    }
    assert counts["lost"] + counts["unseen"] == len(missing)


# A Spark job per example: a twenty-fifth of the profile's budget (8 in CI, 200 in make fuzz).
@settings(max_examples=max(8, settings.default.max_examples // 25))
@given(st.lists(runs(max_partitions=3), min_size=1, max_size=12))
def test_the_spark_job_counts_what_the_oracle_counts(spark, batch: list[GeneratedRun]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        dirs = [write_run_dir(run, Path(tmp) / str(i)) for i, run in enumerate(batch)]
        results = reconcile(spark, dirs)
        in_process = reconcile_in_process(dirs)
    for run, result, local in zip(batch, results, in_process, strict=True):
        assert result.status == ("complete" if run.complete else "incomplete"), result.error
        assert result == local
        if run.complete:
            _same(result.counts, expected_counts(run))
