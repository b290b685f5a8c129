"""report.json: the machine-readable report, versioned by SCHEMA_VERSION."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Final, NotRequired, TypedDict

from analysis.crossrun.summary import CrossRunSummary
from analysis.judge.guarantees import SOURCE
from analysis.judge.outcomes import VERDICT_MEANING, CellStats, CellVerdict, Verdict
from analysis.judge.verdicts import DEFAULT_FAIL_ON, exit_code
from analysis.model.availability import AvailabilityJson
from analysis.model.evidence import RunEvidence
from analysis.model.results import RunResult
from analysis.report.matrix import price_of
from analysis.report.provenance import ProvenanceView
from analysis.report.safe import PartFailure, safely, safely_from
from analysis.report.summary_view import summary_json
from analysis.report.views import verdict_counts, verdict_summary
from harness.rundir.provenance import ExperimentProvenance

__all__ = ["SCHEMA_VERSION", "report_json"]

# 3: summary (the cross-run summary) added. 2: schema_version, verdict_meanings and provenance
# added (1: the unversioned first form). Added since 2, keys only: a cell's `price_of_safety`,
# a repetition's `availability` and `availability_error`; a cell or the summary that could not be
# built is its identity and `error` (check-safe), and a report.json that could not be built at
# all is {schema_version, title, error}.
SCHEMA_VERSION: Final = 3


class CountJson(TypedDict):
    """One count over a cell's repetitions with counts."""

    mean: float
    min: int
    max: int


class StatsJson(TypedDict):
    """A cell's stats: repetitions, those with counts, each count, the rates."""

    repetitions: int
    counted: int
    counts: dict[str, CountJson]
    loss_rate: float | None
    divergence_rate: float | None


class AvailabilityFieldsJson(TypedDict):
    """A repetition's availability figures, present only when the report had the results."""

    availability: NotRequired[AvailabilityJson | None]
    availability_error: NotRequired[str | None]


class ClientJson(TypedDict):
    """The producer client a repetition ran and its settings, defaults resolved."""

    client: str
    config: dict[str, str]
    idempotent: bool | None


class MembersJson(TypedDict):
    """The consumer group's client and settings."""

    client: str
    config: dict[str, str]


class ClientsJson(TypedDict):
    """The clients a repetition ran: its producer and its consumer group (None: not recorded)."""

    client: ClientJson | None
    members: MembersJson | None


class RepetitionJson(AvailabilityFieldsJson, ClientsJson):
    """One repetition of a cell; `loss` and `acked` are CountName.LOSS and CountName.ACKED."""

    repetition: int
    run_dir: str
    verdict: str
    reasons: list[str]
    loss: int | None
    acked: int | None
    loss_rate: float | None


class CellJson(TypedDict):
    """One cell: verdict, reasons, stats, guarantee, repetitions (price with the results)."""

    experiment: str
    cell: str
    config: Mapping[str, object]  # CellConfig.as_json()
    verdict: str
    reasons: list[str]
    guarantee: Mapping[str, object] | None  # the Guarantee's fields
    stats: StatsJson
    repetitions: list[RepetitionJson]
    price_of_safety: NotRequired[Mapping[str, object]]  # CellPrice.as_json()


class CellErrorJson(TypedDict):
    """A cell whose JSON could not be built: its identity, verdict and the error."""

    experiment: str
    cell: str
    verdict: str
    error: str


class ErrorJson(TypedDict):
    """A part that could not be built: what failed."""

    error: str


class ProvenanceJson(TypedDict):
    """One experiment run root: the recorded provenance, why not, and the lines shown."""

    root: str
    recorded: Mapping[str, object] | None  # Provenance.model_dump(mode="json")
    problem: str | None
    shown: dict[str, str]


class ReportJson(TypedDict):
    """report.json (SCHEMA_VERSION)."""

    schema_version: int
    title: str
    exit_code: int
    fail_on: list[str]  # the verdicts that fail, as --fail-on names them
    outcome: str
    verdict_counts: dict[str, int]
    verdict_meanings: dict[str, str]
    source: str
    cells: list[CellJson | CellErrorJson]
    provenance: list[ProvenanceJson]
    summary: Mapping[str, object] | ErrorJson | None  # summary_json()


def report_json(
    cells: Sequence[CellVerdict],
    provenance: Sequence[ExperimentProvenance],
    views: Sequence[ProvenanceView],
    title: str,
    results_by_run: Mapping[str, RunResult] | None = None,
    summary: CrossRunSummary | PartFailure | None = None,
    *,
    fail_on: frozenset[Verdict] = DEFAULT_FAIL_ON,
) -> ReportJson:
    """The machine-readable report: outcome, verdict counts, every cell, provenance, and the
    cross-run summary (null when not computed, {"error": ...} when it failed); with the results,
    each cell's price of safety and each repetition's availability figures. The exit code and
    outcome follow `fail_on`, the verdicts that fail."""
    return {
        "schema_version": SCHEMA_VERSION,
        "title": title,
        "exit_code": exit_code(cells, fail_on=fail_on),
        "fail_on": [v.value.lower() for v in Verdict if v in fail_on],
        "outcome": verdict_summary(cells, fail_on),
        "verdict_counts": verdict_counts(cells),
        "verdict_meanings": {v.value: VERDICT_MEANING[v] for v in Verdict},
        "source": SOURCE,
        "cells": [_cell_or_error(c, results_by_run) for c in cells],
        "provenance": [_provenance_json(p, v) for p, v in zip(provenance, views, strict=True)],
        "summary": _summary_or_error(summary),
    }


def _cell_or_error(
    cell: CellVerdict, results_by_run: Mapping[str, RunResult] | None
) -> CellJson | CellErrorJson:
    """_cell_json of the cell, or its name, its verdict and the error that kept the rest out."""
    data = safely(f"cell {cell.cell}", partial(_cell_json, cell, results_by_run))
    if isinstance(data, PartFailure):
        return {
            "experiment": cell.experiment,
            "cell": cell.cell,
            "verdict": cell.verdict.value,
            "error": str(data),
        }
    return data


def _summary_or_error(
    summary: CrossRunSummary | PartFailure | None,
) -> Mapping[str, object] | ErrorJson | None:
    """summary_json of the summary (None without one), or {"error": what failed}."""
    data = safely_from("the cross-run summary", summary, summary_json)
    return {"error": str(data)} if isinstance(data, PartFailure) else data


def _provenance_json(run: ExperimentProvenance, view: ProvenanceView) -> ProvenanceJson:
    """One experiment run root: the recorded provenance as data, and as the reports show it."""
    recorded = None if run.provenance is None else run.provenance.model_dump(mode="json")
    return {
        "root": run.root,
        "recorded": recorded,
        "problem": run.problem,
        "shown": dict(view.lines),
    }


def _stats_json(stats: CellStats) -> StatsJson:
    """Cell stats as plain JSON values."""
    return {
        "repetitions": stats.repetitions,
        "counted": stats.counted,
        "counts": {
            k: {"mean": v.mean, "min": v.min, "max": v.max} for k, v in stats.counts.items()
        },
        "loss_rate": stats.loss_rate,
        "divergence_rate": stats.divergence_rate,
    }


def _cell_json(
    cell: CellVerdict, results_by_run: Mapping[str, RunResult] | None = None
) -> CellJson:
    """One cell with its verdict, reasons, stats, guarantee and repetitions (and, with the
    results, its price of safety)."""
    data: CellJson = {
        "experiment": cell.experiment,
        "cell": cell.cell,
        "config": cell.config.as_json(),
        "verdict": cell.verdict.value,
        "reasons": list(cell.reasons),
        "guarantee": dataclasses.asdict(cell.guarantee) if cell.guarantee else None,
        "stats": _stats_json(cell.stats),
        "repetitions": [
            {
                "repetition": r.repetition,
                "run_dir": r.run_dir,
                "verdict": r.verdict.value,
                "reasons": list(r.reasons),
                "loss": r.loss,
                "acked": r.acked,
                "loss_rate": r.loss_rate,
                **_availability_json(r.run_dir, results_by_run),
                **_clients_json(r.run_dir, results_by_run),
            }
            for r in cell.repetitions
        ],
    }
    if results_by_run is not None:
        data["price_of_safety"] = price_of(cell, results_by_run).as_json()
    return data


def _clients_json(
    run_dir: str, results_by_run: Mapping[str, RunResult] | None = None
) -> ClientsJson:
    """The repetition's producer client with the settings it ran with, defaults resolved (its
    client_config event), and its consumer group's client and settings (its `consumers`
    event); each None when the run recorded none, both None when it cannot be read. The events
    are those its result carries from reconcile, read from the run dir only without them."""
    result = None if results_by_run is None else results_by_run.get(run_dir)
    try:
        evidence = result.evidence if result and result.evidence else RunEvidence.read(run_dir)
    except (OSError, ValueError):
        return {"client": None, "members": None}
    config, group = evidence.client_config, evidence.consumers
    return {
        "client": None
        if config is None
        else {
            "client": config.client,
            "config": dict(config.config),
            "idempotent": config.idempotent,
        },
        "members": None
        if group is None
        else {"client": group.client, "config": dict(group.config)},
    }


def _availability_json(
    run_dir: str, results_by_run: Mapping[str, RunResult] | None
) -> AvailabilityFieldsJson:
    """A repetition's `availability` and `availability_error` (nothing without the results)."""
    if results_by_run is None:
        return {}
    result = results_by_run.get(run_dir)
    availability = None if result is None else result.availability
    return {
        "availability": None if availability is None else availability.as_json(),
        "availability_error": None if result is None else result.availability_error,
    }
