"""events.jsonl is parsed once per run: reconcile's inspection parses it, the result carries it,
and the judge's evidence is that same object (no second read of the file)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from analysis.judge import verdicts
from analysis.model import evidence as evidence_module
from analysis.spark.reconcile import reconcile_in_process
from tests.unit.reconcile_runs import read, sent, write_run


def test_the_judge_gets_the_events_reconcile_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = [{"type": "phase", "phase": "workload-start", "ts_us": 1}]
    run_dir = write_run(tmp_path, "c", [sent(0, 0)], [read(0, 0)], events=events)
    reads: list[str] = []
    real = evidence_module.read_events
    monkeypatch.setattr(evidence_module, "read_events", lambda d: reads.append(str(d)) or real(d))
    (result,) = reconcile_in_process([run_dir])
    by_run = verdicts.read_evidence_by_run([result])
    assert reads == [str(run_dir)]
    assert by_run[str(run_dir)] is result.evidence
    assert by_run[str(run_dir)].phase_stamps("workload-start") == [1]


def test_a_result_without_events_has_them_read_from_its_run_dir(tmp_path: Path) -> None:
    events = [{"type": "phase", "phase": "heal", "ts_us": 5}]
    run_dir = write_run(tmp_path, "c", [sent(0, 0)], [read(0, 0)], events=events)
    (result,) = reconcile_in_process([run_dir])
    by_run = verdicts.read_evidence_by_run([replace(result, evidence=None)])
    assert by_run[str(run_dir)].phase_stamps("heal") == [5]
