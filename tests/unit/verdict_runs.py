"""Crafted results, events and configurations for the judge's tests (no Docker, no Spark)."""

from __future__ import annotations

from typing import Any

from analysis.judge import cell as cell_statistics
from analysis.judge import guarantees, verdicts
from analysis.judge.guarantees import (
    Guarantee,
)
from analysis.judge.outcomes import CellVerdict, Verdict
from analysis.model.anomalies import COUNT_NAMES
from analysis.model.results import RunResult
from harness.rundir.config import CellConfig
from tests.unit.results_json import typed

CP = {
    "acks": "all",
    "min_insync_replicas": 2,
    "unclean_leader_election": False,
    "enable_idempotence": True,
    "max_in_flight": 5,
    "replication_factor": 3,
    "partitions": 3,
    "fault_class": "leader-kill",
    "kafka_version": "3.9.0",
}

AP = {**CP, "acks": "1", "min_insync_replicas": 1, "enable_idempotence": False}

ACKS0 = {**AP, "acks": "0"}

MIN1 = {**CP, "min_insync_replicas": 1, "enable_idempotence": False, "max_in_flight": 1}

FAULT_CLASSES = [
    "none", "mixed", "all-kill", "leader-kill", "leader-stop", "leader-pause", "leader-partition",
    "leader-isolate", "leader-loss", "leader-slow", "follower-kill", "follower-partition",
    "controller-kill", "random-pause", "node-partition-groups", "all-pause",
]  # fmt: skip

T0_US = 1_700_000_000_000_000


def guarantee_for(config: dict[str, Any]) -> Guarantee:
    """The guarantee of a spec.json config object, read as the analysis reads it."""
    return guarantees.guarantee_for(CellConfig.read(config))


def judge_all(results: list[dict[str, Any]], events: dict[str, Any]) -> list[CellVerdict]:
    """verdicts.judge_all of crafted results.json objects."""
    return verdicts.judge_all([typed(r) for r in results], events)


def judge_cell(results: list[dict[str, Any]], events: dict[str, Any]) -> CellVerdict:
    """verdicts.judge_cell of crafted results.json objects."""
    return verdicts.judge_cell([typed(r) for r in results], events)


def with_fault(config: dict[str, Any], fault: str, **overrides: Any) -> dict[str, Any]:
    """A copy of config with another fault class and any overrides."""
    return {**config, "fault_class": fault, **overrides}


def counts(**overrides: int) -> dict[str, int]:
    """Counts of a clean run of 1000 sends, with overrides."""
    base = dict.fromkeys(COUNT_NAMES, 0)
    base.update(sent=1000, acked=990, failed=6, indeterminate=4, read=992)
    base.update(overrides)
    return base


def result(
    config: dict[str, Any],
    *,
    rep: int = 0,
    cell: str = "cell",
    status: str = "complete",
    error: str | None = None,
    examples: dict[str, list[dict[str, Any]]] | None = None,
    loss_by_partition: dict[str, int] | None = None,
    divergence_by_partition: dict[str, int] | None = None,
    **count_overrides: int,
) -> dict[str, Any]:
    """A results.json dict for one repetition, its contract facts agreeing with its counts."""
    run_counts = counts(**count_overrides) if status == "complete" else None
    contract = None
    if run_counts is not None:
        contract = {
            "repeated_msg_ids": 0,
            "unknown_statuses": 0,
            "reported_ok": run_counts["acked"],
        }
        contract |= {"reported_failed": run_counts["failed"], "reported_indeterminate": 0}
    return {
        "contract": contract,
        "loss_by_partition": loss_by_partition or {},
        "divergence_by_partition": divergence_by_partition or {},
        "run_dir": f"runs/exp/ts/{cell}/{rep}",
        "experiment": "exp",
        "cell": cell,
        "repetition": rep,
        "status": status,
        "error": error,
        "axes": {},
        "config": config,
        "counts": run_counts,
        "examples": examples or {},
        "timeline": [],
    }


def healthy_events(res: dict[str, Any]) -> list[dict[str, Any]]:
    """A complete read-back and a recorder tally that agrees with the result's journal."""
    contract = res.get("contract") or {}
    reports = {s: contract.get(f"reported_{s}", 0) for s in ("ok", "failed", "indeterminate")}
    return [
        {"type": "readback", "ts_us": T0_US, "complete": True, "high_watermarks": {"0": 9}},
        {"type": "recorder_tally", "ts_us": T0_US, "reports": reports, "journal_error": None},
    ]


def judge_repetition(res: dict[str, Any], events: list[dict[str, Any]]):
    """verdicts.judge_repetition with a healthy read-back and tally added to `events`."""
    return verdicts.judge_repetition(typed(res), [*events, *healthy_events(res)])


def sample(t_s: float, isr: list[int], leader: int = 1, partition: int = 0) -> dict[str, Any]:
    """A leader/ISR sample event at t_s seconds."""
    return {
        "type": "sample",
        "ts_us": T0_US + int(t_s * 1e6),
        "controller": 1,
        "partitions": [{"partition": partition, "leader": leader, "isr": isr}],
    }


def fault(t_start: float, t_end: float) -> list[dict[str, Any]]:
    """fault_start/fault_end events of one leader kill."""
    return [
        {
            "type": "fault_start",
            "ts_us": T0_US + int(t_start * 1e6),
            "fault_id": 1,
            "fault": "kill",
            "target": "leader",
            "nodes": [1],
        },
        {
            "type": "fault_end",
            "ts_us": T0_US + int(t_end * 1e6),
            "fault_id": 1,
            "fault": "kill",
            "nodes": [1],
        },
    ]


def judge(results: list[dict[str, Any]], events: dict[str, list[dict[str, Any]]] | None = None):
    """judge_cell with healthy read-back and tally events, plus any events given per run."""
    given = events or {}
    return judge_cell(
        results, {r["run_dir"]: [*given.get(r["run_dir"], []), *healthy_events(r)] for r in results}
    )


def cells_with(*verdict_list: Verdict) -> list[CellVerdict]:
    """Cells carrying only the given verdicts."""
    stats = cell_statistics.cell_stats([])
    return [CellVerdict("c", "e", CellConfig(), v, (), (), stats) for v in verdict_list]


def readback_event(complete: bool) -> dict[str, Any]:
    """A readback event that did or did not reach every high watermark."""
    return {"type": "readback", "ts_us": T0_US + 1, "complete": complete, "records": 5,
            "high_watermarks": {"0": 9}}  # fmt: skip


def tally_event(ok: int, failed: int = 6, indeterminate: int = 0, error: str | None = None):
    """A recorder_tally event."""
    reports = {"ok": ok, "failed": failed, "indeterminate": indeterminate}
    return {"type": "recorder_tally", "ts_us": T0_US + 2, "reports": reports,
            "journal_error": error}  # fmt: skip


def raw_judge(res: dict[str, Any], events: list[dict[str, Any]]):
    """verdicts.judge_repetition with exactly these events."""
    return verdicts.judge_repetition(typed(res), events)


def clean_cp() -> dict[str, Any]:
    """A clean CP result whose journal holds 990 ok and 6 failed reports."""
    res = result(CP)
    res["contract"]["reported_failed"] = 6
    return res


def rows(count: int) -> list[dict[str, Any]]:
    """`count` example rows: msg_id n acked at partition 0, offset n."""
    return [{"msg_id": n, "partition": 0, "offset": n} for n in range(count)]


def _read_counts(res: RunResult) -> dict[str, int]:
    """A typed result's counts, as the judge reads them."""
    assert res.counts is not None
    return dict(res.counts)
