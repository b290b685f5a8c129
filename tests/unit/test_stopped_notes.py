"""Nodes that stopped with no fault acting on them, noted (analysis/judge/stopped.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from analysis.judge.outcomes import Verdict
from analysis.judge.stopped import stopped_notes
from analysis.model.evidence import RunEvidence

S = 1_000_000
HOSTS = ("kafka-1", "kafka-2", "kafka-3")


def run_of(faults: list[tuple[str, int, int]], stopped: dict[int, list[str]], heal: int):
    """A run whose faults are (host, injected, healed) and whose samples at each second of
    `stopped` saw those hosts stopped, healed at `heal` seconds."""
    events: list[dict] = []
    for fault_id, (host, start, end) in enumerate(faults, 1):
        start_event = {"type": "fault_start", "ts_us": start * S, "fault_id": fault_id}
        events.append({**start_event, "fault": "pause", "hosts": [host]})
        events.append({"type": "fault_end", "ts_us": end * S, "fault_id": fault_id})
    for at, hosts in sorted(stopped.items()):
        events.append({"type": "sample", "ts_us": at * S, "stopped": hosts})
    events.append({"type": "phase", "phase": "heal", "ts_us": heal * S})
    return RunEvidence.coerce(events)


def test_a_broker_that_shut_itself_down_after_its_pause_is_noted_and_a_crash_is_not():
    """KAFKA-20785's search, seed 2, chunk 5: kafka-3 paused while it started, shut itself
    down once unpaused; kafka-2 then lost its page cache (a fault: not noted)."""
    seen = {t: ["kafka-3"] if t >= 109 else [] for t in range(100, 150)}
    for t in range(111, 115):
        seen[t] = ["kafka-2", "kafka-3"]
    run = run_of([("kafka-3", 11, 105), ("kafka-2", 110, 114)], seen, 151)
    notes = stopped_notes(run, 0)
    assert [n.verdict for n in notes] == [Verdict.PASS]
    assert notes[0].detail.startswith("kafka-3 stopped with no fault acting on it: last seen")
    assert "t=108.0 s, stopped until the final heal" in notes[0].detail


@given(
    st.lists(st.tuples(st.sampled_from(HOSTS), st.integers(1, 60), st.integers(0, 20)), max_size=4),
    st.dictionaries(st.integers(1, 60), st.lists(st.sampled_from(HOSTS), unique=True)),
)
def test_a_note_for_each_stopped_span_no_fault_on_its_node_overlaps(faults, stopped):
    """Oracle: a host's stopped span runs from the sample before its first stopped one (that
    one itself at the first sample) to the first sample that sees it up again (the heal at 100
    s when none does); it is noted unless a fault on that host overlaps it. Times start at 1 s:
    a stamp of 0 reads as unstamped."""
    faults = [(host, at, at + d) for host, at, d in faults]
    times = sorted(stopped)
    expected = []
    for host in HOSTS:
        begin = None
        for i, t in enumerate([*times, None]):
            down = t is not None and host in stopped[t]
            if down and begin is None:
                begin = times[i - 1] if i else t
            if not down and begin is not None:
                end = 100 if t is None else t
                if not any(h == host and a <= end and begin <= b for h, a, b in faults):
                    expected.append((begin, host))
                begin = None
    notes = stopped_notes(run_of(faults, stopped, 100), 0)
    assert sorted(n.detail.split(" ")[0] for n in notes) == sorted(h for _, h in expected)
    assert len(notes) == len(expected)


def test_the_timeline_marks_the_stop_no_fault_made_beside_the_faults():
    """The chart's windows (analysis/report/marks.py): the two faults, and kafka-3's stop
    after its pause as a window of its own, from the last sample that saw it up to the final
    heal, in start order; kafka-2's stop within its fault is not marked again."""
    from analysis.report.marks import STOPPED, fault_windows

    seen = {t: ["kafka-3"] if t >= 109 else [] for t in range(100, 150)}
    for t in range(111, 115):
        seen[t] = ["kafka-2", "kafka-3"]
    run = run_of([("kafka-3", 11, 105), ("kafka-2", 110, 114)], seen, 151)
    windows = fault_windows(run)
    assert [(w.label, w.start_us // S, (w.end_us or 0) // S) for w in windows] == [
        ("pause", 11, 105),
        (f"kafka-3 {STOPPED}", 108, 151),
        ("pause", 110, 114),
    ]
