"""Crafted results.json objects as the typed RunResult the checker and the report take.

Lenient on purpose: values pass through as given (a count of "3" stays "3"), so the tests can
hand the checker malformed results and see that it answers UNKNOWN instead of crashing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from analysis.model.attribution import Attribution, Holding, MissingMessage, Place, PlacedMessage
from analysis.model.results import Example, RunResult, RunStatus, Sensitivity, TimelineSecond
from harness.rundir.config import CellConfig


def typed(raw: Mapping[str, Any]) -> RunResult:
    """The RunResult a results.json object describes; absent identity fields become empty."""
    sensitivity = raw.get("sensitivity")
    return RunResult(
        run_dir=raw.get("run_dir", ""),
        experiment=raw.get("experiment", ""),
        cell=raw.get("cell", ""),
        repetition=raw.get("repetition", 0),
        config=CellConfig.read(raw.get("config") or {}),
        axes=raw.get("axes") or {},
        status=RunStatus(raw.get("status", "complete")),
        counts=raw.get("counts"),
        examples={
            name: tuple(Example(**row) for row in rows)
            for name, rows in (raw.get("examples") or {}).items()
        },
        timeline=tuple(TimelineSecond(**second) for second in raw.get("timeline") or []),
        error=raw.get("error"),
        loss=raw.get("loss"),
        loss_by_partition=raw.get("loss_by_partition") or {},
        divergence_by_partition=raw.get("divergence_by_partition") or {},
        contract=raw.get("contract"),
        sensitivity=None if sensitivity is None else Sensitivity(**sensitivity),
        attribution=_attribution(raw.get("attribution")),
    )


def _attribution(raw: Mapping[str, Any] | None) -> Attribution | None:
    """The Attribution of a results.json `attribution` object."""
    if raw is None:
        return None
    examples = tuple(
        PlacedMessage(
            MissingMessage(e["msg_id"], e["partition"], e["offset"]),
            Place(e["place"]),
            tuple(Holding(**h) for h in e["holders"]),
        )
        for e in raw["examples"]
    )
    return Attribution(dict(raw["counts"]), examples, raw["note"], raw.get("beyond_served", 0))
