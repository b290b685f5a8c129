"""One cell's view and its repetitions': examples, attribution, sensitivity, timelines, the
guarantee it was judged against."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from markupsafe import Markup

from analysis.judge.guarantees import ALLOWED, FORBIDDEN, Guarantee
from analysis.judge.outcomes import (
    VERDICT_MEANING,
    CellVerdict,
    Events,
    RepetitionVerdict,
    Verdict,
)
from analysis.model.anomalies import LOSS_CLASSES, AnomalyName
from analysis.model.attribution import Attribution, Place
from analysis.model.evidence import RunEvidence
from analysis.model.results import RunResult, Sensitivity
from analysis.report.charts import timeline_svg
from analysis.report.marks import fault_windows
from analysis.report.matrix import availability_text
from analysis.report.safe import PartFailure, safely
from analysis.report.views import (
    config_summary,
    css_class,
    slug,
)

# The classes whose examples a repetition's table shows, and how many of each.
EXAMPLE_CLASSES: Final = (*LOSS_CLASSES, AnomalyName.OFFSET_DIVERGENT)
EXAMPLE_ROWS: Final = 20
# How each place of analysis.checks.attribution reads in a sentence.
ATTRIBUTION_PHRASES: Final = {
    Place.ON_NO_DISK: "on no broker's disk (Kafka lost them)",
    Place.ON_DISK_NOT_SERVED: "on a broker's disk, yet not read back",
    Place.SEGMENTS_UNAVAILABLE: "cannot say (segments not kept or not readable)",
    Place.NOT_EXAMINED: "not examined (beyond the bound)",
}

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
    client: str | None = None  # client_text: the producer's settings with defaults resolved
    members: str | None = None  # members_text: the consumer group's settings
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
        # None without a result or a timeline; the PartFailure, shown in its place, when it
        # cannot be drawn
        timeline=safely(f"the timeline of {salt}", lambda: timeline_svg(result, events, salt))
        if draw and result is not None
        else None,
        timeline_skipped=not draw,
        faults=tuple(w.label for w in fault_windows(events)),
        sensitivity=sensitivity_text(result.sensitivity if result else None),
        attribution=attribution_view(result.attribution if result else None),
        examples=_examples(result),
        availability=availability_text(result, events),
        client=client_text(events),
        members=members_text(events),
    )


# The settings that decide durability, shown first; the rest of a client's settings follow.
_DURABILITY_KEYS: Final = (
    "acks",
    "enable.idempotence",
    "retries",
    "max.in.flight.requests.per.connection",
    "delivery.timeout.ms",
    "request.timeout.ms",
    "linger.ms",
)


def client_text(events: Events) -> str | None:
    """`<client> ran with acks=..., ...` from the run's client_config event (the durability
    settings, the client's own defaults resolved); None when the run recorded none."""
    config = RunEvidence.coerce(events).client_config
    if config is None:
        return None
    shown = [f"{key}={config.config[key]}" for key in _DURABILITY_KEYS if key in config.config]
    idempotent = "" if config.idempotent is None else f" (idempotent: {config.idempotent})"
    return f"{config.client} ran with {', '.join(shown) or 'no settings recorded'}{idempotent}"


# The consumer settings that decide what a group reads and when it commits.
_MEMBER_KEYS: Final = (
    "isolation.level",
    "enable.auto.commit",
    "auto.commit.interval.ms",
    "auto.offset.reset",
    "session.timeout.ms",
    "max.poll.interval.ms",
    "group.protocol",
)


def members_text(events: Events) -> str | None:
    """`the group's members (<client>) ran with isolation.level=..., ...` from the run's
    `consumers` event; None when the run had no group or it recorded no settings."""
    group = RunEvidence.coerce(events).consumers
    if group is None or not group.config:
        return None
    shown = [f"{key}={group.config[key]}" for key in _MEMBER_KEYS if key in group.config]
    return f"the group's members ({group.client}) ran with {', '.join(shown)}"


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


def _dash(value: object) -> object:
    """The value, or an em dash for None."""
    return "—" if value is None else value
