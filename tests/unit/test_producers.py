"""Several producers (workload.producers): slots, shares, the merged journal and validation."""

from __future__ import annotations

from typing import Any

import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.experiment.load import parse_experiment
from harness.experiment.problems import SpecError
from harness.rundir import layout
from harness.rundir.events import EventLog, load_events
from harness.rundir.records import ACKED_SCHEMA, PRODUCER_COLUMN, PRODUCER_ID_STRIDE, Status
from harness.workload.journal import SOLE, AckJournal, JournalError, ProducerSlot, key_of
from harness.workload.producer.fleet import (
    Fleet,
    MemberEnd,
    ProducerCrash,
    share_of,
    summed_stats,
    summed_tally,
)
from harness.workload.producer.recorder import (
    DeliveryTally,
    RecorderStats,
    Workload,
    delivery_callback,
    status_of,
)
from harness.workload.values import encode_value
from tests.unit.finalized import finalized
from tests.unit.test_journal import FakeMessage


def journal_for(tmp_path, slot: ProducerSlot, keys: int, acked: list[int], sent: int) -> None:
    """A closed journal of `slot` that sent `sent` messages, of which `acked` (its own counts)
    were acknowledged, as the recorder writes it."""
    journal = AckJournal(tmp_path, keys, status_of, slot)
    journal.sent_upto = sent
    on_delivery = delivery_callback(journal, DeliveryTally())
    for local in acked:
        value = encode_value(slot.id_base + local, local // keys, 40)
        on_delivery(None, FakeMessage(value, None, local % 3, local, 0.001))
    journal.commit()
    journal.close()


def test_the_sole_recorder_keeps_todays_ids_keys_and_files():
    assert (SOLE.id_base, SOLE.key_prefix, SOLE.files) == (0, "", layout.JOURNAL)
    assert SOLE.files.meta == "journal-meta.json"
    assert SOLE.meta(16) == {"keys": 16}
    assert key_of(3, SOLE.key_prefix) == "k3"


def test_producers_have_disjoint_ids_distinct_keys_and_their_own_journal_files():
    slots = [ProducerSlot(index) for index in range(3)]
    assert [s.id_base for s in slots] == [0, PRODUCER_ID_STRIDE, 2 * PRODUCER_ID_STRIDE]
    keys = [{key_of(i, s.key_prefix) for i in range(16)} for s in slots]
    assert not (keys[0] & keys[1] or keys[1] & keys[2] or keys[0] & keys[2])
    assert key_of(5, slots[2].key_prefix) == "p2-k5"
    files = [s.files for s in slots]
    assert len({f.meta for f in files} | {f.sends for f in files} | {f.acks for f in files}) == 9
    assert all(f.meta != layout.JOURNAL_META for f in files)
    # Every producer's file is a journal file (the CLI's crash recovery looks for them).
    from fnmatch import fnmatch

    assert all(fnmatch(f.acks, layout.JOURNAL_GLOB) for f in files)
    assert all(fnmatch(f.meta, layout.PRODUCER_JOURNAL_METAS) for f in files)
    assert ProducerSlot.from_meta(slots[2].meta(4)) == slots[2]
    assert ProducerSlot.from_meta(SOLE.meta(4)) == SOLE


def test_the_largest_run_fits_below_the_stride_and_in_the_value():
    from harness.limits import MAX_DURATION_S, MAX_RATE

    assert MAX_RATE * MAX_DURATION_S < PRODUCER_ID_STRIDE
    from harness.experiment.fields import MAX_PRODUCERS

    last = ProducerSlot(MAX_PRODUCERS - 1).id_base + MAX_RATE * MAX_DURATION_S
    assert len(str(last)) <= 15  # the value's msg_id field: 15 digits


def test_rate_and_count_are_shared_and_the_rest_is_each_producers():
    total = Workload(rate=1000, duration_s=None, count=10, message_bytes=100, keys=8)
    shares = [share_of(total, index, 3) for index in range(3)]
    assert [s.count for s in shares] == [4, 3, 3]
    assert sum(s.count or 0 for s in shares) == 10
    assert all(s.rate == pytest.approx(1000 / 3) for s in shares)
    assert all((s.keys, s.message_bytes, s.duration_s) == (8, 100, None) for s in shares)
    timed = Workload(rate=None, duration_s=30, count=None, message_bytes=100, keys=8)
    assert share_of(timed, 1, 4) == timed
    with pytest.raises(ValueError, match="cannot be shared"):
        share_of(Workload(None, None, 2, 100, 8), 2, 3)


def test_finalize_merges_every_producers_journal(tmp_path):
    journal_for(tmp_path, ProducerSlot(0), keys=2, acked=[0, 1, 2], sent=4)
    journal_for(tmp_path, ProducerSlot(1), keys=2, acked=[0, 2], sent=3)
    journal_for(tmp_path, ProducerSlot(2), keys=2, acked=[], sent=0)  # sent nothing
    table = finalized(tmp_path)
    on_disk = pq.read_table(tmp_path / layout.ACKED)
    assert on_disk.schema.names == [*ACKED_SCHEMA.names, PRODUCER_COLUMN]
    # Readers that select ACKED_SCHEMA's columns by name see the one-producer schema.
    assert pq.read_table(tmp_path / layout.ACKED, columns=ACKED_SCHEMA.names).schema.equals(
        ACKED_SCHEMA
    )
    rows = table.to_pylist()
    stride = PRODUCER_ID_STRIDE
    assert [r["msg_id"] for r in rows] == [0, 1, 2, 3, stride, stride + 1, stride + 2]
    assert len({r["msg_id"] for r in rows}) == len(rows)
    assert [r[PRODUCER_COLUMN] for r in rows] == [0, 0, 0, 0, 1, 1, 1]
    assert [(r["key"], r["key_seq"]) for r in rows] == [
        ("p0-k0", 0),
        ("p0-k1", 0),
        ("p0-k0", 1),
        ("p0-k1", 1),
        ("p1-k0", 0),
        ("p1-k1", 0),
        ("p1-k0", 1),
    ]
    statuses = [(r["msg_id"], r["status"]) for r in rows if r["status"] != "ok"]
    assert statuses == [(3, "indeterminate"), (stride + 1, "indeterminate")]
    assert not (tmp_path / layout.JOURNAL_META).exists()


def test_finalize_of_one_producer_has_no_producer_column(tmp_path):
    journal_for(tmp_path, SOLE, keys=2, acked=[0, 1], sent=2)
    assert finalized(tmp_path).schema.equals(ACKED_SCHEMA)


def test_a_producer_that_never_journalled_leaves_its_meta_and_no_rows(tmp_path):
    from harness.workload.journal import write_meta

    journal_for(tmp_path, ProducerSlot(0), keys=1, acked=[0], sent=1)
    write_meta(tmp_path, ProducerSlot(1), 1)  # the fleet writes it before the process starts
    rows = finalized(tmp_path).to_pylist()
    assert [(r["msg_id"], r[PRODUCER_COLUMN]) for r in rows] == [(0, 0)]


def test_stats_and_tallies_add_up_over_producers():
    stats = summed_stats([RecorderStats(10, 7, 1, 2), RecorderStats(5, 5, 0, 0)])
    assert stats == RecorderStats(15, 12, 1, 2)
    tally = summed_tally([{"ok": 3, "failed": 1, "indeterminate": 0}, {"ok": 2}])
    assert tally == {"ok": 5, "failed": 1, "indeterminate": 0}


def test_a_fleet_never_started_writes_a_zero_tally(tmp_path):
    events = EventLog(tmp_path / layout.EVENTS)
    fleet = Fleet([], events)
    assert fleet.close(events) is None
    events.close()
    (event,) = load_events(tmp_path)
    assert event["type"] == "recorder_tally" and event["reports"]["ok"] == 0


def doc(**workload: Any) -> dict[str, Any]:
    return {"name": "t", "workload": workload}


def test_producers_defaults_to_one_and_is_bounded():
    assert parse_experiment(doc()).workload.producers == 1
    assert parse_experiment(doc(producers=3)).workload.producers == 3
    for bad, fragment in ((0, "greater than or equal to 1"), (65, "at most 64"), (2.5, "")):
        with pytest.raises(SpecError) as caught:
            parse_experiment(doc(producers=bad))
        assert "workload.producers" in str(caught.value) and fragment in str(caught.value)


def test_count_must_give_every_producer_a_message():
    with pytest.raises(SpecError) as caught:
        parse_experiment(doc(producers=4, count=3, duration_s=None))
    assert "workload.count" in str(caught.value) and "producers" in str(caught.value)
    assert parse_experiment(doc(producers=3, count=3, duration_s=None)).workload.count == 3


class _Ended:
    """A fleet member that has already ended as `end` says."""

    pid = None

    def __init__(self, end: MemberEnd):
        self._end = end

    def end(self) -> MemberEnd:
        return self._end


_TEXT = st.none() | st.sampled_from(["boom", "torn line", "exited with code -9"])
_ENDS = st.builds(
    MemberEnd,
    reports=st.fixed_dictionaries({s.value: st.integers(0, 10**6) for s in Status}),
    journal_error=_TEXT,
    problem=_TEXT,
)


@pytest.mark.property
@given(st.lists(_ENDS, max_size=5))
def test_a_fleet_closes_to_the_sum_of_its_members_and_names_each_that_failed(
    tmp_path_factory: pytest.TempPathFactory, ends: list[MemberEnd]
) -> None:
    """Oracle: the tally is each status summed, each member's part is its own end, the journal
    error names every member whose journal missed reports, and the error is a ProducerCrash
    naming every member with a problem, else a JournalError, else none."""
    run_dir = tmp_path_factory.mktemp("fleet")
    events = EventLog(run_dir / layout.EVENTS)
    error = Fleet([_Ended(end) for end in ends], events).close(events)  # type: ignore[misc]
    events.close()
    (tally,) = load_events(run_dir)
    assert tally["reports"] == {s.value: sum(e.reports[s.value] for e in ends) for s in Status}
    assert [
        (p["producer"], p["reports"], p["journal_error"], p["problem"]) for p in tally["producers"]
    ] == [(i, e.reports, e.journal_error, e.problem) for i, e in enumerate(ends)]
    journal = "; ".join(
        f"producer {i}: {e.journal_error}" for i, e in enumerate(ends) if e.journal_error
    )
    assert tally["journal_error"] == (journal or None)
    problems = "; ".join(f"producer {i}: {e.problem}" for i, e in enumerate(ends) if e.problem)
    if problems:
        assert isinstance(error, ProducerCrash) and str(error) == problems
    elif journal:
        assert isinstance(error, JournalError) and str(error) == journal
    else:
        assert error is None
