"""What the renderings show, as typed view models: the matrix rows, each cell with its
repetitions, and the provenance of the runs; plus the formatting they share.

HTML, Markdown and report.json all read these, so a figure or a word is formatted once.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from analysis.judge.outcomes import (
    CellVerdict,
    CountStats,
    Verdict,
)
from analysis.judge.verdicts import exit_code
from analysis.model.anomalies import ANOMALIES as ANOMALY_REGISTRY
from analysis.model.anomalies import (
    ANOMALY_NAMES,
    LOSS_CLASSES,
    AnomalyName,
    CountKey,
    CountName,
)
from analysis.model.attribution import Place
from analysis.report.charts import percent
from harness.rundir.config import CellConfig

# The matrix: sends, the one loss figure, then every anomaly class of the registry.
MATRIX_COUNTS: Final[tuple[CountKey, ...]] = (
    CountName.SENT,
    CountName.ACKED,
    CountName.LOSS,
    *ANOMALY_NAMES,
)
# The matrix's counts shown loudly when non-zero (the serious ones in red): the loss figure
# and the anomaly classes.
ANOMALIES: Final[frozenset[CountKey]] = frozenset({CountName.LOSS, *ANOMALY_NAMES})
SERIOUS: Final[frozenset[CountKey]] = frozenset(
    {CountName.LOSS, *(a.name for a in ANOMALY_REGISTRY if a.serious)}
)
EXAMPLE_CLASSES: Final = (*LOSS_CLASSES, AnomalyName.OFFSET_DIVERGENT)
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
