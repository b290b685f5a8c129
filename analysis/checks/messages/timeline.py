"""The send timeline and the counts every run has: sends by status per second, ack latency
percentiles, and per second the acknowledged messages later missing or duplicated."""

from __future__ import annotations

from typing import Any

import numpy as np

from analysis.checks.arrays import SLOT_BITS
from analysis.checks.messages.classes import Masks, loss_mask
from analysis.checks.messages.columns import CODE, NONE_TS, Acked
from analysis.checks.messages.index import Messages
from analysis.model.anomalies import STATUS_COUNTS, AnomalyName, CountName
from analysis.model.results import MISSING
from harness.rundir.records import STATUSES, Status

LATENCY_PERCENTILES = {"ack_latency_p50_ms": 0.5, "ack_latency_p99_ms": 0.99}


def send_facts(acked: Acked) -> tuple[dict[int, dict[str, Any]], dict[str, int], dict[str, int]]:
    """Per epoch second of send: sends by status, reported sends by status, unknown statuses and
    ack latency percentiles; and the run's send counts and status contract facts."""
    counts = {CountName.SENT: len(acked.status)} | status_counts(acked)
    contract = {"unknown_statuses": int(np.count_nonzero(acked.status == 0))}
    for status in STATUSES:
        contract[f"reported_{status}"] = int(
            np.count_nonzero((acked.status == CODE[status]) & acked.reported)
        )
    return _seconds(acked), counts, contract


def status_counts(acked: Acked) -> dict[str, int]:
    """acked, failed and indeterminate: the rows of each status (STATUS_COUNTS)."""
    return {
        name: int(np.count_nonzero(acked.status == CODE[status]))
        for status, name in STATUS_COUNTS.items()
    }


def _seconds(acked: Acked) -> dict[int, dict[str, Any]]:
    """The timeline entries of the seconds that had sends (sends without a time are counted
    in the run's totals, never charted)."""
    timed = acked.send_ts != NONE_TS
    if not timed.any():
        return {}
    second = acked.send_ts[timed] // 1_000_000
    first = int(second.min())
    bins = second - first
    width = int(bins.max()) + 1
    status = acked.status[timed]

    def per_second(mask: np.ndarray | None = None) -> np.ndarray:
        return np.bincount(bins if mask is None else bins[mask], minlength=width)

    columns: dict[str, np.ndarray] = {CountName.SENT: per_second()}
    for name, code in CODE.items():
        columns[name] = per_second(status == code)
        columns[f"reported_{name}"] = per_second((status == code) & acked.reported[timed])
    columns["unknown_statuses"] = per_second(status == 0)
    latency = _latency_percentiles(acked, width, first)
    return {
        int(first + b): {name: int(values[b]) for name, values in columns.items()}
        | {name: latency[name][b] for name in LATENCY_PERCENTILES}
        for b in np.flatnonzero(columns[CountName.SENT])
    }


def _latency_percentiles(acked: Acked, width: int, first: int) -> dict[str, list[float | None]]:
    """Per second bin: the nearest-rank percentiles of ok sends' ack latency, in ms (None when
    the second had no acknowledged send with both times)."""
    ok = (acked.status == CODE[Status.OK]) & (acked.send_ts != NONE_TS) & (acked.ack_ts != NONE_TS)
    bins = acked.send_ts[ok] // 1_000_000 - first
    latency_us = acked.ack_ts[ok] - acked.send_ts[ok]
    if not len(latency_us):
        return {name: [None] * width for name in LATENCY_PERCENTILES}
    lowest = int(latency_us.min())
    if int(latency_us.max()) - lowest < 1 << SLOT_BITS:  # one int64 per send: a fast plain sort
        packed = np.sort((bins << SLOT_BITS) + (latency_us - lowest))
        bins, latency_us = packed >> SLOT_BITS, (packed & ((1 << SLOT_BITS) - 1)) + lowest
    else:
        order = np.lexsort((latency_us, bins))
        bins, latency_us = bins[order], latency_us[order]
    sizes = np.bincount(bins, minlength=width)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    result: dict[str, list[float | None]] = {}
    for name, p in LATENCY_PERCENTILES.items():
        rank = np.maximum(np.ceil(p * sizes).astype(np.int64), 1) - 1
        picked = latency_us[np.minimum(starts + rank, len(latency_us) - 1)] / 1000.0
        result[name] = [float(v) if n else None for v, n in zip(picked, sizes, strict=True)]
    return result


def add_anomaly_seconds(
    seconds: dict[int, dict[str, Any]], anomalies: dict[int, dict[str, int]]
) -> None:
    """Add to each timeline second its entry of `anomaly_seconds` (seconds without sends, which
    the timeline does not chart, are left out)."""
    for second, row in anomalies.items():
        if second in seconds:
            seconds[second].update(row)


def anomaly_seconds(classes: Masks, messages: Messages) -> dict[int, dict[str, int]]:
    """Per epoch second of send: the acked messages sent then and later missing or duplicated
    (TIMELINE_ANOMALIES), only the nonzero counts."""
    out: dict[int, dict[str, int]] = {}
    duplicated = AnomalyName.DUPLICATED
    for what, mask in ((MISSING, loss_mask(classes)), (duplicated, classes[duplicated])):
        timed = mask & (messages.send_ts != NONE_TS)
        values, counts = np.unique(messages.send_ts[timed] // 1_000_000, return_counts=True)
        for second, count in zip(values.tolist(), counts.tolist(), strict=True):
            out.setdefault(second, {})[what] = count
    return out
