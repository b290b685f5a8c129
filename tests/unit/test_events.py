"""events.jsonl: the typed models written by EventLog and parsed once by read_events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.rundir import layout
from harness.rundir.events import (
    EventLog,
    FaultEnd,
    FaultStart,
    PhaseEvent,
    ReadbackDone,
    RecorderTally,
    parse_events,
    read_events,
)

PARTITION = st.integers(0, 50)
OFFSETS = st.dictionaries(PARTITION, st.integers(0, 2**40), max_size=6)
NAMES = st.text("abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=12)


def _events():
    """Events of several models with the fields a writer might set (or leave out)."""
    return st.one_of(
        st.builds(PhaseEvent, phase=NAMES, ts_us=st.integers(1, 2**60)),
        st.builds(
            FaultStart,
            fault_id=st.integers(0, 100),
            fault=NAMES,
            nodes=st.lists(st.integers(1, 9), max_size=3),
            detail=st.none() | st.dictionaries(NAMES, st.integers(), max_size=3),
        ),
        st.builds(ReadbackDone, complete=st.booleans(), high_watermarks=OFFSETS),
        st.builds(
            RecorderTally,
            reports=st.fixed_dictionaries(
                {"ok": st.integers(0), "failed": st.integers(0), "indeterminate": st.integers(0)}
            ),
            journal_error=st.none() | NAMES,
        ),
    )


@pytest.mark.property
@given(st.lists(_events(), max_size=12))
def test_what_the_log_writes_reads_back_as_the_same_models(tmp_path_factory, written) -> None:
    run_dir = tmp_path_factory.mktemp("run")
    log = EventLog(run_dir / layout.EVENTS)
    stamped = [log.write(event) for event in written]
    log.close()
    events = read_events(run_dir)
    assert events.unreadable == 0
    assert [type(e) for e in events.events] == [type(e) for e in written]
    for read, wrote in zip(events.events, stamped, strict=True):
        assert read.ts_us == wrote.ts_us is not None
        # JSON keys are strings: offsets by partition read back keyed "0", "1", ...
        if isinstance(wrote, ReadbackDone):
            assert read.high_watermarks == {str(p): o for p, o in wrote.high_watermarks.items()}
        else:
            assert read == wrote


def test_a_line_holds_only_the_fields_its_writer_set(tmp_path: Path) -> None:
    log = EventLog(tmp_path / layout.EVENTS)
    log.write(PhaseEvent(phase="workload-start", ts_us=7))
    log.write(FaultStart(fault_id=1, fault="kill", **{"as": "victim"}))
    log.close()
    first, second = map(json.loads, (tmp_path / layout.EVENTS).read_text().splitlines())
    assert first == {"ts_us": 7, "type": "phase", "phase": "workload-start"}
    assert list(second)[:2] == ["ts_us", "type"]
    assert second["as"] == "victim" and "nodes" not in second and "detail" not in second


def test_a_fault_detail_is_written_and_read_as_the_fault_gave_it(tmp_path: Path) -> None:
    # Typed for the code on both sides, never validated: keys in the fault's order, 100 no 100.0.
    detail = {"percent": 30, "to": ["all"], "delay_ms": 100, "shaper": "nfqueue", "z": None}
    log = EventLog(tmp_path / layout.EVENTS)
    log.write(FaultStart(fault_id=1, detail=detail))
    log.write(FaultEnd(fault_id=1))
    log.close()
    line = (tmp_path / layout.EVENTS).read_text().splitlines()[0]
    assert line.endswith(f', "detail": {json.dumps(detail)}}}')
    start, end = read_events(tmp_path).events
    assert list(start.detail.items()) == list(detail.items()) and end.detail == {}


def test_torn_foreign_and_invalid_lines_are_counted_not_raised() -> None:
    lines = [
        '{"ts_us": 1, "type": "phase", "phase": "cluster-start"}',
        '{"ts_us": 2, "type": "fault_start", "fault_id": "not a number"}',
        '{"ts_us": 3, "type": "from-a-newer-harness"}',
        "[1, 2]",
        '{"ts_us": 4, "type": "readback", "compl',
        "",
        '{"ts_us": 5, "type": "phase", "phase": "heal", "actions": ["start 1"], "new": 1}',
    ]
    events = parse_events(lines)
    assert events.unreadable == 4
    assert [e.ts_us for e in events.events] == [1, 5]
    assert events.phases("heal")[0].model_extra == {"new": 1}  # kept, though no field names it
    assert events.of(FaultStart) == []


def test_a_run_without_events_has_none(tmp_path: Path) -> None:
    events = read_events(tmp_path)
    assert events.events == () and events.unreadable == 0


def test_partition_roles_keep_their_order_unknown_keys_and_tolerate_null_lists() -> None:
    """A sample's and a fault_start's partition roles are typed yet read as written: the keys
    in the writer's order, unknown keys kept, a null ISR read as null (readers take it as
    empty), a partition written as text read as its number."""
    from harness.rundir.events import Sample
    from harness.rundir.events import parse_events as parse

    line = {
        "ts_us": 1,
        "type": "sample",
        "partitions": [
            {"partition": 0, "leader": 1, "isr": [1, 2], "note": "x"},
            {"partition": "1", "leader": None, "isr": None},
        ],
    }
    (sample,) = parse([json.dumps(line)]).of(Sample)
    assert sample.partitions == [
        {"partition": 0, "leader": 1, "isr": [1, 2], "note": "x"},
        {"partition": 1, "leader": None, "isr": None},
    ]
    assert list(sample.partitions[0]) == ["partition", "leader", "isr", "note"]
