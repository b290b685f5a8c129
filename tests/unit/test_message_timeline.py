"""The send timeline against an oracle in plain Python: sends by status and reported status
per epoch second, unknown statuses, the run's counts, and the nearest-rank ack latency
percentiles (both the packed sort and the wide-latency path), from generated sends."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from analysis.checks.messages.columns import NONE_TS, NULL, Acked
from analysis.checks.messages.timeline import add_anomaly_seconds, send_facts

T0_US = 1_700_000_000_000_000
STATUS = {0: None, 1: "ok", 2: "failed", 3: "indeterminate"}
WIDE = 1 << 41  # past the packed sort's 40 bits

# (status code, send second or None, µs into it, latency µs or None, reported)
SEND = st.tuples(
    st.sampled_from([0, 1, 1, 1, 2, 3]),
    st.none() | st.integers(0, 3),
    st.integers(0, 999_999),
    st.none() | st.integers(0, 5_000) | st.sampled_from([0, 1, 999, WIDE]),
    st.booleans(),
)


def _acked(sends: list[tuple[int, int | None, int, int | None, bool]]) -> Acked:
    n = len(sends)
    send_ts = [NONE_TS if s is None else T0_US + s * 1_000_000 + us for _, s, us, _, _ in sends]
    ack_ts = [
        NONE_TS if lat is None or ts == NONE_TS else ts + lat
        for ts, (_, _, _, lat, _) in zip(send_ts, sends, strict=True)
    ]
    return Acked(
        msg_id=np.arange(n, dtype=np.int64),
        identified=np.ones(n, dtype=bool),
        status=np.array([code for code, *_ in sends], dtype=np.int64),
        partition=np.full(n, NULL, dtype=np.int64),
        offset=np.full(n, NULL, dtype=np.int64),
        send_ts=np.array(send_ts, dtype=np.int64),
        ack_ts=np.array(ack_ts, dtype=np.int64),
        reported=np.array([r for *_, r in sends], dtype=bool),
    )


def _nearest_rank(values: list[int], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(math.ceil(p * len(ordered)), 1) - 1] / 1000.0


def _oracle(sends: list[tuple[int, int | None, int, int | None, bool]]) -> dict[int, Any]:
    seconds: dict[int, dict[str, Any]] = {}
    latencies: dict[int, list[int]] = {}
    for code, second, _, latency, reported in sends:
        if second is None:
            continue
        epoch = T0_US // 1_000_000 + second
        row = seconds.setdefault(
            epoch,
            {
                "sent": 0,
                **{f"{prefix}{s}": 0 for prefix in ("", "reported_") for s in STATUS.values() if s},
                "unknown_statuses": 0,
            },
        )
        row["sent"] += 1
        if STATUS[code] is None:
            row["unknown_statuses"] += 1
        else:
            row[STATUS[code]] += 1
            row[f"reported_{STATUS[code]}"] += int(reported)
        if STATUS[code] == "ok" and latency is not None:
            latencies.setdefault(epoch, []).append(latency)
    for epoch, row in seconds.items():
        row["ack_latency_p50_ms"] = _nearest_rank(latencies.get(epoch, []), 0.5)
        row["ack_latency_p99_ms"] = _nearest_rank(latencies.get(epoch, []), 0.99)
    return seconds


@pytest.mark.property
@given(st.lists(SEND, max_size=40))
@example([(1, 0, 5, 10, True), (1, 0, 6, WIDE, True), (1, 2, 0, 3, False)])
@example([(1, 1, 0, lat, True) for lat in range(100, 0, -1)])  # p99 of 100 is the 99th
@example([(2, 0, 0, None, True), (0, 3, 0, None, False)])
@example([(1, 0, 0, 0, True), (1, 0, 1, 1 << 40, True)])  # a range of exactly 40 bits
@example([(1, 0, 0, -(1 << 40), True), (1, 0, 1, 0, True)])  # an ack stamped before its send
def test_the_timeline_is_the_sends_per_second(
    sends: list[tuple[int, int | None, int, int | None, bool]],
) -> None:
    seconds, counts, contract = send_facts(_acked(sends))
    assert seconds == _oracle(sends)
    assert list(seconds) == sorted(seconds)
    statuses = [STATUS[code] for code, *_ in sends]
    assert counts == {
        "sent": len(sends),
        "acked": statuses.count("ok"),
        "failed": statuses.count("failed"),
        "indeterminate": statuses.count("indeterminate"),
    }
    assert contract == {
        "unknown_statuses": statuses.count(None),
        **{
            f"reported_{s}": sum(1 for st_, send in zip(statuses, sends, strict=True)
                                 if st_ == s and send[4])
            for s in ("ok", "failed", "indeterminate")
        },
    }  # fmt: skip


def test_percentiles_are_the_nearest_rank_in_milliseconds() -> None:
    sends = [(1, 0, i, lat, True) for i, lat in enumerate([4000, 1000, 3000, 2000])]
    sends.append((2, 0, 9, 99_999, True))  # a failed send's time is not a latency
    (row,) = send_facts(_acked(sends))[0].values()
    assert (row["ack_latency_p50_ms"], row["ack_latency_p99_ms"]) == (2.0, 4.0)


def test_anomaly_seconds_are_added_only_to_seconds_with_sends() -> None:
    seconds: dict[int, dict[str, Any]] = {5: {"sent": 1}, 6: {"sent": 2, "missing": 9}}
    add_anomaly_seconds(seconds, {6: {"missing": 1, "duplicated": 2}, 7: {"missing": 3}})
    assert seconds == {5: {"sent": 1}, 6: {"sent": 2, "missing": 1, "duplicated": 2}}


# ---------------------------------------------------------------------------------------------
# The columns the checker reads, from hand-made Arrow tables


def test_acked_and_readback_tables_become_the_checkers_arrays() -> None:
    import pyarrow as pa

    from analysis.checks.arrays import SLOT_BITS, slot_of
    from analysis.checks.messages.columns import NO_ID, Reads, distinct, max_of

    acked = pa.table(
        {
            "msg_id": pa.array([5, None, 7, 8], pa.int64()),
            "status": pa.array(["ok", "failed", "weird", None]),
            "partition": pa.array([0, -1, None, 2], pa.int32()),
            "offset": pa.array([10, 3, -1001, None], pa.int64()),
            "error": pa.array([None, "boom", "no delivery report", None]),
            "send_ts_us": pa.array([100, None, 300, 400], pa.int64()),
            "ack_ts_us": pa.array([150, 250, None, 450], pa.int64()),
        }
    )
    with warnings.catch_warnings():  # nulls are filled as markers, never cast from NaN
        warnings.simplefilter("error")
        a = Acked.of(acked)
    assert a.msg_id.tolist() == [5, NO_ID, 7, 8]
    assert a.identified.tolist() == [True, False, True, True]
    assert a.status.tolist() == [1, 2, 0, 0]  # ok, failed, unknown, null
    assert a.partition.tolist() == [0, NULL, NULL, 2]
    assert a.offset.tolist() == [10, 3, NULL, NULL]
    assert a.send_ts.tolist() == [100, NONE_TS, 300, 400]
    assert a.ack_ts.tolist() == [150, 250, NONE_TS, 450]
    assert a.reported.tolist() == [True, True, False, True]
    assert a.msg_id.dtype == np.int64 and a.offset.dtype == np.int64

    readback = pa.table(
        {
            "msg_id": pa.array([9, 9, None, 4], pa.int64()),
            "key": pa.array(["k9", "k9-again", "kx", "k4"]),
            "key_seq": pa.array([2, 2, None, 1], pa.int64()),
            "partition": pa.array([1, 1, 0, 0], pa.int32()),
            "offset": pa.array([7, 7, 3, 2], pa.int64()),
        }
    )
    r = Reads.of(readback)
    assert r.n == 3  # (1, 7) read twice is one record
    assert r.partition.tolist() == [0, 0, 1]
    assert r.offset.tolist() == [2, 3, 7]
    assert r.slot.tolist() == [2, 3, (1 << SLOT_BITS) + 7]
    assert r.msg_id.tolist() == [4, NO_ID, 9]
    assert r.identified.tolist() == [True, False, True]
    assert r.key.to_pylist() == ["k4", "kx", "k9"]  # the first row of a record read twice
    assert r.key_seq.tolist() == [1, 0, 2]
    assert r.has_seq.tolist() == [True, False, True]
    assert slot_of(np.array([2]), np.array([5])).tolist() == [(2 << 40) + 5]
    assert distinct(np.array([1, 1, 2, 5, 5, 5, 9])).tolist() == [1, 2, 5, 9]
    assert distinct(np.array([], dtype=np.int64)).tolist() == []
    assert (max_of(np.array([3, 9, 2])), max_of(np.array([], dtype=np.int64))) == (9, -1)


def test_a_read_back_record_without_a_partition_or_offset_is_at_null() -> None:
    import pyarrow as pa

    from analysis.checks.messages.columns import Reads

    readback = pa.table(
        {
            "msg_id": pa.array([1, 2, 3], pa.int64()),
            "key": pa.array(["k1", "k2", "k3"]),
            "key_seq": pa.array([0, 0, 0], pa.int64()),
            "partition": pa.array([None, 0, 1], pa.int32()),
            "offset": pa.array([4, None, 2], pa.int64()),
        }
    )
    r = Reads.of(readback)
    located = sorted(zip(r.msg_id.tolist(), r.partition.tolist(), r.offset.tolist(), strict=True))
    assert located == [(1, NULL, 4), (2, 0, NULL), (3, 1, 2)]
