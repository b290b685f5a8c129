"""The guarantee table and every verdict path, on crafted results; no Docker, no Spark."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from analysis.judge import cell as cell_statistics
from analysis.judge import findings, guarantees, outcomes, verdicts
from analysis.judge.guarantees import (
    ALLOWED,
    FORBIDDEN,
    FORBIDDEN_UNLESS_ISR_SHRANK,
    LOSS_TABLE,
    Guarantee,
)
from analysis.judge.outcomes import CellVerdict, Verdict
from analysis.judge.verdicts import exit_code
from analysis.model.anomalies import COUNT_NAMES, anomaly
from analysis.model.evidence import RunEvidence
from analysis.model.results import RunResult
from harness.rundir.config import CellConfig, ConfigError
from harness.rundir.events import load_events
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


# ---------------------------------------------------------------------------------------------
# The guarantee table


def test_table_is_data_of_frozen_rows() -> None:
    assert isinstance(LOSS_TABLE, tuple)
    for row in LOSS_TABLE:
        assert dataclasses.is_dataclass(row)
        with pytest.raises(dataclasses.FrozenInstanceError):
            row.loss = ALLOWED  # type: ignore[misc]
        assert row.citation


@pytest.mark.parametrize("fault_class", FAULT_CLASSES)
def test_acks0_allows_loss_everywhere(fault_class: str) -> None:
    assert guarantee_for(with_fault(ACKS0, fault_class)).loss == ALLOWED


@pytest.mark.parametrize("fault_class", [f for f in FAULT_CLASSES if f != "none"])
def test_cp_forbids_loss_under_every_simulated_fault(fault_class: str) -> None:
    g = guarantee_for(with_fault(CP, fault_class))
    assert g.loss == FORBIDDEN
    assert "min.insync=2" in g.citation


@pytest.mark.parametrize(
    ("fault_class", "loss", "quote"),
    [
        ("leader-kill", ALLOWED, "leader kill"),
        ("leader-stop", ALLOWED, "loss allowed"),
        ("leader-pause", ALLOWED, "loss allowed"),
        ("leader-partition", ALLOWED, "zombie leader keeps acking"),
        ("leader-isolate", ALLOWED, "zombie leader keeps acking"),
        ("leader-loss", ALLOWED, "loss allowed"),
        ("leader-slow", ALLOWED, "loss allowed"),
        ("all-kill", ALLOWED, "all brokers killed at once"),
        ("mixed", ALLOWED, "may hit the current leader"),
        ("random-kill", ALLOWED, "may hit the current leader"),
        ("controller-kill", ALLOWED, "may hit the current leader"),
        ("follower-kill", FORBIDDEN, "none expected"),
        ("follower-partition", FORBIDDEN, "treated as forbidden"),
        ("none", FORBIDDEN, "no fault injected"),
    ],
)
def test_ap_acks1_rows(fault_class: str, loss: str, quote: str) -> None:
    g = guarantee_for(with_fault(AP, fault_class))
    assert (g.loss, g.duplicates, g.order) == (loss, ALLOWED, "not-guaranteed")
    assert quote in g.citation


@pytest.mark.parametrize(
    ("fault_class", "loss", "quote"),
    [
        ("leader-kill", FORBIDDEN_UNLESS_ISR_SHRANK, "unless the ISR had already shrunk"),
        ("leader-stop", FORBIDDEN_UNLESS_ISR_SHRANK, "unless the ISR had already shrunk"),
        ("all-kill", FORBIDDEN_UNLESS_ISR_SHRANK, "none expected"),
        ("mixed", FORBIDDEN_UNLESS_ISR_SHRANK, "may hit the current leader"),
        ("random-kill", FORBIDDEN_UNLESS_ISR_SHRANK, "may hit the current leader"),
        ("leader-partition", FORBIDDEN, "ISR change needs the controller"),
        ("follower-kill", FORBIDDEN, "follower kill"),
        ("leader-pause", FORBIDDEN, "none"),
    ],
)
def test_acks_all_min_insync_1_rows(fault_class: str, loss: str, quote: str) -> None:
    g = guarantee_for(with_fault(MIN1, fault_class))
    assert g.loss == loss
    assert quote in g.citation


@pytest.mark.parametrize(
    ("base", "fault_class", "loss"),
    [
        (CP, "all-power-loss", ALLOWED),
        (MIN1, "all-power-loss", ALLOWED),
        (AP, "all-power-loss", ALLOWED),
        (CP, "leader-power-loss", FORBIDDEN),
        (CP, "follower-power-loss", FORBIDDEN),
        (MIN1, "leader-power-loss", FORBIDDEN_UNLESS_ISR_SHRANK),
        (MIN1, "random-power-loss", FORBIDDEN_UNLESS_ISR_SHRANK),
        (AP, "leader-power-loss", ALLOWED),
        (AP, "follower-power-loss", FORBIDDEN),
    ],
)
def test_power_loss_rows(base: dict[str, Any], fault_class: str, loss: str) -> None:
    g = guarantee_for(with_fault(base, fault_class))
    assert g.loss == loss
    if fault_class == "all-power-loss":
        assert "power loss" in g.citation


@pytest.mark.parametrize(
    ("base", "fault_class", "loss", "quote"),
    [
        (AP, "all-rolling-restart", ALLOWED, "rolling restart"),
        (CP, "all-rolling-restart", FORBIDDEN, "rolling restart"),
        (MIN1, "all-rolling-restart", FORBIDDEN, "rolling restart"),
        (AP, "follower-rolling-restart", FORBIDDEN, "follower kill"),
    ],
)
def test_rolling_restart_rows(
    base: dict[str, Any], fault_class: str, loss: str, quote: str
) -> None:
    g = guarantee_for(with_fault(base, fault_class))
    assert g.loss == loss and quote in g.citation


@pytest.mark.parametrize(
    ("base", "fault_class", "loss"),
    [
        (CP, "all-kill", ALLOWED),
        (CP, "mixed", ALLOWED),
        (CP, "random-kill", ALLOWED),
        (CP, "node-partition-groups", ALLOWED),
        (CP, "leader-kill", FORBIDDEN),
        (AP, "follower-kill", FORBIDDEN),
        (MIN1, "leader-kill", FORBIDDEN_UNLESS_ISR_SHRANK),
    ],
)
def test_unclean_election_allows_loss_only_for_multi_node_faults(
    base: dict[str, Any], fault_class: str, loss: str
) -> None:
    g = guarantee_for(with_fault(base, fault_class, unclean_leader_election=True))
    assert g.loss == loss
    if loss == ALLOWED:
        assert "unclean.leader.election.enable=true" in g.citation


@pytest.mark.parametrize(
    ("idempotence", "in_flight", "duplicates", "order"),
    [
        (True, 5, FORBIDDEN, "guaranteed"),
        (False, 1, ALLOWED, "guaranteed"),
        (False, 5, ALLOWED, "not-guaranteed"),
    ],
)
def test_duplicates_and_order(
    idempotence: bool, in_flight: int, duplicates: str, order: str
) -> None:
    g = guarantee_for({**CP, "enable_idempotence": idempotence, "max_in_flight": in_flight})
    assert (g.duplicates, g.order) == (duplicates, order)


def test_acks_spellings_and_unknown_settings() -> None:
    assert guarantee_for({**CP, "acks": "-1"}) == guarantee_for(CP)
    with pytest.raises(ValueError, match="unknown fault_class"):
        guarantee_for(with_fault(CP, "leader-meteor"))
    with pytest.raises(ValueError, match="unknown acks"):
        guarantee_for({**CP, "acks": "2"})


# ---------------------------------------------------------------------------------------------
# Repetition verdicts


def test_pass_when_forbidden_loss_did_not_happen() -> None:
    v = judge_repetition(result(CP), [])
    assert v.verdict == Verdict.PASS
    assert "no acknowledged message lost" in v.reasons[0]
    assert v.guarantee == guarantee_for(CP)


def test_violation_for_forbidden_loss_names_counts_and_ids() -> None:
    examples = {"lost": [{"msg_id": 42, "partition": 1, "offset": 17}]}
    v = judge_repetition(result(CP, lost=3, examples=examples), [])
    assert v.verdict == Verdict.VIOLATION
    assert "3 lost" in v.reasons[0]
    assert "msg_id 42 at p1@17" in v.reasons[0]
    assert v.loss == 3


def test_unseen_counts_as_loss() -> None:
    examples = {"unseen": [{"msg_id": 7, "partition": 0, "offset": 3}]}
    v = judge_repetition(result(CP, lost=1, unseen=2, examples=examples), [])
    assert v.verdict == Verdict.VIOLATION
    assert v.loss == 3
    assert v.reasons[0].startswith("forbidden loss: 3 of 990 acked missing (1 lost")
    assert "2 unseen" in v.reasons[0] and "msg_id 7 at p0@3" in v.reasons[0]


def test_rewritten_offset_is_its_own_violation_never_loss() -> None:
    examples = {
        "offset_divergent": [
            {"msg_id": 7, "partition": 0, "offset": 3, "readback_msg_id_at_offset": 9}
        ]
    }
    v = judge_repetition(result(CP, offset_divergent=2, moved=2, examples=examples), [])
    assert v.verdict == Verdict.VIOLATION
    assert v.loss == 0
    assert v.reasons[0].startswith("forbidden acknowledged offset rewritten: 2 acknowledged")
    assert "read-back holds msg_id 9" in v.reasons[0]
    assert not any(r.startswith("forbidden loss") for r in v.reasons)
    assert any(r.startswith("no acknowledged message lost") for r in v.reasons)


def test_rewritten_offset_allowed_where_loss_is() -> None:
    v = judge_repetition(result(with_fault(AP, "leader-partition"), offset_divergent=2), [])
    assert v.verdict == Verdict.PASS
    assert any("allowed where loss is" in r for r in v.reasons)


def test_duplicates_violate_only_with_idempotence() -> None:
    dup = {"duplicated": [{"msg_id": 5, "partition": 0, "offset": 8}]}
    v = judge_repetition(result(CP, duplicated=2, examples=dup), [])
    assert v.verdict == Verdict.VIOLATION
    assert any("forbidden duplicates" in r and "msg_id 5" in r for r in v.reasons)
    allowed = judge_repetition(result({**CP, "enable_idempotence": False}, duplicated=2), [])
    assert allowed.verdict == Verdict.PASS
    assert any("2 duplicated" in r and "allowed" in r for r in allowed.reasons)


def test_reordering_violates_only_where_order_is_guaranteed() -> None:
    v = judge_repetition(result(MIN1, reordered=4), [])
    assert v.verdict == Verdict.VIOLATION
    assert any("forbidden reordering" in r for r in v.reasons)
    loose = judge_repetition(result({**MIN1, "max_in_flight": 5}, reordered=4), [])
    assert loose.verdict == Verdict.PASS


def test_expected_loss_where_allowed() -> None:
    v = judge_repetition(result(with_fault(AP, "leader-partition"), lost=5), [])
    assert v.verdict == Verdict.EXPECTED_LOSS
    assert "zombie leader keeps acking" in v.reasons[0]


def test_legal_anomalies_are_counted_not_judged() -> None:
    v = judge_repetition(result(CP, failed_present=2, indeterminate_present=1, phantom=1), [])
    assert v.verdict == Verdict.PASS
    assert any(r.startswith("2 failed present: the send failed") for r in v.reasons)
    assert any(r.startswith("1 phantom: log records never sent") for r in v.reasons)


def test_unknown_for_incomplete_and_error_runs() -> None:
    v = judge_repetition(result(CP, status="incomplete", error="broker 2 never came back"), [])
    assert v.verdict == Verdict.UNKNOWN
    assert "broker 2 never came back" in v.reasons[0]
    assert judge_repetition(result(CP, status="error"), []).verdict == Verdict.UNKNOWN


def test_unknown_when_nothing_was_acked() -> None:
    v = judge_repetition(result(CP, acked=0), [])
    assert v.verdict == Verdict.UNKNOWN
    assert "nothing to judge" in v.reasons[0]


def test_checker_exception_becomes_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(config: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(verdicts, "guarantee_for", explode)
    v = judge_repetition(result(CP), [])
    assert v.verdict == Verdict.UNKNOWN
    assert v.reasons == ("checker error: RuntimeError: boom",)


def test_malformed_input_becomes_unknown_not_a_crash() -> None:
    broken = result(CP)
    del broken["counts"]["lost"]
    assert judge_repetition(broken, []).verdict == Verdict.UNKNOWN
    assert judge_repetition(result(with_fault(CP, "leader-meteor")), []).verdict == Verdict.UNKNOWN
    assert judge_repetition({"status": "complete", "counts": 3}, []).verdict == Verdict.UNKNOWN


def test_isr_exception_applies_when_isr_had_shrunk_before_the_fault() -> None:
    events = [sample(1, [1, 2, 3]), sample(2, [1]), *fault(5, 8), sample(6, [2], leader=2)]
    v = judge_repetition(result(MIN1, lost=2, loss_by_partition={"0": 2}), events)
    assert v.verdict == Verdict.EXPECTED_LOSS
    assert "ISR had shrunk to the leader before the fault (p0 ISR [1] at t=2.0 s)" in v.reasons[0]


@pytest.mark.parametrize(
    "isr_samples",
    [
        [sample(1, [1, 2, 3]), sample(2, [1, 2, 3])],  # never shrank
        [sample(1, [1, 2, 3]), sample(6, [2], leader=2)],  # shrank only after the fault
        [sample(2, [1], partition=1)],  # shrank, but on a partition that lost nothing
    ],
)
def test_isr_exception_does_not_apply_otherwise(isr_samples: list[dict[str, Any]]) -> None:
    res = result(MIN1, lost=2, loss_by_partition={"0": 2})
    v = judge_repetition(res, [*isr_samples, *fault(5, 8)])
    assert v.verdict == Verdict.VIOLATION
    assert "exception does not apply" in v.reasons[0]


# ---------------------------------------------------------------------------------------------
# Cell verdicts


def judge(results: list[dict[str, Any]], events: dict[str, list[dict[str, Any]]] | None = None):
    """judge_cell with healthy read-back and tally events, plus any events given per run."""
    given = events or {}
    return judge_cell(
        results, {r["run_dir"]: [*given.get(r["run_dir"], []), *healthy_events(r)] for r in results}
    )


def test_cell_violation_if_any_repetition_violates() -> None:
    cell = judge([result(CP, rep=0), result(CP, rep=1, lost=1), result(CP, rep=2)])
    assert cell.verdict == Verdict.VIOLATION
    assert cell.reasons[0] == "1 of 3 repetitions violate the documented guarantee"
    assert cell.reasons[1].startswith("rep 1: forbidden loss")


def test_cell_expected_loss_if_allowed_and_some_repetition_lost() -> None:
    cell = judge([result(AP, rep=0), result(AP, rep=1, lost=4)])
    assert cell.verdict == Verdict.EXPECTED_LOSS
    assert [r.verdict for r in cell.repetitions] == [Verdict.PASS, Verdict.EXPECTED_LOSS]


def test_cell_not_provoked_if_allowed_loss_never_happened() -> None:
    cell = judge([result(AP, rep=n) for n in range(3)])
    assert cell.verdict == Verdict.NOT_PROVOKED
    assert "none of 3 repetitions" in cell.reasons[0]


def test_cell_unknown_if_a_repetition_is_unknown_and_nothing_decisive() -> None:
    allowed = judge([result(AP, rep=0), result(AP, rep=1, status="incomplete")])
    assert allowed.verdict == Verdict.UNKNOWN
    forbidden = judge([result(CP, rep=0), result(CP, rep=1, status="error", error="x")])
    assert forbidden.verdict == Verdict.UNKNOWN
    assert forbidden.reasons == ("1 of 2 repetitions could not be judged", "rep 1: run error: x")


def test_cell_unknown_does_not_hide_a_violation() -> None:
    cell = judge([result(CP, rep=0, status="incomplete"), result(CP, rep=1, duplicated=1)])
    assert cell.verdict == Verdict.VIOLATION


def test_cell_pass() -> None:
    cell = judge([result(CP, rep=0), result(CP, rep=1)])
    assert cell.verdict == Verdict.PASS
    assert (cell.cell, cell.experiment, cell.config) == ("cell", "exp", CellConfig.read(CP))


def test_cell_isr_exception_uses_each_repetitions_events() -> None:
    shrunk = result(MIN1, rep=0, lost=1, loss_by_partition={"0": 1})
    healthy = result(MIN1, rep=1)
    events = {shrunk["run_dir"]: [sample(1, [1]), *fault(3, 4)]}
    assert judge([shrunk, healthy], events).verdict == Verdict.EXPECTED_LOSS
    assert judge([shrunk, healthy], {}).verdict == Verdict.VIOLATION


def test_cell_stats() -> None:
    cell = judge([result(AP, rep=0, lost=2), result(AP, rep=1, lost=4, acked=1010)])
    lost = cell.stats.counts["lost"]
    assert (lost.mean, lost.min, lost.max, lost.total) == (3.0, 2, 4, 6)
    assert cell.stats.loss_rate == pytest.approx(6 / 2000)
    assert cell.stats.repetitions == cell.stats.counted == 2


def test_judge_all_groups_by_experiment_and_cell() -> None:
    cells = judge_all([result(CP, cell="a"), result(AP, cell="b"), result(CP, cell="a", rep=1)], {})
    assert [(c.cell, len(c.repetitions)) for c in cells] == [("a", 2), ("b", 1)]


# ---------------------------------------------------------------------------------------------
# Exit code and loading


def cells_with(*verdict_list: Verdict) -> list[CellVerdict]:
    """Cells carrying only the given verdicts."""
    stats = cell_statistics.cell_stats([])
    return [CellVerdict("c", "e", CellConfig(), v, (), (), stats) for v in verdict_list]


@pytest.mark.parametrize(
    ("verdict_list", "code"),
    [
        ((Verdict.PASS, Verdict.EXPECTED_LOSS, Verdict.NOT_PROVOKED), 0),
        ((Verdict.PASS, Verdict.VIOLATION), 1),
        ((Verdict.UNKNOWN, Verdict.VIOLATION), 1),
        ((Verdict.PASS, Verdict.UNKNOWN), 2),
        ((), 2),
    ],
)
def test_exit_code(verdict_list: tuple[Verdict, ...], code: int) -> None:
    assert exit_code(cells_with(*verdict_list)) == code


def test_load_events(tmp_path: Path) -> None:
    run = tmp_path / "exp" / "ts" / "cell" / "0"
    run.mkdir(parents=True)
    lines = [json.dumps(sample(1, [1, 2, 3])), "", json.dumps(fault(2, 3)[0]), '{"type": "sam']
    (run / "events.jsonl").write_text("\n".join(lines))
    assert [e["type"] for e in load_events(run)] == ["sample", "fault_start"]
    assert load_events(tmp_path / "missing") == []
    loaded = [typed({**result(CP), "run_dir": str(run)})]
    (evidence,) = verdicts.read_evidence_by_run(loaded).values()
    assert [e.type for e in evidence.events.events] == ["sample", "fault_start"]
    assert evidence.events.unreadable == 1  # the torn last line
    assert evidence.run_dir == run and evidence.fault_starts[0].nodes == [1]


def test_guarantees_module_exports() -> None:
    assert set(guarantees.__all__) <= set(dir(guarantees))
    assert set(verdicts.__all__) <= set(dir(verdicts))


# ---------------------------------------------------------------------------------------------
# Contract checks: each one alone turns a clean CP repetition UNKNOWN, with its reason


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


def test_a_clean_record_passes_the_contract() -> None:
    v = raw_judge(clean_cp(), [readback_event(True), tally_event(990)])
    assert v.verdict == Verdict.PASS


@pytest.mark.parametrize(
    ("events", "reason"),
    [
        ([readback_event(False), tally_event(990)], "incomplete read-back: it timed out"),
        ([tally_event(990)], "no read-back was recorded"),
        ([readback_event(True)], "no recorder tally"),
        (
            [readback_event(True), tally_event(995)],
            "the journal disagrees with the recorder's tally: 995 ok delivery reports, "
            "990 journalled (+5 dropped)",
        ),
        (
            [readback_event(True), tally_event(990, indeterminate=2)],
            "2 indeterminate delivery reports, 0 journalled",
        ),
        ([readback_event(True), tally_event(990, error="disk full")], "failed to write: disk full"),
        (
            [
                readback_event(True),
                tally_event(990),
                {
                    "type": "fault_error",
                    "ts_us": T0_US,
                    "fault_id": 2,
                    "fault": "partition",
                    "target": "leader",
                    "error": "iptables: not found",
                    "stage": "inject",
                },
            ],
            "fault 2 (partition leader) failed to inject: iptables: not found",
        ),
        (
            [
                readback_event(True),
                tally_event(990),
                {
                    "type": "fault_error",
                    "ts_us": T0_US,
                    "fault_id": 1,
                    "fault": "pause",
                    "target": "leader",
                    "error": "no such container",
                    "stage": "heal",
                },
            ],
            "fault 1 (pause leader) failed to heal: no such container",
        ),
        (
            [readback_event(True), tally_event(990), {"type": "harness_error", "error": "boom"}],
            "harness error: boom",
        ),
    ],
)
def test_contract_breach_makes_the_repetition_unknown(events: list, reason: str) -> None:
    v = raw_judge(clean_cp(), events)
    assert v.verdict == Verdict.UNKNOWN
    assert any(reason in r for r in v.reasons), v.reasons


def test_an_incomplete_readback_is_unknown_even_with_loss_under_cp() -> None:
    res = result(CP, lost=0, unseen=990, read=0)  # an empty read-back
    res["contract"]["reported_failed"] = 6
    v = raw_judge(res, [readback_event(False), tally_event(990)])
    assert v.verdict == Verdict.UNKNOWN
    assert v.loss == 990  # the figure is still reported, never judged


@pytest.mark.parametrize(
    ("breach", "reason"),
    [
        ({"repeated_msg_ids": 1}, "acked.parquet holds 1 msg_id(s) more than once"),
        ({"unknown_statuses": 2}, "2 row(s) whose status is none of ok, failed, indeterminate"),
    ],
)
def test_acked_rows_breaking_the_contract_make_it_unknown(breach: dict, reason: str) -> None:
    res = clean_cp()
    res["contract"].update(breach)
    v = raw_judge(res, [readback_event(True), tally_event(990)])
    assert v.verdict == Verdict.UNKNOWN
    assert reason in v.reasons[0]


def test_a_result_without_contract_facts_is_unknown() -> None:
    res = clean_cp()
    del res["contract"]
    assert raw_judge(res, [readback_event(True), tally_event(990)]).verdict == Verdict.UNKNOWN


# ---------------------------------------------------------------------------------------------
# The one loss figure, and the rules around it


def test_empty_readback_under_cp_reports_full_loss() -> None:
    v = judge_repetition(result(CP, unseen=990, read=0), [])
    assert v.verdict == Verdict.VIOLATION
    assert v.loss == 990 == v.acked
    cell = judge([result(CP, unseen=990, read=0)])
    assert cell.stats.loss_rate == 1.0


def test_loss_rate_counts_lost_and_unseen_never_divergence() -> None:
    ap = with_fault(AP, "leader-partition")
    cell = judge([result(ap, rep=0, lost=10, unseen=30, offset_divergent=10, acked=1000)])
    assert cell.stats.loss_rate == pytest.approx(40 / 1000)
    assert cell.stats.divergence_rate == pytest.approx(10 / 1000)
    assert cell.stats.counts["loss"].mean == 40
    assert cell.repetitions[0].loss == 40


def test_isr_exception_needs_a_shrink_in_every_partition_that_lost() -> None:
    res = result(MIN1, lost=3, loss_by_partition={"0": 1, "2": 2})
    only_p2 = [sample(1, [1], partition=2), *fault(5, 8)]
    v = judge_repetition(res, only_p2)
    assert v.verdict == Verdict.VIOLATION
    assert "for partition 0, so the exception does not apply" in v.reasons[0]
    both = [sample(1, [1], partition=2), sample(2, [1], partition=0), *fault(5, 8)]
    assert judge_repetition(res, both).verdict == Verdict.EXPECTED_LOSS


def test_isr_exception_for_an_unknown_partition_needs_any_shrink() -> None:
    res = result(MIN1, lost=1, loss_by_partition={"unknown": 1})
    assert judge_repetition(res, [sample(1, [1], partition=2), *fault(5, 8)]).verdict == (
        Verdict.EXPECTED_LOSS
    )
    assert judge_repetition(res, [sample(1, [1, 2]), *fault(5, 8)]).verdict == Verdict.VIOLATION


def test_isr_sample_at_the_fault_start_is_not_before_it() -> None:
    res = result(MIN1, lost=1, loss_by_partition={"0": 1})
    assert judge_repetition(res, [sample(5, [1]), *fault(5, 8)]).verdict == Verdict.VIOLATION
    assert judge_repetition(res, [sample(4.9, [1]), *fault(5, 8)]).verdict == (
        Verdict.EXPECTED_LOSS
    )


def test_isr_exception_counts_a_shrink_before_the_last_of_several_faults() -> None:
    res = result(MIN1, lost=1, loss_by_partition={"0": 1})
    second = [{**e, "fault_id": 2, "ts_us": e["ts_us"] + 10_000_000} for e in fault(5, 8)]
    events = [*fault(5, 8), sample(12, [1]), *second]  # shrank between the two faults
    assert judge_repetition(res, events).verdict == Verdict.EXPECTED_LOSS


def test_rewritten_offsets_fall_under_the_isr_exception_per_partition() -> None:
    res = result(MIN1, offset_divergent=2, divergence_by_partition={"1": 2})
    assert judge_repetition(res, [sample(1, [1], partition=0), *fault(5, 8)]).verdict == (
        Verdict.VIOLATION
    )
    assert judge_repetition(res, [sample(1, [1], partition=1), *fault(5, 8)]).verdict == (
        Verdict.PASS
    )


def test_duplicates_of_unacknowledged_sends_are_allowed_under_idempotence() -> None:
    v = judge_repetition(result(CP, duplicated_unacked=4), [])
    assert v.verdict == Verdict.PASS
    assert any(r.startswith("4 dup unacked") for r in v.reasons)


def test_expired_messages_are_noted_never_lost() -> None:
    v = judge_repetition(result(CP, expired=12), [])
    assert v.verdict == Verdict.PASS and v.loss == 0
    assert any(r.startswith("12 expired: acked below") for r in v.reasons)


def test_cell_unknown_outranks_expected_loss() -> None:
    cell = judge([result(AP, rep=0, lost=4), result(AP, rep=1, status="incomplete")])
    assert cell.verdict == Verdict.UNKNOWN
    assert cell.reasons[0] == (
        "1 of 2 repetitions could not be judged (loss allowed and observed in 1)"
    )


def test_violation_reasons_come_first() -> None:
    v = judge_repetition(result(CP, duplicated=1, failed_present=1, lost=1), [])
    assert v.reasons[0].startswith("forbidden loss")
    assert v.reasons[1].startswith("forbidden duplicates")
    assert v.reasons[2].startswith("1 failed present")


# ---------------------------------------------------------------------------------------------
# Settings as they travel through the matrix, and settings the table does not cover


@pytest.mark.parametrize(
    ("name", "role", "kind"),
    [
        ("none", "none", ""),
        ("mixed", "mixed", ""),
        ("leader-kill", "leader", "kill"),
        ("all-power-loss", "all", "power-loss"),
        ("node-partition-groups", "node", "partition-groups"),
    ],
)
def test_fault_class_names_split_into_role_and_kind(name: str, role: str, kind: str) -> None:
    assert guarantees.FaultClass.parse(name) == guarantees.FaultClass(name, role, kind)


def test_an_unknown_fault_class_says_how_to_fix_it() -> None:
    fix = r"fix the experiment's fault class or add a row to analysis/guarantees\.py$"
    with pytest.raises(ValueError, match=fix):
        guarantees.FaultClass.parse("leader-meteor")


@pytest.mark.parametrize("spelling", [True, 1, "true", " True ", "TRUE", "1", "yes", "on", "On"])
def test_true_spellings_of_a_bool_setting(spelling: object) -> None:
    g = guarantee_for({**AP, "enable_idempotence": spelling})
    assert (g.duplicates, g.order) == (FORBIDDEN, "guaranteed")
    unclean = guarantee_for(with_fault(CP, "all-kill", unclean_leader_election=spelling))
    assert unclean.loss == ALLOWED


@pytest.mark.parametrize("spelling", [False, 0, "false", "False", "0", "no", "off", ""])
def test_false_spellings_of_a_bool_setting(spelling: object) -> None:
    g = guarantee_for({**AP, "enable_idempotence": spelling})
    assert (g.duplicates, g.order) == (ALLOWED, "not-guaranteed")
    unclean = guarantee_for(with_fault(CP, "all-kill", unclean_leader_election=spelling))
    assert unclean.loss == FORBIDDEN


@pytest.mark.parametrize(
    ("idempotence", "citation"),
    [
        (True, guarantees.DUPLICATES_FORBIDDEN_CITATION),
        (False, guarantees.DUPLICATES_ALLOWED_CITATION),
    ],
)
def test_duplicates_rule_cites_the_idempotence_setting(idempotence: bool, citation: str) -> None:
    g = guarantee_for({**CP, "enable_idempotence": idempotence})
    assert g.duplicates_citation == citation
    assert g.order_citation == guarantees.ORDER_CITATION


@pytest.mark.parametrize("min_insync", [-1, guarantees.MAX_MIN_INSYNC + 1])
def test_a_setting_no_row_covers_raises_naming_it(min_insync: int) -> None:
    with pytest.raises(LookupError) as raised:
        guarantee_for({**CP, "min_insync_replicas": min_insync})
    assert str(raised.value) == (
        f"no documented guarantee for acks=all, min.insync={min_insync}, fault_class=leader-kill: "
        "add a row to analysis/guarantees.py LOSS_TABLE"
    )


def test_an_uncovered_setting_makes_the_repetition_unknown() -> None:
    v = judge_repetition(result({**CP, "min_insync_replicas": 5000}), [])
    assert v.verdict == Verdict.UNKNOWN
    assert v.reasons[0].startswith("checker error: LookupError: no documented guarantee")


# ---------------------------------------------------------------------------------------------
# What a repetition verdict carries besides its verdict


def test_a_judged_repetition_carries_its_identity_and_figures() -> None:
    v = judge_repetition(result(AP, rep=3, lost=2, unseen=1), [])
    assert (v.run_dir, v.repetition, v.loss, v.acked) == ("runs/exp/ts/cell/3", 3, 3, 990)


def test_an_untrusted_record_keeps_its_guarantee_identity_and_figures() -> None:
    res = result(CP, rep=2, unseen=990, read=0)
    res["contract"]["reported_failed"] = 6
    v = raw_judge(res, [readback_event(False), tally_event(990)])
    assert v.verdict == Verdict.UNKNOWN
    assert (v.guarantee, v.run_dir, v.repetition) == (guarantee_for(CP), res["run_dir"], 2)
    assert (v.loss, v.acked) == (990, 990)


def test_an_unfinished_run_keeps_its_guarantee_and_identity() -> None:
    v = judge_repetition(result(CP, rep=4, status="incomplete"), [])
    assert v.verdict == Verdict.UNKNOWN
    assert (v.guarantee, v.run_dir, v.repetition) == (guarantee_for(CP), "runs/exp/ts/cell/4", 4)
    assert (v.loss, v.acked) == (None, None)


def test_a_checker_error_keeps_the_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(config: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(verdicts, "guarantee_for", explode)
    v = judge_repetition(result(CP, rep=5), [])
    assert (v.verdict, v.run_dir, v.repetition) == (Verdict.UNKNOWN, "runs/exp/ts/cell/5", 5)


def test_a_result_without_error_or_identity_is_unknown_and_says_so() -> None:
    v = raw_judge({"config": CP, "status": "error"}, [])
    assert v.verdict == Verdict.UNKNOWN
    assert v.reasons == ("run error: no error recorded",)
    assert (v.guarantee, v.run_dir, v.repetition) == (guarantee_for(CP), "", 0)
    kept = raw_judge({"config": CP, "run_dir": "runs/x/0", "status": "error"}, [])
    assert (kept.run_dir, kept.repetition) == ("runs/x/0", 0)
    bare = raw_judge({"status": "error", "repetition": 3}, [])
    assert (bare.run_dir, bare.repetition, bare.guarantee) == ("", 3, None)
    assert bare.reasons == ("run error: no error recorded",)


def test_an_incomplete_run_is_unknown_even_when_it_has_counts() -> None:
    res = result(CP, lost=5)
    res |= {"status": "incomplete", "error": "read-back timed out"}
    v = judge_repetition(res, [])
    assert v.verdict == Verdict.UNKNOWN
    assert v.reasons == ("run incomplete: read-back timed out",)


@pytest.mark.parametrize("value", [-1, True, "3", None, 2.5])
def test_a_count_that_is_no_non_negative_int_is_a_checker_error(value: object) -> None:
    res = result(CP)
    res["counts"]["lost"] = value
    v = judge_repetition(res, [])
    assert v.verdict == Verdict.UNKNOWN
    assert v.reasons == (
        f"checker error: ValueError: count 'lost' is {value!r}, expected a non-negative int",
    )


def test_an_unknown_loss_rule_is_a_checker_error(monkeypatch: pytest.MonkeyPatch) -> None:
    odd = dataclasses.replace(guarantee_for(CP), loss="sometimes")
    monkeypatch.setattr(verdicts, "guarantee_for", lambda config: odd)
    v = judge_repetition(result(CP, lost=1), [])
    assert v.verdict == Verdict.UNKNOWN
    assert v.reasons == ("checker error: ValueError: unknown loss rule 'sometimes'",)


# ---------------------------------------------------------------------------------------------
# Contract breaches, word for word


def test_contract_breach_reasons_in_full() -> None:
    def reasons(res: dict[str, Any], events: list[dict[str, Any]]) -> tuple[str, ...]:
        return raw_judge(res, events).reasons

    assert reasons(clean_cp(), [tally_event(990)]) == (
        "no read-back was recorded in events.jsonl: its completeness is unknown",
    )
    assert reasons(clean_cp(), [readback_event(True)]) == (
        "no recorder tally in events.jsonl: the journal cannot be checked",
    )
    assert reasons(clean_cp(), [readback_event(False), tally_event(990)]) == (
        "incomplete read-back: it timed out before the high watermarks {'0': 9} (5 records read)",
    )
    bare_readback = {"type": "readback", "complete": False}
    assert reasons(clean_cp(), [bare_readback, tally_event(990)]) == (
        "incomplete read-back: it timed out before the high watermarks {} (? records read)",
    )
    bare_fault_error = {"type": "fault_error", "error": "gone"}
    assert reasons(clean_cp(), [readback_event(True), tally_event(990), bare_fault_error]) == (
        "fault ? (? ?) failed to inject: gone",
    )
    no_contract = clean_cp()
    del no_contract["contract"]
    assert reasons(no_contract, [readback_event(True), tally_event(990)]) == (
        "the result carries no contract facts (reconciled by an older analysis)",
    )


def test_a_failed_sensitivity_check_is_a_breach_in_full() -> None:
    res = {**clean_cp(), "sensitivity": {"removed": 12, "found": 11, "passed": False}}
    assert raw_judge(res, [readback_event(True), tally_event(990)]).reasons == (
        "the checker failed its sensitivity check: of 12 acknowledged records removed from a "
        "copy of the read-back, 11 were reported missing, or it reported other messages missing "
        "too",
    )


@pytest.mark.parametrize(
    "check",
    [None, {"removed": 0, "found": 0, "passed": True}, {"removed": 7, "found": 7, "passed": True}],
)
def test_only_a_sensitivity_check_that_failed_is_a_breach(check: object) -> None:
    res = {**clean_cp(), "sensitivity": check}
    assert raw_judge(res, [readback_event(True), tally_event(990)]).verdict == Verdict.PASS


def test_a_status_missing_from_tally_and_journal_counts_as_zero() -> None:
    res = clean_cp()
    del res["contract"]["reported_indeterminate"]
    tally = tally_event(990)
    del tally["reports"]["indeterminate"]
    assert raw_judge(res, [readback_event(True), tally]).verdict == Verdict.PASS


def test_events_without_timestamps_are_judged() -> None:
    events = [{"type": "readback", "complete": True}, tally_event(990)]
    del events[1]["ts_us"]
    assert raw_judge(clean_cp(), events).verdict == Verdict.PASS


# ---------------------------------------------------------------------------------------------
# Reason texts: examples, classes, and the rule each finding applied


def rows(count: int) -> list[dict[str, Any]]:
    """`count` example rows: msg_id n acked at partition 0, offset n."""
    return [{"msg_id": n, "partition": 0, "offset": n} for n in range(count)]


def test_examples_show_the_first_five_and_mark_more() -> None:
    shown = ", ".join(f"msg_id {n} at p0@{n}" for n in range(5))
    six = judge_repetition(result(CP, lost=7, examples={"lost": rows(6)}), [])
    assert f"; e.g. {shown}, …)" in six.reasons[0]
    assert "msg_id 5" not in six.reasons[0]
    five = judge_repetition(result(CP, lost=7, examples={"lost": rows(5)}), [])
    assert f"; e.g. {shown})" in five.reasons[0]


def test_a_loss_reason_names_each_class_with_its_meaning() -> None:
    v = judge_repetition(result(CP, lost=1, unseen=2), [])
    assert v.reasons[0] == (
        f"forbidden loss: 3 of 990 acked missing (1 lost: {anomaly('lost').meaning}; "
        f"2 unseen: {anomaly('unseen').meaning}); {guarantee_for(CP).citation}"
    )


def test_an_example_says_what_the_read_back_holds_at_the_acked_offset() -> None:
    example = {"msg_id": 7, "partition": 0, "offset": 3, "readback_msg_id_at_offset": 9}
    res = result(CP, offset_divergent=1, examples={"offset_divergent": [example]})
    v = judge_repetition(res, [])
    assert "; e.g. msg_id 7 at p0@3 (read-back holds msg_id 9))" in v.reasons[0]


def test_duplicates_of_unacknowledged_sends_are_explained_with_examples() -> None:
    dup = {"duplicated_unacked": [{"msg_id": 3, "partition": 0, "offset": 5}]}
    v = judge_repetition(result(CP, duplicated_unacked=4, examples=dup), [])
    meaning = anomaly("duplicated_unacked").meaning
    assert v.reasons[-1] == (
        f"4 dup unacked ({meaning}; e.g. msg_id 3 at p0@5): the idempotence guarantee covers "
        "acknowledged messages only"
    )


def test_allowed_reordering_is_explained_with_examples() -> None:
    loose = {**MIN1, "max_in_flight": 5}
    reordered = {"reordered": [{"msg_id": 3, "partition": 1, "offset": 8}]}
    v = judge_repetition(result(loose, reordered=4, examples=reordered), [])
    assert v.verdict == Verdict.PASS
    assert v.reasons[-1] == (
        "4 reordered (read order differs from send order per key; e.g. msg_id 3 at p1@8); "
        f"allowed: {guarantees.ORDER_CITATION}"
    )
    forbidden = judge_repetition(result(MIN1, reordered=4, examples=reordered), [])
    assert forbidden.reasons[0].startswith(
        "forbidden reordering: 4 reordered (read order differs from send order per key; "
        "e.g. msg_id 3 at p1@8); "
    )


# ---------------------------------------------------------------------------------------------
# The ISR exception: what it says, for loss and for rewritten offsets


def test_the_isr_exception_names_the_rule_it_excused_or_applied() -> None:
    res = result(MIN1, lost=2, loss_by_partition={"0": 2})
    violated = judge_repetition(res, [*fault(5, 8)])
    assert violated.reasons[0].startswith("forbidden loss: 2 of 990 acked missing (2 lost: ")
    excused = judge_repetition(res, [sample(2, [1]), *fault(5, 8)])
    assert excused.reasons[0].startswith("2 of 990 acked missing (2 lost: ")
    assert "; allowed because the ISR had shrunk" in excused.reasons[0]


def test_rewritten_offsets_under_the_isr_exception_name_their_rule() -> None:
    res = result(MIN1, offset_divergent=2, divergence_by_partition={"1": 2})
    violated = judge_repetition(res, [*fault(5, 8)])
    assert violated.reasons[0].startswith(
        "forbidden acknowledged offset rewritten: 2 acknowledged offsets rewritten (2 diverged: "
    )
    excused = judge_repetition(res, [sample(1, [1], partition=1), *fault(5, 8)])
    excuse = [r for r in excused.reasons if "allowed because the ISR had shrunk" in r]
    assert excuse and excuse[0].startswith("2 acknowledged offsets rewritten (2 diverged: ")


def test_the_isr_exception_lists_every_partition_it_checked() -> None:
    res = result(MIN1, lost=3, loss_by_partition={"0": 1, "2": 2})
    missing = judge_repetition(res, [*fault(5, 8)])
    assert "of one replica for partition 0, partition 2, so the exception" in missing.reasons[0]
    both = [sample(1, [1], partition=2), sample(2, [1], partition=0), *fault(5, 8)]
    excused = judge_repetition(res, both)
    assert "(p0 ISR [1] at t=2.0 s; p2 ISR [1] at t=1.0 s)" in excused.reasons[0]


def test_loss_without_partition_facts_needs_a_shrink_in_any_partition() -> None:
    res = result(MIN1, lost=1)  # no loss_by_partition: nothing narrows where it happened
    shrunk = judge_repetition(res, [sample(1, [1], partition=2), *fault(5, 8)])
    assert shrunk.verdict == Verdict.EXPECTED_LOSS
    violated = judge_repetition(res, [*fault(5, 8)])
    assert violated.verdict == Verdict.VIOLATION
    assert "of one replica for an unknown partition, so the exception" in violated.reasons[0]


def test_isr_sample_times_count_from_the_timelines_origin() -> None:
    res = result(MIN1, lost=1, loss_by_partition={"0": 1})
    origin_s = T0_US // 1_000_000 - 10  # t=0 ten seconds before the first event
    res["timeline"] = [{"t_s": 0, "epoch_s": origin_s}]
    v = judge_repetition(res, [sample(2, [1]), *fault(5, 8)])
    assert "(p0 ISR [1] at t=12.0 s)" in v.reasons[0]


@pytest.mark.parametrize(
    ("res", "events", "origin_us"),
    [
        ({"timeline": [{"t_s": 2, "epoch_s": 1_700_000_002}]}, [{"ts_us": 5}], 1.7e15),
        (
            {"timeline": []},
            [{"type": "sample", "ts_us": 5}, {"type": "sample"}, {"type": "phase", "ts_us": 3}],
            3.0,
        ),
        ({}, [{"type": "x"}], 0.0),
    ],
)
def test_run_origin(res: dict[str, Any], events: list[dict[str, Any]], origin_us: float) -> None:
    assert findings.run_origin_us(typed(res), events) == origin_us


# ---------------------------------------------------------------------------------------------
# The cell fold: which repetition reasons each cell verdict shows


def test_a_violating_cell_lists_every_violation_and_no_note() -> None:
    cell = judge([result(CP, rep=0), result(CP, rep=1, lost=1, duplicated=1, failed_present=1)])
    assert len(cell.repetitions[1].reasons) == 3  # loss, duplicates, and a legal note
    assert cell.reasons[0] == "1 of 2 repetitions violate the documented guarantee"
    assert [r[:28] for r in cell.reasons[1:]] == [
        "rep 1: forbidden loss: 1 of ",
        "rep 1: forbidden duplicates:",
    ]


def test_an_unknown_cell_shows_the_first_reason_of_each_unknown_repetition() -> None:
    broken = result(CP, rep=1)
    broken["contract"] |= {"repeated_msg_ids": 1, "unknown_statuses": 2}
    cell = judge([result(CP, rep=0), broken])
    assert len(cell.repetitions[1].reasons) == 2
    assert cell.reasons == (
        "1 of 2 repetitions could not be judged",
        "rep 1: acked.parquet holds 1 msg_id(s) more than once",
    )


def test_an_expected_loss_cell_shows_the_first_reason_of_each_lossy_repetition() -> None:
    cell = judge([result(AP, rep=0), result(AP, rep=1, lost=4, failed_present=1)])
    lossy = cell.repetitions[1]
    assert len(lossy.reasons) == 2
    assert cell.reasons == (
        "loss allowed and observed in 1 of 2 repetitions",
        f"rep 1: {lossy.reasons[0]}",
    )


def test_pass_and_not_provoked_cells_sum_the_acked_messages() -> None:
    passed = judge([result(CP, rep=0), result(CP, rep=1, acked=1010)])
    assert passed.reasons == (
        "all 2 repetitions kept every acknowledged message (2000 acked); "
        f"loss forbidden: {guarantee_for(CP).citation}",
    )
    quiet = judge([result(AP, rep=0), result(AP, rep=1, acked=1010)])
    assert "none of 2 repetitions lost an acknowledged message (2000 acked)" in quiet.reasons[0]


def test_a_cell_without_a_guarantee_stays_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    def unguaranteed(res: object, events: object) -> outcomes.RepetitionVerdict:
        return outcomes.RepetitionVerdict(Verdict.PASS, (), None, acked=1)

    monkeypatch.setattr(verdicts, "judge_repetition", unguaranteed)
    cell = judge([result(CP)])
    assert (cell.verdict, cell.reasons) == (
        Verdict.UNKNOWN,
        ("no documented guarantee could be determined",),
    )


def test_a_cell_orders_its_repetitions_and_carries_the_guarantee() -> None:
    cell = judge([result(CP, rep=2), result(CP, rep=0), result(CP, rep=1)])
    assert [r.repetition for r in cell.repetitions] == [0, 1, 2]
    assert cell.guarantee == guarantee_for(CP)


def test_a_cell_of_unreadable_configs_has_no_guarantee() -> None:
    cell = judge([result(with_fault(CP, "leader-meteor"), status="incomplete")])
    assert (cell.verdict, cell.guarantee) == (Verdict.UNKNOWN, None)


def test_judge_cell_needs_a_repetition() -> None:
    with pytest.raises(ValueError, match=r"^judge_cell needs at least one repetition$"):
        judge_cell([], {})


def test_a_run_without_events_is_unknown_for_want_of_a_read_back() -> None:
    cell = judge_cell([result(CP)], {})
    assert cell.verdict == Verdict.UNKNOWN
    assert cell.repetitions[0].reasons[0] == (
        "no read-back was recorded in events.jsonl: its completeness is unknown"
    )


def test_a_result_without_identity_fields_is_judged_under_empty_names() -> None:
    res = result(CP)
    for key in ("run_dir", "experiment", "cell", "repetition"):
        del res[key]
    cell = judge_cell([res], {"": healthy_events(res)})
    assert (cell.verdict, cell.cell, cell.experiment) == (Verdict.PASS, "", "")


def test_judge_all_keeps_experiments_apart() -> None:
    one, other = result(CP, cell="a"), {**result(CP, cell="a"), "experiment": "other"}
    cells = judge_all([one, other], {})
    assert [(c.experiment, c.cell) for c in cells] == [("exp", "a"), ("other", "a")]


def test_cell_stats_skip_counts_that_are_no_non_negative_ints() -> None:
    good = result(AP, rep=0, lost=2, acked=1000)
    negative, boolean, no_acked = result(AP, rep=1), result(AP, rep=2), result(AP, rep=3, lost=4)
    negative["counts"]["lost"] = -1
    boolean["counts"]["unseen"] = True
    no_acked["counts"]["acked"] = None
    stats = cell_statistics.cell_stats([typed(r) for r in (good, negative, boolean, no_acked)])
    assert (stats.repetitions, stats.counted) == (4, 2)
    assert stats.counts["lost"] == outcomes.CountStats(3.0, 2, 4, 6)
    assert stats.counts["acked"] == outcomes.CountStats(1000.0, 1000, 1000, 1000)
    assert stats.loss_rate == pytest.approx(2 / 1000)  # only rows with an acked count


def test_reports_without_a_msg_id_make_the_repetition_unknown() -> None:
    res = clean_cp()
    res["contract"]["unidentified_rows"] = 3
    v = raw_judge(res, [readback_event(True), tally_event(990)])
    assert v.verdict == Verdict.UNKNOWN
    assert "3 delivery report(s) without a msg_id" in v.reasons[0]


# ---------------------------------------------------------------------------------------------
# The violation flag is data; the config is read once


def test_a_judged_repetition_flags_exactly_its_violating_reasons() -> None:
    v = judge_repetition(result(CP, duplicated=1, failed_present=1, lost=1), [])
    assert len(v.reasons) == 3
    assert v.violations == v.reasons[:2]
    assert judge_repetition(result(CP), []).violations == ()
    allowed = judge_repetition(result(with_fault(AP, "leader-partition"), lost=5), [])
    assert allowed.verdict == Verdict.EXPECTED_LOSS and allowed.violations == ()


def test_a_violating_cell_shows_the_flagged_reasons_whatever_their_words(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    flagged = outcomes.RepetitionVerdict(
        Verdict.VIOLATION,
        ("forbidden-looking note", "a breach in other words"),
        guarantee_for(CP),
        acked=1,
        violations=("a breach in other words",),
    )
    monkeypatch.setattr(verdicts, "judge_repetition", lambda res, events: flagged)
    cell = judge([result(CP)])
    assert cell.reasons == (
        "1 of 1 repetitions violate the documented guarantee",
        "rep 0: a breach in other words",
    )


@pytest.mark.parametrize(
    ("spelling", "acks"), [("all", "all"), (" ALL ", "all"), ("-1", "all"), (-1, "all"),
                           (1, "1"), ("1", "1"), (0, "0"), ("0", "0")],
)  # fmt: skip
def test_acks_is_normalised_once_when_the_config_is_read(spelling: object, acks: str) -> None:
    config = CellConfig.read({**CP, "acks": spelling})
    assert config.acks == acks and config.as_json()["acks"] == acks


def test_an_unreadable_config_value_names_its_key() -> None:
    with pytest.raises(ConfigError) as raised:
        CellConfig.read({**CP, "acks": "2"})
    assert str(raised.value) == (
        "config.acks: unknown acks '2': expected 0, 1 or all (got '2'); fix spec.json's config"
    )
    with pytest.raises(ConfigError, match=r"^config.max_in_flight: .*\(got 'many'\)"):
        CellConfig.read({**CP, "max_in_flight": "many"})
    with pytest.raises(ConfigError, match=r"^config is a list, not an object$"):
        CellConfig.read([])  # type: ignore[arg-type]


def test_the_config_keeps_the_keys_it_was_given() -> None:
    given = {"acks": "-1", "fault_class": "leader-kill", "rate": 500, "message_bytes": 100}
    assert CellConfig.read(given).as_json() == {**given, "acks": "all"}
    assert CellConfig.read({}).as_json() == {}
    assert CellConfig.read({"kafka_version": 4.0}).kafka_version == "4.0"


def test_a_missing_setting_makes_the_repetition_unknown_naming_it() -> None:
    incomplete_config = {k: v for k, v in CP.items() if k != "enable_idempotence"}
    v = judge_repetition(result(incomplete_config), [])
    assert v.verdict == Verdict.UNKNOWN
    assert v.reasons == (
        "checker error: ConfigError: config.enable_idempotence is missing: the spec.json "
        "config does not say it",
    )
    unfinished = judge_repetition(result(incomplete_config, status="incomplete"), [])
    assert unfinished.guarantee is None


def test_the_terminal_verdict_table_sums_its_counts_under_the_registry_labels() -> None:
    from analysis.pipeline import VERDICT_COLUMNS, verdict_table

    reps = [
        result(AP, rep=0, lost=3, unseen=2, duplicated=1, acked=2000),
        result(AP, rep=1, offset_divergent=4),
    ]
    cells = judge_all(reps, {r["run_dir"]: healthy_events(r) for r in reps})
    assert VERDICT_COLUMNS == (
        "cell", "reps", "acked", "loss", "lost", "unseen", "dup", "diverged", "loss rate",
        "verdict",
    )  # fmt: skip
    assert verdict_table(cells) == [
        ("cell", "2", "2,990", "5", "3", "2", "1", "4", "0.17%", str(cells[0].verdict))
    ]


def test_a_finding_says_what_it_is_about_and_its_reason_is_derived_from_it() -> None:
    from analysis.judge.outcomes import VIOLATION_PREFIX, Finding
    from analysis.model.anomalies import AnomalyName
    from analysis.model.results import Example

    quoted = (Example(7, 0, 12),)
    broken = Finding(AnomalyName.DUPLICATED, Verdict.VIOLATION, "duplicates: 1 duplicated", quoted)
    assert broken.reason == f"{VIOLATION_PREFIX}duplicates: 1 duplicated"
    assert (broken.violation, broken.unknown, broken.examples) == (True, False, quoted)
    noted = Finding(AnomalyName.MOVED, Verdict.PASS, "1 moved: read elsewhere")
    assert noted.reason == noted.detail
    with pytest.raises(ValueError, match="NOT-PROVOKED"):
        Finding(None, Verdict.NOT_PROVOKED, "a cell's verdict, never a finding's")


def test_a_repetition_gets_the_most_severe_verdict_of_its_findings() -> None:
    from analysis.judge.outcomes import Finding, most_severe

    def of(*verdicts: Verdict) -> Verdict:
        return most_severe(Finding(None, v, str(v)) for v in verdicts)

    assert of() == Verdict.PASS
    assert of(Verdict.PASS, Verdict.EXPECTED_LOSS) == Verdict.EXPECTED_LOSS
    assert of(Verdict.EXPECTED_LOSS, Verdict.KNOWN_BUG) == Verdict.KNOWN_BUG
    assert of(Verdict.KNOWN_BUG, Verdict.UNKNOWN, Verdict.PASS) == Verdict.UNKNOWN
    assert of(Verdict.UNKNOWN, Verdict.VIOLATION) == Verdict.VIOLATION


def test_findings_carry_their_class_and_the_examples_their_reason_quotes() -> None:
    from analysis.model.anomalies import AnomalyName, CountName

    rows = [{"msg_id": i, "partition": 0, "offset": i, "reads": 2} for i in range(7)]
    res = result(CP, duplicated=7, examples={"duplicated": rows})
    typed_result = typed(res)
    (finding,) = findings.judge_duplicates(
        _read_counts(typed_result), typed_result.examples, guarantee_for(CP)
    )
    assert (finding.anomaly, finding.verdict) == (AnomalyName.DUPLICATED, Verdict.VIOLATION)
    assert [e.msg_id for e in finding.examples] == [0, 1, 2, 3, 4]
    assert "msg_id 4 at p0@4, …" in finding.reason
    lossless = findings.judge_loss(
        _read_counts(typed_result),
        typed_result.examples,
        guarantee_for(CP),
        findings.LossContext(RunEvidence(Path()), 0.0, {}),
    )
    assert (lossless.anomaly, lossless.verdict) == (CountName.LOSS, Verdict.PASS)


def _read_counts(res: RunResult) -> dict[str, int]:
    """A typed result's counts, as the judge reads them."""
    assert res.counts is not None
    return dict(res.counts)
