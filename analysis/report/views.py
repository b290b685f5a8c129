"""What the renderings show, as typed view models: the matrix rows, each cell with its
repetitions, and the provenance of the runs; plus the formatting they share.

HTML, Markdown and report.json all read these, so a figure or a word is formatted once.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from markupsafe import Markup

from analysis.crossrun.price import CellPrice, cell_price
from analysis.judge.findings import run_origin_us
from analysis.judge.guarantees import ALLOWED, FORBIDDEN, Guarantee
from analysis.judge.outcomes import (
    VERDICT_MEANING,
    CellVerdict,
    CountStats,
    Events,
    RepetitionVerdict,
    Verdict,
)
from analysis.judge.verdicts import exit_code
from analysis.model.anomalies import ANOMALIES as ANOMALY_REGISTRY
from analysis.model.anomalies import ANOMALY_NAMES, LOSS_CLASSES
from analysis.model.attribution import Attribution, Place
from analysis.model.availability import Availability, HealRecovery
from analysis.model.results import RunResult, Sensitivity
from analysis.report.charts import percent, timeline_svg
from analysis.report.marks import fault_windows
from analysis.report.safe import PartFailure, safely
from harness.rundir.config import CellConfig
from harness.rundir.provenance import RunProvenance

__all__ = [
    "COUNT_LABELS",
    "MATRIX_COUNTS",
    "PRICE_LABELS",
    "CellView",
    "MatrixRow",
    "MatrixValue",
    "ProvenanceView",
    "RepetitionView",
    "cell_view",
    "config_summary",
    "format_rate",
    "format_stat",
    "matrix_row",
    "price_of",
    "price_texts",
    "provenance_views",
    "verdict_counts",
    "verdict_summary",
]

# The matrix: sends, the one loss figure, then every anomaly class of the registry.
MATRIX_COUNTS: Final = ("sent", "acked", "loss", *ANOMALY_NAMES)
COUNT_LABELS: Final = {
    "sent": ("sent", "messages the producer tried to send"),
    "acked": ("acked", "sends that ended in a successful delivery report"),
    "loss": ("loss", "distinct acknowledged messages missing from the final read-back"),
    **{a.name: (a.label, a.meaning) for a in ANOMALY_REGISTRY},
}
ANOMALIES: Final = frozenset(ANOMALY_NAMES) | {"loss"}
SERIOUS: Final = frozenset({"loss", *(a.name for a in ANOMALY_REGISTRY if a.serious)})
EXAMPLE_CLASSES: Final = (*LOSS_CLASSES, "offset_divergent")
EXAMPLE_ROWS: Final = 20
NOT_RECORDED: Final = "not recorded"
# How each place of analysis.checks.attribution reads in a sentence.
ATTRIBUTION_PHRASES: Final = {
    Place.ON_NO_DISK: "on no broker's disk (Kafka lost them)",
    Place.ON_DISK_NOT_SERVED: "on a broker's disk, yet not read back",
    Place.SEGMENTS_UNAVAILABLE: "cannot say (segments not kept or not readable)",
    Place.NOT_EXAMINED: "not examined (beyond the bound)",
}


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
# Formatting shared by the renderings


def _fmt_int(value: float) -> str:
    """Integers with thousands separators, other numbers with one decimal."""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,.1f}"


def stat_parts(stat: CountStats | None, counted: int) -> tuple[str, str]:
    """(value, 'min–max') of a count; the range is '' for one repetition or agreeing ones."""
    if stat is None:
        return "—", ""
    if counted <= 1 or stat.min == stat.max:
        return _fmt_int(stat.mean), ""
    return _fmt_int(stat.mean), f"{_fmt_int(stat.min)}–{_fmt_int(stat.max)}"


def format_stat(stat: CountStats | None, counted: int) -> str:
    """'12' for one repetition or agreeing ones, 'mean (min–max)' otherwise, '—' if none."""
    value, spread = stat_parts(stat, counted)
    return f"{value} ({spread})" if spread else value


def format_rate(rate: float | None) -> str:
    """A loss rate as a percentage, '—' when nothing was acknowledged."""
    return "—" if rate is None else percent(100 * rate)


def config_parts(config: CellConfig) -> list[str]:
    """The settings that decide the guarantee, as 'name=value' strings."""
    parts = [
        ("acks", config.acks),
        ("min.insync", config.min_insync_replicas),
        ("unclean", _flag(config.unclean_leader_election)),
        ("idempotence", _flag(config.enable_idempotence)),
        ("in-flight", config.max_in_flight),
        ("RF", config.replication_factor),
        ("partitions", config.partitions),
        ("fault", config.fault_class),
        ("Kafka", config.kafka_version),
        ("mode", config.kafka_mode),
    ]
    return [f"{k}={v}" for k, v in parts if v is not None]


def config_summary(config: CellConfig) -> str:
    """The settings that decide the guarantee, in one line."""
    return " · ".join(config_parts(config))


def _flag(value: bool | None) -> str | None:
    """'on'/'off' for a setting, None when the config does not say."""
    return None if value is None else ("on" if value else "off")


def verdict_summary(cells: Sequence[CellVerdict]) -> str:
    """One sentence for the whole report, following exit_code."""
    code = exit_code(cells)
    violations = sum(c.verdict == Verdict.VIOLATION for c in cells)
    unknown = sum(c.verdict == Verdict.UNKNOWN for c in cells)
    if code == 1:
        return f"{violations} of {len(cells)} cells violate the documented guarantees"
    if code == 2:
        return (
            f"Inconclusive: {unknown} of {len(cells)} cells could not be judged"
            if cells
            else "Inconclusive: no results to judge"
        )
    known = sum(c.verdict == Verdict.KNOWN_BUG for c in cells)
    if known:
        return (
            f"{known} of {len(cells)} cells show a known loss bug of their Kafka release; "
            "the others are consistent with the documented guarantees"
        )
    return f"All {len(cells)} cells are consistent with the documented guarantees"


def verdict_counts(cells: Sequence[CellVerdict]) -> dict[str, int]:
    """How many cells got each verdict, every verdict listed."""
    return {v.value: sum(c.verdict == v for c in cells) for v in Verdict}


def slug(cell: CellVerdict) -> str:
    """An HTML id for a cell's section."""
    return "cell-" + re.sub(r"[^A-Za-z0-9_-]+", "-", f"{cell.experiment}-{cell.cell}").strip("-")


def css_class(verdict: Verdict) -> str:
    """The CSS class of a verdict badge."""
    return "v-" + verdict.value.lower()


def _dash(value: object) -> object:
    """The value, or an em dash for None."""
    return "—" if value is None else value


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
    values: tuple[MatrixValue, ...]
    loss_rate: str
    repetitions: int
    verdict: str
    css: str
    price: tuple[MatrixValue, ...] = ()  # PRICE_LABELS' columns; () without results


def matrix_row(
    cell: CellVerdict, results_by_run: Mapping[str, RunResult] | None = None
) -> MatrixRow:
    """The matrix row of one cell; with the results, its price of safety too."""
    values = []
    for name in MATRIX_COUNTS:
        stat = cell.stats.counts.get(name)
        level = ""
        if name in ANOMALIES and stat is not None and stat.max > 0:
            level = "serious" if name in SERIOUS else "notable"
        value, spread = stat_parts(stat, cell.stats.counted)
        values.append(MatrixValue(value, spread, level))
    return MatrixRow(
        slug=slug(cell),
        cell=cell.cell,
        experiment=cell.experiment,
        config=tuple(config_parts(cell.config)),
        values=tuple(values),
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
    return "price of safety: " + "; ".join(parts)


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


# ---------------------------------------------------------------------------------------------
# Cells and repetitions


@dataclass(frozen=True)
class ExampleRow:
    """An example lost / unseen / divergent message: where it was acked and what is there."""

    cls: str
    msg_id: int | None
    partition: object
    offset: object
    readback: object


@dataclass(frozen=True)
class AttributionView:
    """Where a repetition's missing messages are, and what limits that evidence."""

    text: str
    note: str


@dataclass(frozen=True)
class RepetitionView:
    """A repetition's verdict, reasons, checks, timeline chart and example table."""

    repetition: int
    run_dir: str
    verdict: str
    css: str
    reasons: tuple[str, ...]
    timeline: Markup | PartFailure | None  # a PartFailure shows why it could not be drawn
    faults: tuple[str, ...]
    sensitivity: str | None
    attribution: AttributionView | None
    examples: tuple[ExampleRow, ...]
    availability: str | None = None  # availability_text
    timeline_skipped: bool = False  # not drawn: the cell has more than MAX_TIMELINES_PER_CELL


# A chart costs about 0.1 s to draw: a report over hundreds of repetitions draws, per cell, the
# ones worth a look (not PASS, then the largest loss, then the first) and links the rest.
MAX_TIMELINES_PER_CELL: Final = 5


@dataclass(frozen=True)
class GuaranteeView:
    """The documented guarantee as chips (name, rule, strict) and its citations."""

    chips: tuple[tuple[str, str, bool], ...]
    citations: tuple[str, ...]


@dataclass(frozen=True)
class CellView:
    """Everything the per-cell section of the page shows."""

    slug: str
    cell: str
    experiment: str
    config: str
    verdict: str
    css: str
    meaning: str
    reasons: tuple[str, ...]
    guarantee: GuaranteeView | None
    repetitions: tuple[RepetitionView, ...]


def _examples(result: RunResult | None) -> tuple[ExampleRow, ...]:
    """Example lost / divergent / unseen messages with where they were acked and read back."""
    if result is None:
        return ()
    return tuple(
        ExampleRow(
            cls=name.replace("_", "-"),
            msg_id=ex.msg_id,
            partition=_dash(ex.partition),
            offset=_dash(ex.offset),
            readback=_dash(ex.readback_msg_id_at_offset),
        )
        for name in EXAMPLE_CLASSES
        for ex in (result.examples.get(name) or ())[:EXAMPLE_ROWS]
    )


def attribution_view(attribution: Attribution | None) -> AttributionView | None:
    """Where the missing messages are, with its limits; None without any missing."""
    if attribution is None:
        return None
    counts = attribution.counts
    total = sum(int(n) for n in counts.values())
    if total == 0:
        return None
    parts = [
        f"{counts[p]:,} {phrase}" for p, phrase in ATTRIBUTION_PHRASES.items() if counts.get(p)
    ]
    if attribution.beyond_served:
        parts.append(
            f"{attribution.beyond_served:,} of those on disk only at or past the high watermark"
        )
    text = f"where the {total:,} missing acknowledged messages are: {'; '.join(parts)}"
    return AttributionView(text, attribution.note)


def sensitivity_text(check: Sensitivity | None) -> str | None:
    """'sensitivity check passed: 12 of 12 …', or None without a check."""
    if check is None:
        return None
    if not check.applies:
        return (
            "sensitivity check does not apply: the read-back holds no healthy acknowledged "
            "record to hide"
        )
    word = "passed" if check.passed else "FAILED"
    return (
        f"sensitivity check {word}: {check.found} of {check.removed} acknowledged "
        "records hidden from a copy of the read-back were reported missing"
    )


def _timeline_or_none(
    result: RunResult | None, events: Events, salt: str
) -> Markup | PartFailure | None:
    """The timeline chart; None without a result or a timeline; the PartFailure, shown in its
    place, when it cannot be drawn."""
    if result is None:
        return None
    return safely(f"the timeline of {salt}", lambda: timeline_svg(result, events, salt))


def _repetition_view(
    cell: CellVerdict,
    rep: RepetitionVerdict,
    results_by_run: Mapping[str, RunResult],
    events_by_run: Mapping[str, Events],
    draw: bool = True,
) -> RepetitionView:
    """A repetition's verdict, reasons, timeline chart (when draw) and example table."""
    result = results_by_run.get(rep.run_dir)
    events = events_by_run.get(rep.run_dir) or []
    salt = f"{cell.experiment}/{cell.cell}/rep-{rep.repetition}"
    return RepetitionView(
        repetition=rep.repetition,
        run_dir=rep.run_dir,
        verdict=rep.verdict.value,
        css=css_class(rep.verdict),
        reasons=rep.reasons,
        timeline=_timeline_or_none(result, events, salt) if draw else None,
        timeline_skipped=not draw,
        faults=tuple(w.label for w in fault_windows(events)),
        sensitivity=sensitivity_text(result.sensitivity if result else None),
        attribution=attribution_view(result.attribution if result else None),
        examples=_examples(result),
        availability=availability_text(result, events),
    )


def guarantee_view(guarantee: Guarantee | None) -> GuaranteeView | None:
    """The guarantee as chips and citations."""
    if guarantee is None:
        return None
    return GuaranteeView(
        chips=(
            ("loss", guarantee.loss, guarantee.loss != ALLOWED),
            ("duplicates", guarantee.duplicates, guarantee.duplicates == FORBIDDEN),
            ("order", guarantee.order, guarantee.order == "guaranteed"),
        ),
        citations=(guarantee.citation, guarantee.duplicates_citation, guarantee.order_citation),
    )


def cell_view(
    cell: CellVerdict,
    results_by_run: Mapping[str, RunResult],
    events_by_run: Mapping[str, Events],
) -> CellView:
    """Everything the per-cell section of the page shows."""
    drawn = _worth_drawing(cell, results_by_run)
    return CellView(
        slug=slug(cell),
        cell=cell.cell,
        experiment=cell.experiment,
        config=config_summary(cell.config),
        verdict=cell.verdict.value,
        css=css_class(cell.verdict),
        meaning=VERDICT_MEANING[cell.verdict],
        reasons=cell.reasons,
        guarantee=guarantee_view(cell.guarantee),
        repetitions=tuple(
            _repetition_view(cell, rep, results_by_run, events_by_run, rep.run_dir in drawn)
            for rep in cell.repetitions
        ),
    )


def _worth_drawing(cell: CellVerdict, results_by_run: Mapping[str, RunResult]) -> set[str]:
    """The run dirs of at most MAX_TIMELINES_PER_CELL repetitions: those not PASS first, then
    the largest loss, then the lowest repetition number."""

    def rank(rep: RepetitionVerdict) -> tuple[bool, int, int]:
        result = results_by_run.get(rep.run_dir)
        return rep.verdict == Verdict.PASS, -((result.loss or 0) if result else 0), rep.repetition

    return {rep.run_dir for rep in sorted(cell.repetitions, key=rank)[:MAX_TIMELINES_PER_CELL]}


# ---------------------------------------------------------------------------------------------
# Provenance


@dataclass(frozen=True)
class ProvenanceView:
    """What produced one experiment run, as (label, text) lines: every PROVENANCE_LABELS line,
    or one line saying why there is no provenance."""

    root: str
    lines: tuple[tuple[str, str], ...]


PROVENANCE_LABELS: Final = (
    "git revision",
    "command line",
    "seed",
    "image",
    "image id",
    "Kafka version",
    "confluent-kafka",
    "librdkafka",
    "cores",
    "memory",
)


def provenance_views(runs: Sequence[RunProvenance]) -> tuple[ProvenanceView, ...]:
    """One view per experiment run root, in the order given."""
    return tuple(_provenance_or_failure(run) for run in runs)


def _provenance_or_failure(run: RunProvenance) -> ProvenanceView:
    """The root's provenance view, or one line saying why it could not be shown."""
    view = safely(f"the provenance of {run.root}", lambda: _provenance_view(run))
    if isinstance(view, PartFailure):
        return ProvenanceView(run.root, (("provenance", str(view)),))
    return view


def _provenance_view(run: RunProvenance) -> ProvenanceView:
    """The lines of one root, in PROVENANCE_LABELS order."""
    p = run.provenance
    if p is None:
        return ProvenanceView(run.root, (("provenance", f"{NOT_RECORDED}: {run.problem}"),))
    images = p.images

    def each(values: Sequence[str | None]) -> str:
        return ", ".join(v or NOT_RECORDED for v in values) or NOT_RECORDED

    texts = (
        p.git_revision or NOT_RECORDED,
        shlex.join(p.command_line) if p.command_line else NOT_RECORDED,
        f"{p.seed} (repetition r runs with seed + r)",
        each([i.tag for i in images]),
        each([i.image_id for i in images]),
        each(sorted({i.kafka_version or NOT_RECORDED for i in images})),
        p.confluent_kafka_version or NOT_RECORDED,
        p.librdkafka_version or NOT_RECORDED,
        NOT_RECORDED if p.cores is None else str(p.cores),
        NOT_RECORDED if p.memory_bytes is None else f"{p.memory_bytes / 2**30:.1f} GiB",
    )
    return ProvenanceView(run.root, tuple(zip(PROVENANCE_LABELS, texts, strict=True)))
