"""Produce latency while each fault was in force and outside every fault, against an oracle
written here (nearest rank over the sends whose send time falls in the interval)."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.checks.availability import latency_of
from analysis.model.availability import Latency
from analysis.report.matrix import _latency_texts
from tests.examples import examples
from tests.unit.test_availability import T0_US, S, measured, window

sends = st.lists(
    st.tuples(
        st.integers(0, 20 * S),  # send time after T0, µs
        st.integers(0, 3 * S),  # latency, µs
        st.sampled_from(["ok", "ok", "ok", "failed", "indeterminate"]),
    ),
    max_size=60,
)
intervals = st.lists(st.tuples(st.integers(0, 20 * S), st.integers(1, 10 * S)), max_size=3)


def nearest_rank(values: list[int], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered))) - 1] / 1000.0


def oracle(values: list[int]) -> Latency:
    return Latency(len(values), nearest_rank(values, 0.5), nearest_rank(values, 0.99))


def row(i: int, send_us: int, latency_us: int, status: str) -> dict:
    ok = status == "ok"
    return {
        "msg_id": i, "key": f"k{i}", "key_seq": 0, "status": status,
        "partition": 0 if ok else None, "offset": i if ok else None,
        "error": None if ok else "timed out", "send_ts_us": T0_US + send_us,
        "ack_ts_us": T0_US + send_us + latency_us if ok else None,
    }  # fmt: skip


def fault_events(faults: list[tuple[int, int]], healed: list[bool]) -> list[dict]:
    events = []
    for fault_id, ((start, length), heal) in enumerate(zip(faults, healed, strict=True)):
        events.append({"type": "fault_start", "fault_id": fault_id, "fault": "delay",
                       "ts_us": T0_US + start - 500, "injected_us": T0_US + start,
                       "nodes": [1]})  # fmt: skip
        if heal:
            events.append({"type": "fault_end", "fault_id": fault_id, "fault": "delay",
                           "nodes": [1], "ts_us": T0_US + start + length})  # fmt: skip
    return events


@settings(max_examples=examples(0.3), deadline=None)
@given(sends, intervals, st.lists(st.booleans(), min_size=3, max_size=3))
def test_each_fault_and_the_rest_get_the_latency_of_their_own_sends(rows, faults, healed):
    healed = healed[: len(faults)]
    end_us = 20 * S  # the workload window: 0 .. 20 s after T0
    with tempfile.TemporaryDirectory() as tmp:
        found = measured(
            Path(tmp),
            [row(i, *r) for i, r in enumerate(rows)],
            [*window(0, 20), *fault_events(faults, healed)],
        )
    ok = [(send, lat) for send, lat, status in rows if status == "ok"]
    spans = [
        (start, start + length if heal else end_us)
        for (start, length), heal in zip(faults, healed, strict=True)
    ]
    for measured_fault, (begin, end) in zip(found.fault_latency, spans, strict=True):
        assert (measured_fault.start_us, measured_fault.end_us) == (T0_US + begin, T0_US + end)
        assert measured_fault.latency == oracle([lat for s, lat in ok if begin <= s < end])
    rest = [lat for s, lat in ok if not any(b <= s < e for b, e in spans)]
    if ok:
        assert found.latency_outside_faults == oracle(rest)
    else:
        assert found.latency_outside_faults in (None, Latency(0, None, None))
    assert found.as_json()["latency"]["faults"] == [f.as_json() for f in found.fault_latency]


@given(st.lists(st.integers(0, 10**7), max_size=200))
def test_latency_of_is_the_nearest_rank(values):
    import numpy as np

    assert latency_of(np.array(values, dtype=np.int64)) == oracle(values)


def test_the_report_names_the_latency_during_a_fault_beside_the_rest(tmp_path):
    rows = [row(0, 1 * S, 5_000, "ok"), row(1, 6 * S, 300_000, "ok"), row(2, 7 * S, 320_000, "ok")]
    found = measured(tmp_path, rows, [*window(0, 20), *fault_events([(5 * S, 5 * S)], [True])])
    assert _latency_texts(found) == [
        "sends during delay (fault 0) acked in p50 300 ms, p99 320 ms",
        "outside every fault in p50 5 ms, p99 5 ms",
    ]
