"""The guarantee table and every verdict path, on crafted results; no Docker, no Spark."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from analysis import guarantees, verdicts
from analysis.guarantees import (
    ALLOWED,
    FORBIDDEN,
    FORBIDDEN_UNLESS_ISR_SHRANK,
    LOSS_TABLE,
    guarantee_for,
)
from analysis.verdicts import (
    CellVerdict,
    Verdict,
    exit_code,
    judge_all,
    judge_cell,
    judge_repetition,
    load_events,
    load_results,
)

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


def with_fault(config: dict[str, Any], fault: str, **overrides: Any) -> dict[str, Any]:
    """A copy of config with another fault class and any overrides."""
    return {**config, "fault_class": fault, **overrides}


def counts(**overrides: int) -> dict[str, int]:
    """Counts of a clean run of 1000 sends, with overrides."""
    base = dict.fromkeys(verdicts.COUNT_NAMES, 0)
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
    **count_overrides: int,
) -> dict[str, Any]:
    """A results.json dict for one repetition."""
    return {
        "run_dir": f"runs/exp/ts/{cell}/{rep}",
        "experiment": "exp",
        "cell": cell,
        "repetition": rep,
        "status": status,
        "error": error,
        "axes": {},
        "config": config,
        "counts": counts(**count_overrides) if status == "complete" else None,
        "examples": examples or {},
        "timeline": [],
    }


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


@pytest.mark.parametrize("name", ["offset_divergent", "unseen"])
def test_divergence_and_unseen_count_as_loss(name: str) -> None:
    examples = {name: [{"msg_id": 7, "partition": 0, "offset": 3, "readback_msg_id_at_offset": 9}]}
    v = judge_repetition(result(CP, examples=examples, **{name: 2}), [])
    assert v.verdict == Verdict.VIOLATION
    assert f"2 {name.replace('_', '-')}" in v.reasons[0]
    if name == "unseen":
        assert "counted as loss" in v.reasons[0]
    else:
        assert "read-back holds msg_id 9" in v.reasons[0]


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
    assert any(r.startswith("2 failed-present: ") for r in v.reasons)
    assert any(r.startswith("1 phantom: read but never sent") for r in v.reasons)


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
    examples = {"lost": [{"msg_id": 1, "partition": 0, "offset": 10}]}
    events = [sample(1, [1, 2, 3]), sample(2, [1]), *fault(5, 8), sample(6, [2], leader=2)]
    v = judge_repetition(result(MIN1, lost=2, examples=examples), events)
    assert v.verdict == Verdict.EXPECTED_LOSS
    assert "had shrunk to [1]" in v.reasons[0]


@pytest.mark.parametrize(
    "isr_samples",
    [
        [sample(1, [1, 2, 3]), sample(2, [1, 2, 3])],  # never shrank
        [sample(1, [1, 2, 3]), sample(6, [2], leader=2)],  # shrank only after the fault
        [sample(2, [1], partition=1)],  # shrank, but on a partition that lost nothing
    ],
)
def test_isr_exception_does_not_apply_otherwise(isr_samples: list[dict[str, Any]]) -> None:
    examples = {"lost": [{"msg_id": 1, "partition": 0, "offset": 10}]}
    v = judge_repetition(result(MIN1, lost=2, examples=examples), [*isr_samples, *fault(5, 8)])
    assert v.verdict == Verdict.VIOLATION
    assert "exception does not apply" in v.reasons[0]


# ---------------------------------------------------------------------------------------------
# Cell verdicts


def judge(results: list[dict[str, Any]], events: dict[str, list[dict[str, Any]]] | None = None):
    """judge_cell with no events unless given."""
    return judge_cell(results, events or {})


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
    assert (cell.cell, cell.experiment, cell.config) == ("cell", "exp", CP)


def test_cell_isr_exception_uses_each_repetitions_events() -> None:
    examples = {"lost": [{"msg_id": 1, "partition": 0, "offset": 10}]}
    shrunk, healthy = result(MIN1, rep=0, lost=1, examples=examples), result(MIN1, rep=1)
    events = {shrunk["run_dir"]: [sample(1, [1]), *fault(3, 4)]}
    assert judge([shrunk, healthy], events).verdict == Verdict.EXPECTED_LOSS
    assert judge([shrunk, healthy], {}).verdict == Verdict.VIOLATION


def test_cell_stats() -> None:
    cell = judge([result(AP, rep=0, lost=2), result(AP, rep=1, lost=4, acked=1010)])
    lost = cell.stats.counts["lost"]
    assert (lost.mean, lost.min, lost.max) == (3.0, 2, 4)
    assert cell.stats.loss_rate == pytest.approx(6 / 2000)
    assert cell.stats.repetitions == cell.stats.counted == 2


def test_judge_all_groups_by_experiment_and_cell() -> None:
    cells = judge_all([result(CP, cell="a"), result(AP, cell="b"), result(CP, cell="a", rep=1)], {})
    assert [(c.cell, len(c.repetitions)) for c in cells] == [("a", 2), ("b", 1)]


# ---------------------------------------------------------------------------------------------
# Exit code and loading


def cells_with(*verdict_list: Verdict) -> list[CellVerdict]:
    """Cells carrying only the given verdicts."""
    stats = verdicts.cell_stats([])
    return [CellVerdict("c", "e", {}, v, (), (), stats) for v in verdict_list]


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


def test_load_results_and_events(tmp_path: Path) -> None:
    run = tmp_path / "exp" / "ts" / "cell" / "0"
    run.mkdir(parents=True)
    (run / "results.json").write_text(json.dumps(result(CP)))
    lines = [json.dumps(sample(1, [1, 2, 3])), "", json.dumps(fault(2, 3)[0]), '{"type": "sam']
    (run / "events.jsonl").write_text("\n".join(lines))
    loaded = load_results([tmp_path])
    assert len(loaded) == 1
    assert loaded[0]["run_dir"] == str(run)
    assert [e["type"] for e in load_events(run)] == ["sample", "fault_start"]
    assert load_events(tmp_path / "missing") == []
    assert verdicts.load_events_by_run(loaded) == {str(run): load_events(run)}


def test_guarantees_module_exports() -> None:
    assert set(guarantees.__all__) <= set(dir(guarantees))
    assert set(verdicts.__all__) <= set(dir(verdicts))
