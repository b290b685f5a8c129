"""Cell statistics: mean, min, max and sum of each count over a cell's repetitions, and its
rates; the one per-cell computation every table and chart reads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeGuard, cast

from analysis.judge.outcomes import CellStats, CountStats
from analysis.model.anomalies import (
    COUNT_NAMES,
    LOSS_CLASSES,
    AnomalyName,
    CountKey,
    CountName,
    loss_of,
)
from analysis.model.results import RunResult


def cell_stats(results_of_cell: Sequence[RunResult]) -> CellStats:
    """Mean/min/max/sum per count and of the loss figure over repetitions with counts; rates.

    The one per-cell computation: the matrix, the chart, the tables and reconcile's command
    line all read it.
    """
    rows = [
        {**counts, CountName.LOSS: loss_of(counts)}
        for counts in (r.counts for r in results_of_cell)
        if isinstance(counts, Mapping) and all(is_count(counts.get(n)) for n in LOSS_CLASSES)
    ]
    stats: dict[str, CountStats] = {}
    for name in (*COUNT_NAMES, CountName.LOSS):
        values = [v for v in (row.get(name) for row in rows) if is_count(v)]
        if values:
            total = sum(values)
            stats[name] = CountStats(total / len(values), min(values), max(values), total)
    return CellStats(
        repetitions=len(results_of_cell),
        counted=len(rows),
        counts=stats,
        loss_rate=_rate(rows, CountName.LOSS),
        divergence_rate=_rate(rows, AnomalyName.OFFSET_DIVERGENT),
    )


def is_count(value: object) -> TypeGuard[int]:
    """True for a non-negative int that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _rate(rows: Sequence[Mapping[str, object]], name: CountKey) -> float | None:
    """sum(name) / sum(acked) over rows with both counts; None when nothing was acked."""
    acked_name = CountName.ACKED
    usable = [r for r in rows if is_count(r.get(name)) and is_count(r.get(acked_name))]
    acked = sum(cast(int, r[acked_name]) for r in usable)
    if acked == 0:
        return None
    return sum(cast(int, r[name]) for r in usable) / acked
