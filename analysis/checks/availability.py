"""The price of safety: how long a repetition's writes went unacknowledged, and what failed.

A configuration that never loses acknowledged data pays in availability; this module measures
that price from one run directory, so every report can show it beside the loss figure.

Clocks. Every time here is epoch µs of the harness host's wall clock, the clock both
acked.parquet and events.jsonl are written with (`harness.rundir.events.now_us`):

- an ok send's moment is its `ack_ts_us`: when the producer served its delivery report (the
  journal stamps all reports of one poll with one time, so within a poll interval, ≤ 0.1 s,
  of the report's arrival);
- the workload window runs from the `workload-start` phase event (written just before the
  first send) to the `workload-end` one (written after the producer drained or purged its last
  reports). Without those events (a crashed run) it runs from the first `send_ts_us` to the
  latest send or ack time recorded. An ack outside the window counts at its edge.
- a heal's moment is its `fault_end` event's `ts_us`, written when the heal commands returned.

Figures (`Availability`):

- a **gap** of a set of partitions: the longest interval inside the workload window in which
  none of them acknowledged a send: between consecutive ok ack times, from the window's start
  to the first ack, or from the last ack to the window's end (the whole window if none came).
  Per partition (`PartitionAvailability.longest_gap`) and over all partitions merged
  (`Availability.longest_gap`: the longest time during which no partition acknowledged
  anything). A partition is one some row of acked.parquet names; a partition no send was
  routed to has no row, and no figure.
- `failed` / `indeterminate`: sends with that status, per partition where the delivery report
  named one, and `*_without_partition` for those it did not (no report, or failed before a
  partition was assigned).
- per heal (`HealRecovery`): seconds from the heal to the first ok ack at or after it, on any
  partition and on each partition, and to the moment every partition had acknowledged again;
  None when none came before the recording ended.
- produce latency (`Latency`: ack time minus send time of ok sends, nearest-rank p50 and p99)
  per fault (`FaultLatency`: the sends made from its injection, the fault_start's
  `injected_us`, to its heal, the fault_end's `ts_us`, or to the window's end without one),
  and of the sends made outside every fault: what a delay fault cost a client, measured.

Pure: reads acked.parquet (four columns, vectorised, no per-row Python) and events.jsonl.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analysis.checks.arrays import filled_ints
from analysis.model.availability import (
    Availability,
    AvailabilityError,
    FaultLatency,
    Gap,
    HealRecovery,
    Latency,
    PartitionAvailability,
)
from analysis.model.evidence import RunEvidence
from harness.rundir import layout
from harness.rundir.records import Status

COLUMNS: Final = ("status", "partition", "send_ts_us", "ack_ts_us")
# Stands for a null partition inside the numpy arrays; librdkafka's "unassigned" is -1 too,
# so every negative partition reads as none.
NO_PARTITION: Final = -1
WORKLOAD_START: Final = "workload-start"
WORKLOAD_END: Final = "workload-end"


# ---------------------------------------------------------------------------------------------
# Measuring one run directory


@dataclass(frozen=True)
class _Window:
    """The workload window in epoch µs, and whether the phase events placed it."""

    start_us: int
    end_us: int
    from_events: bool

    def gap(self, acks_sorted: np.ndarray) -> Gap:
        """The longest gap between the window's edges and the sorted ack times inside it."""
        inner = np.clip(acks_sorted, self.start_us, self.end_us)
        edges = np.concatenate(([self.start_us], inner, [self.end_us])).astype(np.int64)
        i = int(np.argmax(np.diff(edges)))
        return self.gap_between(int(edges[i]), int(edges[i + 1]))

    def gap_between(self, start_us: int, end_us: int) -> Gap:
        """A gap with its moments also in seconds since the window's start."""
        return Gap(start_us, end_us, self.seconds_of(start_us), self.seconds_of(end_us))

    def seconds_of(self, ts_us: int) -> float:
        """Seconds since the window's start."""
        return (ts_us - self.start_us) / 1e6


@dataclass(frozen=True)
class _Rows:
    """acked.parquet as numpy arrays: status masks, partitions (-1: none) and times."""

    ok: np.ndarray
    failed: np.ndarray
    indeterminate: np.ndarray
    partition: np.ndarray
    send_us: np.ndarray  # 0 where null
    ack_us: np.ndarray  # 0 where null
    has_ack: np.ndarray


def availability_of(evidence: RunEvidence) -> Availability:
    """The price of safety of one repetition; AvailabilityError when acked.parquet is unusable."""
    rows = _read_rows(evidence.run_dir / layout.ACKED)
    window = _window(evidence, rows)
    acked = rows.ok & rows.has_ack
    ack_partition, ack_us = rows.partition[acked], rows.ack_us[acked]
    order = np.lexsort((ack_us, ack_partition))
    ack_partition, ack_us = ack_partition[order], ack_us[order]
    named = _partitions(rows) if window is not None else []
    by_partition = _split_by_partition(ack_partition, ack_us, named)
    all_acks = np.sort(ack_us)
    partitions = _partition_figures(by_partition, rows, window) if window is not None else ()
    no_partition = rows.partition < 0
    fault_latency, latency_outside_faults = _latencies(evidence, rows, window)
    return Availability(
        workload_start_us=None if window is None else window.start_us,
        workload_end_us=None if window is None else window.end_us,
        window_from_events=window is not None and window.from_events,
        ok=int(rows.ok.sum()),
        failed=int(rows.failed.sum()),
        indeterminate=int(rows.indeterminate.sum()),
        failed_without_partition=int((rows.failed & no_partition).sum()),
        indeterminate_without_partition=int((rows.indeterminate & no_partition).sum()),
        longest_gap=None if window is None else window.gap(all_acks),
        partitions=partitions,
        heals=tuple(_recoveries(evidence, all_acks, by_partition, window)),
        fault_latency=fault_latency,
        latency_outside_faults=latency_outside_faults,
    )


def latency_of(latency_us: np.ndarray) -> Latency:
    """Count and nearest-rank p50/p99 (ms) of the latencies in `latency_us` (any order)."""
    if not len(latency_us):
        return Latency(0, None, None)
    ordered = np.sort(latency_us)

    def rank(q: float) -> float:
        return float(ordered[max(0, int(np.ceil(q * len(ordered))) - 1)]) / 1000.0

    return Latency(len(ordered), rank(0.50), rank(0.99))


def _latencies(
    evidence: RunEvidence, rows: _Rows, window: _Window | None
) -> tuple[tuple[FaultLatency, ...], Latency | None]:
    """(`fault_latency`, `latency_outside_faults`) of Availability (module docstring)."""
    timed = rows.ok & rows.has_ack & (rows.send_us > 0)
    send_us = rows.send_us[timed]
    latency_us = rows.ack_us[timed] - send_us
    healed = {e.fault_id: e.ts_us for e in evidence.fault_ends if e.ts_us is not None}
    end_of_run = window.end_us if window is not None else (_last(send_us) or 0)
    outside = np.ones(len(send_us), dtype=bool)
    faults = []
    for start in evidence.fault_starts:
        begin = start.injected_us or start.ts_us
        if begin is None:
            continue
        end = healed.get(start.fault_id, end_of_run)
        inside = (send_us >= begin) & (send_us < end)
        outside &= ~inside
        faults.append(
            FaultLatency(
                start.fault_id, start.fault or "", begin, end, latency_of(latency_us[inside])
            )
        )
    return tuple(faults), latency_of(latency_us[outside]) if len(send_us) else None


def price_of_safety(evidence: RunEvidence) -> tuple[Availability | None, str | None]:
    """(its availability, None) for one repetition, or (None, why) when it cannot be measured.
    Never raises: one unreadable run must not stop the analysis of the others."""
    try:
        return availability_of(evidence), None
    except Exception as exc:
        return None, f"{type(exc).__name__}: {exc}"


def _read_rows(path: Path) -> _Rows:
    """The four columns the figures need, as numpy arrays; AvailabilityError if unreadable."""
    if not path.is_file():
        raise AvailabilityError(f"no {path.name} in {path.parent}: nothing to measure")
    try:
        table = pq.read_table(path, columns=list(COLUMNS))
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise AvailabilityError(f"{path} cannot be read: {exc}") from exc
    status = table["status"]
    return _Rows(
        ok=_mask(status, Status.OK),
        failed=_mask(status, Status.FAILED),
        indeterminate=_mask(status, Status.INDETERMINATE),
        partition=np.maximum(filled_ints(table["partition"], NO_PARTITION), NO_PARTITION),
        send_us=filled_ints(table["send_ts_us"], 0),
        ack_us=filled_ints(table["ack_ts_us"], 0),
        has_ack=pc.is_valid(table["ack_ts_us"]).to_numpy(zero_copy_only=False),
    )


def _mask(status: pa.ChunkedArray, value: Status) -> np.ndarray:
    """Rows whose status is `value` (a null status matches nothing)."""
    matches = pc.fill_null(pc.equal(status, value.value), False)
    mask: np.ndarray = matches.to_numpy(zero_copy_only=False).astype(bool)
    return mask


def _window(evidence: RunEvidence, rows: _Rows) -> _Window | None:
    """The workload window from the phase events, else from the rows; None if neither."""
    starts = evidence.phase_stamps(WORKLOAD_START)
    ends = evidence.phase_stamps(WORKLOAD_END)
    sends, acks = rows.send_us[rows.send_us > 0], rows.ack_us[rows.has_ack]
    start = min(starts) if starts else _first(sends, acks)
    end = max(ends) if ends else _last(sends, acks)
    if start is None or end is None:
        return None
    return _Window(start, max(start, end), from_events=bool(starts and ends))


def _first(*stamps: np.ndarray) -> int | None:
    """The earliest time in any of the arrays; None if all are empty."""
    found = [int(a.min()) for a in stamps if len(a)]
    return min(found) if found else None


def _last(*stamps: np.ndarray) -> int | None:
    """The latest time in any of the arrays; None if all are empty."""
    found = [int(a.max()) for a in stamps if len(a)]
    return max(found) if found else None


def _partitions(rows: _Rows) -> list[int]:
    """Every partition some row names, ascending."""
    named = np.unique(rows.partition)
    return [int(p) for p in named if p >= 0]


def _split_by_partition(
    partition_sorted: np.ndarray, acks_sorted: np.ndarray, partitions: Sequence[int]
) -> dict[int, np.ndarray]:
    """Each partition's ack times (sorted), from arrays sorted by (partition, ack time)."""
    lo = np.searchsorted(partition_sorted, partitions, side="left")
    hi = np.searchsorted(partition_sorted, partitions, side="right")
    return {p: acks_sorted[a:b] for p, a, b in zip(partitions, lo, hi, strict=True)}


def _partition_figures(
    by_partition: Mapping[int, np.ndarray], rows: _Rows, window: _Window
) -> tuple[PartitionAvailability, ...]:
    """Each partition's counts and longest gap (the whole window when it acked nothing)."""
    ok, failed, indeterminate = (
        _count_by_partition(rows.partition[mask])
        for mask in (rows.ok, rows.failed, rows.indeterminate)
    )
    return tuple(
        PartitionAvailability(
            partition=p,
            ok=ok.get(p, 0),
            failed=failed.get(p, 0),
            indeterminate=indeterminate.get(p, 0),
            longest_gap=window.gap(acks),
        )
        for p, acks in by_partition.items()
    )


def _count_by_partition(partitions: np.ndarray) -> dict[int, int]:
    """How many entries name each partition."""
    values, counts = np.unique(partitions, return_counts=True)
    return {int(v): int(n) for v, n in zip(values, counts, strict=True)}


def _recoveries(
    evidence: RunEvidence,
    all_acks: np.ndarray,
    by_partition: Mapping[int, np.ndarray],
    window: _Window | None,
) -> list[HealRecovery]:
    """One HealRecovery per fault_end event, in time order."""
    stamped = [(e.ts_us, e) for e in evidence.fault_ends if e.ts_us is not None]
    recoveries = []
    for heal_us, heal in sorted(stamped, key=lambda pair: pair[0]):
        recoveries.append(
            HealRecovery(
                fault_id=heal.fault_id,
                fault=heal.fault or "",
                heal_us=heal_us,
                heal_s=None if window is None else window.seconds_of(heal_us),
                during_workload=window is not None and window.start_us <= heal_us < window.end_us,
                first_ack_s=_first_ack_after(all_acks, heal_us),
                first_ack_by_partition={
                    p: _first_ack_after(acks, heal_us) for p, acks in by_partition.items()
                },
            )
        )
    return recoveries


def _first_ack_after(acks_sorted: np.ndarray, ts_us: int) -> float | None:
    """Seconds from ts_us to the first ack time at or after it; None if there is none."""
    i = int(np.searchsorted(acks_sorted, ts_us, side="left"))
    return None if i == len(acks_sorted) else (int(acks_sorted[i]) - ts_us) / 1e6
