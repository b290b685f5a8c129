"""The verdict matrix's rows and the price of safety beside the counts (typed views every
rendering formats once)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from analysis.crossrun.price import CellPrice, cell_price
from analysis.judge.findings import run_origin_us
from analysis.judge.outcomes import (
    CellVerdict,
    Events,
)
from analysis.model.anomalies import ANOMALIES, ANOMALY_NAMES, CountKey, CountName
from analysis.model.availability import Availability, HealRecovery, Latency
from analysis.model.results import RunResult
from analysis.report.views import (
    config_parts,
    css_class,
    format_rate,
    slug,
    stat_parts,
)

# The matrix: sends, the one loss figure, then every anomaly class of the registry. A report
# shows the loss figure first (beside the verdict, with its rate and the price of safety),
# then the sends, then the classes some cell counted (matrix_counts).
MATRIX_COUNTS: Final[tuple[CountKey, ...]] = (
    CountName.SENT,
    CountName.ACKED,
    CountName.LOSS,
    *ANOMALY_NAMES,
)
# The count columns after the loss figure, every one.
AFTER_LOSS: Final[tuple[CountKey, ...]] = tuple(n for n in MATRIX_COUNTS if n != CountName.LOSS)
# Always shown, even when zero everywhere: what was sent and acknowledged.
KEPT_COUNTS: Final[frozenset[CountKey]] = frozenset({CountName.SENT, CountName.ACKED})
# The matrix's counts shown loudly when non-zero (the serious ones in red): the loss figure
# and the anomaly classes.
FLAGGED: Final[frozenset[CountKey]] = frozenset({CountName.LOSS, *ANOMALY_NAMES})
SERIOUS: Final[frozenset[CountKey]] = frozenset(
    {CountName.LOSS, *(a.name for a in ANOMALIES if a.serious)}
)
# The price of safety beside the counts (analysis.checks.availability): (label, what it means).
PRICE_LABELS: Final = (
    (
        "partition stall (s)",
        "longest time one partition went without an acknowledged send, from the delivery "
        "reports' arrival times (max over partitions and repetitions)",
    ),
    (
        "topic stall (s)",
        "longest time no partition acknowledged anything (max over repetitions)",
    ),
    (
        "failed sends",
        "sends refused with a definite error, summed over repetitions (below: indeterminate "
        "sends, whose outcome is unknown)",
    ),
    (
        "first ack after heal (s)",
        "time from a heal until every partition had acknowledged a send again (max over heals "
        "during the workload and repetitions)",
    ),
)

# ---------------------------------------------------------------------------------------------
# The matrix


@dataclass(frozen=True)
class MatrixValue:
    """One count of a matrix row: its value, its min–max range, how loudly to show it."""

    text: str
    range: str
    level: str  # "", "notable" or "serious"


@dataclass(frozen=True)
class MatrixRow:
    """One cell in the matrix."""

    slug: str
    cell: str
    experiment: str
    config: tuple[str, ...]
    loss: MatrixValue  # the one loss figure, shown first
    values: tuple[MatrixValue, ...]  # the columns matrix_counts chose, in its order
    loss_rate: str
    repetitions: int
    verdict: str
    css: str
    price: tuple[MatrixValue, ...] = ()  # PRICE_LABELS' columns; () without results


@dataclass(frozen=True)
class MatrixCounts:
    """The count columns a report's matrix shows after the loss figure, and those it folds
    because they are zero (or not counted) in every cell."""

    shown: tuple[CountKey, ...]
    folded: tuple[CountKey, ...]


def matrix_counts(cells: Sequence[CellVerdict]) -> MatrixCounts:
    """MATRIX_COUNTS less the loss figure (shown first on its own), folding every class that
    no cell counted above zero; sent and acked are always shown."""
    shown = tuple(n for n in AFTER_LOSS if n in KEPT_COUNTS or any(_counted(c, n) for c in cells))
    return MatrixCounts(shown, tuple(n for n in AFTER_LOSS if n not in shown))


def _counted(cell: CellVerdict, name: CountKey) -> bool:
    """Some repetition of the cell counted `name` above zero."""
    stat = cell.stats.counts.get(name)
    return stat is not None and stat.max > 0


def _value(cell: CellVerdict, name: CountKey) -> MatrixValue:
    """One count of the cell as the matrix shows it, loud when a flagged count is non-zero."""
    stat = cell.stats.counts.get(name)
    level = ""
    if name in FLAGGED and stat is not None and stat.max > 0:
        level = "serious" if name in SERIOUS else "notable"
    value, spread = stat_parts(stat, cell.stats.counted)
    return MatrixValue(value, spread, level)


def matrix_row(
    cell: CellVerdict,
    results_by_run: Mapping[str, RunResult] | None = None,
    counts: Sequence[CountKey] = AFTER_LOSS,
) -> MatrixRow:
    """The matrix row of one cell: its loss figure, then the `counts` columns (every one by
    default; a report passes matrix_counts' shown); with the results, its price of safety."""
    return MatrixRow(
        slug=slug(cell),
        cell=cell.cell,
        experiment=cell.experiment,
        config=tuple(config_parts(cell.config)),
        loss=_value(cell, CountName.LOSS),
        values=tuple(_value(cell, name) for name in counts),
        loss_rate=format_rate(cell.stats.loss_rate),
        repetitions=len(cell.repetitions),
        verdict=cell.verdict.value,
        css=css_class(cell.verdict),
        price=() if results_by_run is None else price_texts(price_of(cell, results_by_run)),
    )


def price_of(cell: CellVerdict, results_by_run: Mapping[str, RunResult]) -> CellPrice:
    """The cell's price of safety over its repetitions, with why any was not measured."""
    availabilities: list[Availability | None] = []
    problems = []
    for rep in cell.repetitions:
        result = results_by_run.get(rep.run_dir)
        availability = None if result is None else result.availability
        availabilities.append(availability)
        if availability is None:
            why = (result.availability_error if result else None) or "not measured"
            problems.append(f"repetition {rep.repetition}: {why}")
    return cell_price(availabilities, problems)


def price_texts(price: CellPrice) -> tuple[MatrixValue, ...]:
    """The PRICE_LABELS columns of a cell, '—' where nothing was measured."""
    partial = f"{price.measured} of {price.repetitions} reps" if price.unmeasured else ""
    failed = "—" if price.failed is None else f"{price.failed:,}"
    indeterminate = f"{price.indeterminate:,} indeterminate" if price.indeterminate else ""
    never = price.heals_without_ack
    heal_note = f"{never} heal{'s' if never > 1 else ''} with no ack after" if never else ""
    recovery = _seconds(price.first_ack_after_heal_s)
    if never and price.first_ack_after_heal_s is None:
        recovery = "never"
    return (
        MatrixValue(_seconds(price.longest_partition_gap_s), partial, ""),
        MatrixValue(_seconds(price.longest_gap_s), "", ""),
        MatrixValue(failed, indeterminate, "notable" if price.failed else ""),
        MatrixValue(recovery, heal_note, "notable" if never else ""),
    )


def _seconds(value: float | None) -> str:
    """Seconds with one decimal, '—' for none."""
    return "—" if value is None else f"{value:,.1f}"


def availability_text(result: RunResult | None, events: Events) -> str | None:
    """One sentence of a repetition's price of safety, times on its timeline's clock; or why
    it was not measured; None without a result."""
    if result is None:
        return None
    a = result.availability
    if a is None:
        return f"price of safety not measured: {result.availability_error or 'no figures'}"
    origin_us = run_origin_us(result, events)

    def t(ts_us: int) -> str:
        return f"{(ts_us - origin_us) / 1e6:.1f}"

    parts = []
    worst = a.longest_partition_gap
    if worst is not None:
        gap = worst.longest_gap
        parts.append(
            f"longest stall of one partition {gap.seconds:.1f} s (partition {worst.partition}, "
            f"t={t(gap.start_us)}–{t(gap.end_us)} s)"
        )
    if a.longest_gap is not None:
        gap = a.longest_gap
        parts.append(
            f"no partition acknowledged anything for {gap.seconds:.1f} s "
            f"(t={t(gap.start_us)}–{t(gap.end_us)} s)"
        )
    parts.append(f"{a.failed:,} failed and {a.indeterminate:,} indeterminate sends")
    for heal in a.heals:
        if heal.during_workload:
            parts.append(f"after the heal at t={t(heal.heal_us)} s {_recovery(heal)}")
    parts.extend(_latency_texts(a))
    return "price of safety: " + "; ".join(parts)


def _latency_texts(a: Availability) -> list[str]:
    """Produce latency during each fault that saw sends, beside the latency outside faults."""
    outside = a.latency_outside_faults
    if not a.fault_latency or outside is None:
        return []

    def ms(latency: Latency) -> str:
        return f"p50 {latency.p50_ms:,.0f} ms, p99 {latency.p99_ms:,.0f} ms"

    texts = [
        f"sends during {f.fault} (fault {f.fault_id}) acked in {ms(f.latency)}"
        for f in a.fault_latency
        if f.latency.sends
    ]
    if outside.sends:
        texts.append(f"outside every fault in {ms(outside)}")
    return texts


def _recovery(heal: HealRecovery) -> str:
    """How acknowledged sends came back after a heal, in words."""
    if heal.first_ack_s is None:
        return "no send was acknowledged before the workload ended"
    every = heal.every_partition_s
    rest = (
        f"every partition after {every:.1f} s"
        if every is not None
        else "some partition never again before the workload ended"
    )
    return f"the first ack came after {heal.first_ack_s:.1f} s, {rest}"
