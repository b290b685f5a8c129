"""The words and figures every rendering formats alike: counts and rates, the configuration,
the one-line outcome, verdict tallies, ids and CSS classes.

HTML, Markdown and report.json all read these (and the typed views of matrix.py, cells.py,
provenance.py and summary_view.py), so a figure or a word is formatted once.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from analysis.judge.outcomes import (
    CellVerdict,
    CountStats,
    Verdict,
)
from analysis.judge.verdicts import exit_code
from analysis.report.charts import percent
from harness.rundir.config import CellConfig

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
    return with_range(*stat_parts(stat, counted))


def with_range(value: str, spread: str) -> str:
    """The value, its range or note in parentheses after it when there is one."""
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
        # Said only where every append is fsynced: absent, Kafka's default (no fsync).
        ("fsync", "each message" if config.fsync_each_message else None),
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
            f"{known} of {len(cells)} cells show a known bug of their Kafka release or client; "
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
