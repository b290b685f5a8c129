"""report.json's shape, key by key: the outcome, every cell with its stats and repetitions
(their loss rate, availability, client and group settings read from the run directory), the
price of safety only with the results, and what stands in for a part that failed."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from analysis.crossrun.summary import CrossRunSummary
from analysis.judge.guarantees import SOURCE
from analysis.judge.outcomes import VERDICT_MEANING, CellVerdict, Verdict
from analysis.report import json_report
from analysis.report.json_report import SCHEMA_VERSION, report_json
from analysis.report.provenance import provenance_views
from analysis.report.safe import PartFailure
from harness.rundir import layout
from tests.unit.report_runs import CP, RUNS, healthy_events, judge_all, priced, result
from tests.unit.results_json import typed


def _run(tmp_path: Path, name: str, events: list[dict[str, Any]] | None, **counts: int) -> Any:
    raw = {**result(name, CP, 0, **counts), "run_dir": str(tmp_path / name / "0")}
    if events is not None:
        Path(raw["run_dir"]).mkdir(parents=True)
        text = "".join(json.dumps(e) + "\n" for e in events)
        (Path(raw["run_dir"]) / layout.EVENTS).write_text(text)
    return raw


CLIENT = {
    "type": "client_config",
    "ts_us": 5,
    "client": "librdkafka 2.12.1",
    "config": {"acks": "all", "linger.ms": "5"},
    "idempotent": True,
}
GROUP = {
    "type": "consumers",
    "ts_us": 6,
    "client": "java 3.8.0",
    "members": 2,
    "config": {"isolation.level": "read_committed"},
}


def test_report_json_spells_each_cell_and_repetition(tmp_path: Path) -> None:
    raw = _run(tmp_path, "cp", [*healthy_events(), CLIENT, GROUP])
    (cell,) = judge_all([raw], {raw["run_dir"]: healthy_events()})
    typed_result = priced(typed(raw), 2.0, 40, 1.5)
    data = report_json(
        [cell], RUNS, provenance_views(RUNS), "Title", {raw["run_dir"]: typed_result}
    )
    assert list(data) == [
        "schema_version",
        "title",
        "exit_code",
        "fail_on",
        "outcome",
        "verdict_counts",
        "verdict_meanings",
        "source",
        "cells",
        "provenance",
        "summary",
    ]
    assert (data["schema_version"], data["title"], data["exit_code"]) == (
        SCHEMA_VERSION,
        "Title",
        0,
    )
    assert data["fail_on"] == ["violation", "unknown"]
    assert data["outcome"] == (
        "The documented guarantees held in all 1 cells. No acknowledged message was lost."
    )
    assert data["verdict_counts"] == {v.value: int(v == cell.verdict) for v in Verdict}
    assert data["verdict_meanings"] == {v.value: VERDICT_MEANING[v] for v in Verdict}
    assert data["source"] == SOURCE
    assert data["summary"] is None
    (cell_data,) = data["cells"]
    guarantee = cell.guarantee
    assert guarantee is not None
    assert cell_data == {
        "experiment": "chaos",
        "cell": "cp",
        "config": cell.config.as_json(),
        "verdict": cell.verdict.value,
        "reasons": list(cell.reasons),
        "guarantee": {
            "loss": guarantee.loss,
            "duplicates": guarantee.duplicates,
            "order": guarantee.order,
            "citation": guarantee.citation,
            "duplicates_citation": guarantee.duplicates_citation,
            "order_citation": guarantee.order_citation,
        },
        "stats": {
            "repetitions": 1,
            "counted": 1,
            "counts": {
                k: {"mean": v.mean, "min": v.min, "max": v.max}
                for k, v in cell.stats.counts.items()
            },
            "loss_rate": 0.0,
            "divergence_rate": 0.0,
        },
        "repetitions": [
            {
                "repetition": 0,
                "run_dir": raw["run_dir"],
                "verdict": cell.repetitions[0].verdict.value,
                "reasons": list(cell.repetitions[0].reasons),
                "loss": 0,
                "acked": 1900,
                "loss_rate": 0.0,
                "availability": typed_result.availability.as_json(),
                "availability_error": None,
                "client": {
                    "client": "librdkafka 2.12.1",
                    "config": {"acks": "all", "linger.ms": "5"},
                    "idempotent": True,
                },
                "members": {
                    "client": "java 3.8.0",
                    "config": {"isolation.level": "read_committed"},
                },
            }
        ],
        "price_of_safety": {
            "measured": 1,
            "repetitions": 1,
            "longest_partition_gap_s": 2.0,
            "longest_gap_s": 1.0,
            "failed": 40,
            "indeterminate": 60,
            "first_ack_after_heal_s": 1.5,
            "heals_without_ack": 0,
            "unmeasured": [],
        },
    }
    assert cell_data["stats"]["counts"]["acked"] == {"mean": 1900.0, "min": 1900, "max": 1900}
    recorded, old = data["provenance"]
    assert recorded == {
        "root": "runs/chaos/ts",
        "recorded": RUNS[0].provenance.model_dump(mode="json"),
        "problem": None,
        "shown": dict(provenance_views(RUNS)[0].lines),
    }
    assert old == {
        "root": "runs/old/ts",
        "recorded": None,
        "problem": "no provenance.json: the run was made by an older harness",
        "shown": {
            "provenance": "not recorded: no provenance.json: the run was made by an older harness"
        },
    }


def test_a_repetition_without_results_or_readable_events_has_nulls(tmp_path: Path) -> None:
    missing = _run(tmp_path, "gone", None, lost=3)
    broken = _run(tmp_path, "broken", [])
    (Path(broken["run_dir"]) / layout.EVENTS).write_text("{not json\n")
    no_group = _run(tmp_path, "plain", [CLIENT])
    cells = judge_all([missing, broken, no_group], {})
    data = report_json(cells, (), (), "T")
    by_cell = {c["cell"]: c for c in data["cells"]}
    for name in ("gone", "broken", "plain"):
        assert "price_of_safety" not in by_cell[name]
        (rep,) = by_cell[name]["repetitions"]
        assert "availability" not in rep and "availability_error" not in rep
    (gone,) = by_cell["gone"]["repetitions"]
    assert (gone["loss"], gone["acked"], gone["loss_rate"]) == (3, 1900, 3 / 1900)
    assert gone["client"] is None and gone["members"] is None
    (broken_rep,) = by_cell["broken"]["repetitions"]
    assert broken_rep["client"] is None and broken_rep["members"] is None
    (plain,) = by_cell["plain"]["repetitions"]
    assert plain["client"]["client"] == "librdkafka 2.12.1" and plain["members"] is None
    assert data["provenance"] == []


def test_a_repetition_rate_needs_a_loss_and_something_acked(tmp_path: Path) -> None:
    (cell,) = judge_all([_run(tmp_path, "c", None)], {})
    rep = cell.repetitions[0]
    rates = []
    for loss, acked in ((None, 10), (2, 0), (2, None), (0, 4), (3, 4)):
        changed = replace(cell, repetitions=(replace(rep, loss=loss, acked=acked),))
        (cell_data,) = report_json([changed], (), (), "T", {})["cells"]
        rates.append(cell_data["repetitions"][0]["loss_rate"])
        assert cell_data["repetitions"][0]["availability"] is None
        assert cell_data["repetitions"][0]["availability_error"] is None
    assert rates == [None, None, None, 0.0, 0.75]


def test_an_availability_error_is_reported_beside_a_missing_availability(tmp_path: Path) -> None:
    raw = _run(tmp_path, "c", None)
    (cell,) = judge_all([raw], {})
    failed = replace(typed(raw), availability=None, availability_error="AvailabilityError: x")
    (cell_data,) = report_json([cell], (), (), "T", {raw["run_dir"]: failed})["cells"]
    rep = cell_data["repetitions"][0]
    assert (rep["availability"], rep["availability_error"]) == (None, "AvailabilityError: x")
    assert cell_data["price_of_safety"]["unmeasured"] == ["repetition 0: AvailabilityError: x"]


def test_a_cell_that_cannot_be_built_is_its_identity_and_the_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cells = judge_all([_run(tmp_path, "a", None), _run(tmp_path, "b", None)], {})

    def broken_stats(stats: Any) -> Any:
        raise RuntimeError("no stats")

    monkeypatch.setattr(json_report, "_stats_json", broken_stats)
    data = report_json(cells, (), (), "T")
    assert data["cells"] == [
        {
            "experiment": "chaos",
            "cell": name,
            "verdict": cell.verdict.value,
            "error": f"cell {name} failed: RuntimeError: no stats (the rest of the report stands)",
        }
        for name, cell in zip("ab", cells, strict=True)
    ]


def test_the_summary_or_the_error_that_kept_it_out(monkeypatch: pytest.MonkeyPatch) -> None:
    summary = CrossRunSummary(groups=(), effects=(), decisive_settings=("acks",))
    cells: list[CellVerdict] = []
    assert report_json(cells, (), (), "T", None, summary)["summary"] == {
        "confidence": 0.95,
        "groups": [],
        "effects": [],
        "decisive_settings": ["acks"],
    }
    failure = PartFailure("the cross-run summary", "ValueError: x")
    assert report_json(cells, (), (), "T", None, failure)["summary"] == {
        "error": "the cross-run summary failed: ValueError: x (the rest of the report stands)"
    }

    def broken(summary: Any) -> Any:
        raise KeyError("k")

    monkeypatch.setattr(json_report, "summary_json", broken)
    assert report_json(cells, (), (), "T", None, summary)["summary"] == {
        "error": "the cross-run summary failed: KeyError: 'k' (the rest of the report stands)"
    }
    empty = report_json(cells, (), (), "Empty")
    assert (empty["exit_code"], empty["outcome"], empty["cells"]) == (
        2,
        "Inconclusive: no results to judge",
        [],
    )


def test_provenance_and_its_views_must_pair_up() -> None:
    with pytest.raises(ValueError, match="zip"):
        report_json([], RUNS, provenance_views(RUNS[:1]), "T")


def test_a_repetitions_typed_form_spells_loss_and_acked_as_the_count_names() -> None:
    """RepetitionJson's `loss` and `acked` keys are CountName.LOSS and CountName.ACKED."""
    from analysis.model.anomalies import CountName

    keys = json_report.RepetitionJson.__annotations__
    assert {CountName.LOSS, CountName.ACKED} <= set(keys)


def test_a_cell_judged_against_no_guarantee_has_a_null_guarantee_not_an_error(
    tmp_path: Path,
) -> None:
    """A cell no row of the guarantee table covers is still written whole, its guarantee
    null."""
    odd = {**_run(tmp_path, "odd", None), "config": {**CP, "fault_class": "leader-nonsense"}}
    (cell,) = judge_all([odd], {})
    assert cell.guarantee is None
    (data,) = report_json([cell], (), (), "T")["cells"]
    assert "error" not in data
    assert (data["cell"], data["verdict"], data["guarantee"]) == ("odd", "UNKNOWN", None)
    assert [r["run_dir"] for r in data["repetitions"]] == [odd["run_dir"]]
