"""The cross-run summary as the reports show it: one table row per configuration × fault ×
version, the settings that change the outcome, and the plain-JSON form for report.json."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from analysis.crossrun.summary import CrossRunSummary, GroupSummary, SettingEffect
from analysis.report.views import format_rate

__all__ = ["SummaryRow", "SummaryView", "summary_json", "summary_view"]


@dataclass(frozen=True)
class SummaryRow:
    """One group, formatted."""

    configuration: str
    fault: str
    kafka_version: str
    repetitions: str  # counted/total when some repetition had no counts
    lossy: str
    probability: str  # "2/5 = 40 %"
    interval: str  # "12–77 %"
    loss_rate: str  # "min / median / max"
    verdicts: str


@dataclass(frozen=True)
class SummaryView:
    """The summary table and one sentence per setting effect."""

    rows: tuple[SummaryRow, ...]
    effects: tuple[str, ...]
    decisive: str


def _row(group: GroupSummary) -> SummaryRow:
    """The formatted row of one group."""
    reps = str(group.repetitions)
    if group.counted != group.repetitions:
        reps = f"{group.counted}/{reps}"
    probability = "-"
    if group.loss_probability is not None:
        probability = f"{group.lossy}/{group.counted} = {format_rate(group.loss_probability)}"
    spread = group.loss_rate
    rates = (
        "-"
        if spread is None
        else " / ".join(format_rate(v) for v in (spread.min, spread.median, spread.max))
    )
    return SummaryRow(
        configuration=group.label,
        fault=group.fault,
        kafka_version=group.kafka_version,
        repetitions=reps,
        lossy=str(group.lossy),
        probability=probability,
        # No counted repetition: the interval is all of [0, 1], which says nothing worth a cell.
        interval="-"
        if group.counted == 0
        else f"{format_rate(group.interval.low)} – {format_rate(group.interval.high)}",
        loss_rate=rates,
        verdicts=", ".join(f"{n} {v}" for v, n in group.verdicts.items()),
    )


def _effect_text(effect: SettingEffect) -> str:
    """One sentence: which setting, from what to what, changed the loss probability."""
    before, after = (
        f"{format_rate(p)} [{format_rate(i.low)}–{format_rate(i.high)}]"
        for p, i in zip(effect.probabilities, effect.intervals, strict=True)
    )
    context = " ".join(f"{k}={v}" for k, v in effect.context)
    return (
        f"{effect.setting} {effect.values[0]} → {effect.values[1]}: loss probability "
        f"{before} → {after} under {effect.fault}, Kafka {effect.kafka_version} ({context})"
    )


def summary_view(summary: CrossRunSummary) -> SummaryView:
    """The summary formatted once for HTML and Markdown."""
    if summary.decisive_settings:
        decisive = "settings that change the outcome: " + ", ".join(summary.decisive_settings)
    elif all(g.repetitions <= 1 for g in summary.groups):
        decisive = (
            "one repetition per configuration cannot show whether a setting changes the "
            "outcome: raise `repetitions` in the experiment file"
        )
    else:
        decisive = (
            "no single setting changed the outcome beyond the 95 % intervals "
            "(more repetitions, `repetitions` in the experiment file, narrow them)"
        )
    return SummaryView(
        rows=tuple(_row(g) for g in summary.groups),
        effects=tuple(_effect_text(e) for e in summary.effects),
        decisive=decisive,
    )


def summary_json(summary: CrossRunSummary) -> dict[str, Any]:
    """report.json's `summary`: groups, effects and decisive settings as plain values."""
    return {
        "confidence": 0.95,
        "groups": [
            {**dataclasses.asdict(g), "configuration": dict(g.configuration)}
            for g in summary.groups
        ],
        "effects": [{**dataclasses.asdict(e), "context": dict(e.context)} for e in summary.effects],
        "decisive_settings": list(summary.decisive_settings),
    }
