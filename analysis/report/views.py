"""The words and figures every rendering formats alike: counts and rates, the configuration,
the one-line outcome, verdict tallies, ids and CSS classes.

HTML, Markdown and report.json all read these (and the typed views of matrix.py, cells.py,
provenance.py and summary_view.py), so a figure or a word is formatted once.
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
from analysis.judge.verdicts import DEFAULT_FAIL_ON, exit_code
from analysis.model.anomalies import CountName
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


# How the headline says that a number of cells got a verdict ("2 of 6 cells …").
VERDICT_PHRASE: Final = {
    Verdict.PASS: "kept every acknowledged message",
    Verdict.VIOLATION: "violate the documented guarantees",
    Verdict.EXPECTED_LOSS: "lost acknowledged data where the documentation allows it",
    Verdict.KNOWN_BUG: "show a known bug of their Kafka release or client",
    Verdict.NOT_PROVOKED: "provoked no loss where loss is allowed (faults too weak)",
    Verdict.UNKNOWN: "could not be judged",
}


def verdict_summary(
    cells: Sequence[CellVerdict], fail_on: frozenset[Verdict] = DEFAULT_FAIL_ON
) -> str:
    """The report's headline, following exit_code under `fail_on`: first whether the cells
    pass the gate and which verdicts fail it, then whether acknowledged data was lost, allowed
    or not (loss the documentation allows is still loss, and said so)."""
    if not cells:
        return "Inconclusive: no results to judge"
    loss = _loss_sentence(cells)
    return f"{_gate_sentence(cells, fail_on)}." + (f" {loss}." if loss else "")


def _gate_sentence(cells: Sequence[CellVerdict], fail_on: frozenset[Verdict]) -> str:
    """Why the exit code is what it is: the failing cells by verdict (1), the cells that could
    not be judged (2), or the guarantees held and what else showed (0)."""
    n = len(cells)
    tally = verdict_counts(cells)
    code = exit_code(cells, fail_on=fail_on)
    if code == 1:
        flag = ",".join(v.value.lower() for v in Verdict if v in fail_on)
        which = "; ".join(
            f"{tally[v]} of {n} cells {VERDICT_PHRASE[v]}"
            for v in Verdict
            if v in fail_on and tally[v]
        )
        return f"Failed (--fail-on {flag}): {which}"
    if code == 2:
        return f"Inconclusive: {tally[Verdict.UNKNOWN]} of {n} cells could not be judged"
    broken = tally[Verdict.VIOLATION] + tally[Verdict.KNOWN_BUG] + tally[Verdict.UNKNOWN]
    held = "all" if not broken else f"{n - broken} of"
    sentence = f"The documented guarantees held in {held} {n} cells"
    for verdict in (Verdict.KNOWN_BUG, Verdict.VIOLATION, Verdict.UNKNOWN):
        if tally[verdict]:
            sentence += f"; {tally[verdict]} {VERDICT_PHRASE[verdict]}"
    if broken:
        sentence += " (not failing: not named in --fail-on)"
    return sentence


def _loss_sentence(cells: Sequence[CellVerdict]) -> str:
    """How many acknowledged messages were lost in how many cells, and where that is allowed;
    '' when no cell's loss was counted."""
    counted = sum(CountName.LOSS in c.stats.counts for c in cells)
    lossy = [c for c in cells if _lost(c)]
    if not lossy:
        scope = "" if counted == len(cells) else f" in the {counted} of {len(cells)} cells counted"
        return f"No acknowledged message was lost{scope}" if counted else ""
    total = sum(c.stats.counts[CountName.LOSS].total for c in lossy)
    allowed = sum(c.verdict == Verdict.EXPECTED_LOSS for c in lossy)
    where = {0: "none", len(lossy): "all"}.get(allowed, f"{allowed} of them")
    return (
        f"Acknowledged messages were lost in {len(lossy)} of {len(cells)} cells "
        f"({total:,} {'message' if total == 1 else 'messages'}; {where} where the documentation "
        "allows it)"
    )


def _lost(cell: CellVerdict) -> bool:
    """The cell counted at least one acknowledged message lost."""
    loss = cell.stats.counts.get(CountName.LOSS)
    return loss is not None and loss.total > 0


def verdict_counts(cells: Sequence[CellVerdict]) -> dict[str, int]:
    """How many cells got each verdict, every verdict listed."""
    return {v.value: sum(c.verdict == v for c in cells) for v in Verdict}


def slug(cell: CellVerdict) -> str:
    """An HTML id for a cell's section."""
    return "cell-" + re.sub(r"[^A-Za-z0-9_-]+", "-", f"{cell.experiment}-{cell.cell}").strip("-")


def css_class(verdict: Verdict) -> str:
    """The CSS class of a verdict badge."""
    return "v-" + verdict.value.lower()
