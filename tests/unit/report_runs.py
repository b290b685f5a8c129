"""Crafted results, events and verdicts the report's tests render (no Docker, no Spark), and
their fixtures (registered in tests/unit/conftest.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from analysis import pipeline
from analysis.judge import verdicts
from analysis.judge.outcomes import CellVerdict
from analysis.model.anomalies import ANOMALY_NAMES
from analysis.model.availability import Availability, Gap, HealRecovery, PartitionAvailability
from analysis.model.results import RunResult
from analysis.report.render import ReportPaths, render_report
from harness.rundir.provenance import (
    BrokerImageUsed,
    ExperimentProvenance,
    Provenance,
)
from kafka_chaos.commands import report as report_command
from tests.unit.results_json import typed

T0_S = 1_700_000_000.0

CP = {
    "acks": "all",
    "min_insync_replicas": 2,
    "unclean_leader_election": False,
    "enable_idempotence": True,
    "max_in_flight": 5,
    "replication_factor": 3,
    "partitions": 2,
    "fault_class": "leader-kill",
    "kafka_version": "3.9.0",
}

AP = {
    **CP,
    "acks": "1",
    "min_insync_replicas": 1,
    "enable_idempotence": False,
    "fault_class": "leader-partition",
}

ZERO = dict.fromkeys(ANOMALY_NAMES, 0)


def timeline(seconds: int = 20) -> list[dict[str, Any]]:
    """A per-second timeline with a dip and a latency spike around t=8..11."""
    points = []
    for t in range(seconds):
        hurt = 8 <= t <= 11
        points.append(
            {
                "t_s": t,
                "epoch_s": T0_S + t,
                "sent": 100,
                "ok": 40 if hurt else 100,
                "failed": 10 if hurt else 0,
                "indeterminate": 50 if hurt else 0,
                "ack_latency_p50_ms": 900.0 if hurt else 4.0,
                "ack_latency_p99_ms": None if t == 9 else (4000.0 if hurt else 12.0),
            }
        )
    return points


def result(cell: str, config: dict[str, Any], rep: int, **counts: int) -> dict[str, Any]:
    """A complete repetition of 2000 sends with the given anomaly counts."""
    all_counts = {
        "sent": 2000,
        "acked": 1900,
        "failed": 40,
        "indeterminate": 60,
        "read": 1950,
        **ZERO,
        **counts,
    }
    examples = {}
    if counts.get("lost"):
        examples["lost"] = [
            {"msg_id": 1000 + i, "partition": 0, "offset": 500 + i} for i in range(counts["lost"])
        ]
    if counts.get("offset_divergent"):
        examples["offset_divergent"] = [
            {"msg_id": 77, "partition": 1, "offset": 300, "readback_msg_id_at_offset": 1234}
        ]
    return {
        "run_dir": f"runs/chaos/ts/{cell}/{rep}",
        "experiment": "chaos",
        "cell": cell,
        "repetition": rep,
        "status": "complete",
        "error": None,
        "axes": {},
        "config": config,
        "counts": all_counts,
        "loss": all_counts["lost"] + all_counts["unseen"],
        "loss_by_partition": {"0": counts["lost"]} if counts.get("lost") else {},
        "divergence_by_partition": {"1": 1} if counts.get("offset_divergent") else {},
        "contract": {
            "repeated_msg_ids": 0,
            "unknown_statuses": 0,
            "reported_ok": 1900,
            "reported_failed": 40,
            "reported_indeterminate": 60,
        },
        "examples": examples,
        "sensitivity": {"removed": 5, "found": 5, "passed": True},
        "attribution": attribution(all_counts["lost"] + all_counts["unseen"]),
        "timeline": timeline(),
    }


def attribution(loss: int) -> dict[str, Any]:
    """All but one missing message on no disk, the last one on a disk past the watermark."""
    on_disk = min(loss, 1)
    counts = {"on_no_disk": loss - on_disk, "on_disk_not_served": on_disk}
    counts |= {"segments_unavailable": 0, "not_examined": 0}
    note = "a truncated replica's message counts as on no broker's disk"
    return {"counts": counts, "examples": [], "note": note, "beyond_served": on_disk}


def judge_all(results: list[dict[str, Any]], events: dict[str, Any]) -> list[CellVerdict]:
    """verdicts.judge_all of crafted results.json objects."""
    return verdicts.judge_all([typed(r) for r in results], events)


PROVENANCE = Provenance(
    experiment="chaos",
    git_revision="0123abcd" * 5,
    command_line=("kafka-chaos", "run", "experiments/chaos file.yaml", "--quiet"),
    seed=42,
    images=(
        BrokerImageUsed(
            tag="kafka-chaos/kafka:4.3.1-abc", image_id="sha256:feed", kafka_version="4.3.1"
        ),
    ),
    confluent_kafka_version="2.12.0",
    librdkafka_version="2.12.1",
    cores=2,
    memory_bytes=8 * 2**30,
    started_at_us=1,
)

RUNS = (
    ExperimentProvenance("runs/chaos/ts", PROVENANCE),
    ExperimentProvenance(
        "runs/old/ts", None, "no provenance.json: the run was made by an older harness"
    ),
)


def us(t_s: float) -> int:
    """Epoch microseconds of t_s seconds into the run."""
    return int((T0_S + t_s) * 1e6)


def healthy_events() -> list[dict[str, Any]]:
    """A complete read-back and a recorder tally agreeing with result()'s journal."""
    reports = {"ok": 1900, "failed": 40, "indeterminate": 60}
    return [
        {"type": "readback", "ts_us": us(30), "complete": True, "high_watermarks": {"0": 1}},
        {"type": "recorder_tally", "ts_us": us(29), "reports": reports, "journal_error": None},
    ]


def events_with_fault_and_leader_change() -> list[dict[str, Any]]:
    """A leader kill of node 1 from t=8 to t=12; partition 0 moves from leader 1 to 2."""

    def sample(t: float, leader0: int, isr0: list[int]) -> dict[str, Any]:
        return {
            "type": "sample",
            "ts_us": us(t),
            "controller": 3,
            "partitions": [
                {"partition": 0, "leader": leader0, "isr": isr0},
                {"partition": 1, "leader": 2, "isr": [1, 2, 3]},
            ],
        }

    return [
        *healthy_events(),
        {"type": "phase", "ts_us": us(0), "phase": "workload-start"},
        sample(1, 1, [1, 2, 3]),
        sample(7, 1, [1, 2, 3]),
        {
            "type": "fault_start",
            "ts_us": us(8),
            "fault_id": 1,
            "fault": "kill",
            "target": "leader",
            "nodes": [1],
            "detail": {},
        },
        sample(9, 2, [2, 3]),
        {"type": "fault_end", "ts_us": us(12), "fault_id": 1, "fault": "kill", "nodes": [1]},
        sample(13, 2, [2, 3, 1]),
    ]


@pytest.fixture
def crafted() -> tuple[list[CellVerdict], list[RunResult], dict[str, list[dict[str, Any]]]]:
    """Two cells: AP (2 reps, one lost data: EXPECTED-LOSS) and CP (diverged: VIOLATION)."""
    results = [
        result("ap-leader-partition", AP, 0),
        result("ap-leader-partition", AP, 1, lost=3),
        result("cp-leader-kill", CP, 0, offset_divergent=1, moved=1),
    ]
    events = {r["run_dir"]: events_with_fault_and_leader_change() for r in results}
    return judge_all(results, events), [typed(r) for r in results], events


@pytest.fixture
def rendered(crafted: Any, tmp_path: Path) -> ReportPaths:
    """The report of the crafted cells."""
    cells, results, events = crafted
    return render_report(cells, results, events, RUNS, tmp_path / "report", "Chaos report")


def priced(result: RunResult, stall_s: float, failed: int, recovery_s: float | None) -> RunResult:
    """The result with availability figures: partition 0 stalls `stall_s` from t=8, the topic
    half as long, and every partition acks again `recovery_s` after the heal at t=12."""

    def gap(seconds: float) -> Gap:
        return Gap(us(8), us(8 + seconds), 8.0, 8.0 + seconds)

    availability = Availability(
        workload_start_us=us(0),
        workload_end_us=us(20),
        window_from_events=True,
        ok=1900,
        failed=failed,
        indeterminate=60,
        failed_without_partition=0,
        indeterminate_without_partition=60,
        longest_gap=gap(stall_s / 2),
        partitions=(
            PartitionAvailability(0, 900, failed, 0, gap(stall_s)),
            PartitionAvailability(1, 1000, 0, 0, gap(0.5)),
        ),
        heals=(
            HealRecovery(1, "kill", us(12), 12.0, True, 0.01, {0: recovery_s, 1: 0.01}),
            HealRecovery(2, "kill", us(25), 25.0, False, None, {0: None, 1: None}),
        ),
    )
    return replace(result, availability=availability)


def _raising(message: str, only: str | None = None, at: int = 0) -> Any:
    """A stand-in that raises RuntimeError(message), for every call or only when `only` is in
    its argument number `at` (as text); other calls go to `real`, set on it before use."""

    def stand_in(*args: Any, **kwargs: Any) -> Any:
        if only is None or only in str(args[at]):
            raise RuntimeError(message)
        return stand_in.real(*args, **kwargs)  # type: ignore[attr-defined]

    return stand_in


def _analyse_without_spark(
    monkeypatch: pytest.MonkeyPatch, crafted: Any, tmp_path: Path
) -> list[str]:
    """Make `kafka-chaos report` analyse the crafted results without Java or Spark; return its
    argv's run pattern."""
    _, results, events = crafted
    monkeypatch.setattr(report_command, "require_java", lambda: True)
    monkeypatch.setattr(pipeline, "find_runs", lambda patterns: [Path(r.run_dir) for r in results])
    monkeypatch.setattr(pipeline, "reconcile_runs", lambda run_dirs, master, chunk_rows: results)
    monkeypatch.setattr(pipeline, "write_results", lambda results: None)
    monkeypatch.setattr(pipeline, "read_evidence_by_run", lambda results: events)
    monkeypatch.setattr(pipeline, "read_provenance", lambda run_dirs: list(RUNS))
    return [str(tmp_path / "runs")]
