"""Repetition and cell verdicts on crafted results, the cell fold's reasons, the exit code; no
Docker, no Spark."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from analysis.judge import cell as cell_statistics
from analysis.judge import guarantees, outcomes, verdicts
from analysis.judge.outcomes import Verdict
from analysis.judge.verdicts import exit_code
from harness.rundir.config import CellConfig
from harness.rundir.events import load_events
from tests.unit.results_json import typed
from tests.unit.verdict_runs import (
    AP,
    CP,
    MIN1,
    cells_with,
    clean_cp,
    fault,
    guarantee_for,
    healthy_events,
    judge,
    judge_all,
    judge_cell,
    judge_repetition,
    raw_judge,
    readback_event,
    result,
    sample,
    tally_event,
    with_fault,
)


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


def test_an_offset_read_with_two_messages_is_judged_by_the_loss_rule_never_as_loss() -> None:
    row = {"msg_id": 4, "partition": 1, "offset": 6, "readback_msg_id_at_offset": 5, "reads": 2}
    examples = {"inconsistent_offsets": [row]}
    v = judge_repetition(result(CP, inconsistent_offsets=1, examples=examples), [])
    assert v.verdict == Verdict.VIOLATION and v.loss == 0
    assert any(
        r.startswith("forbidden inconsistent offsets: 1 inconsistent offsets")
        and "msg_id 4 at p1@6 (read-back holds msg_id 5)" in r
        for r in v.reasons
    )
    allowed = result(with_fault(AP, "leader-partition"), inconsistent_offsets=1)
    assert judge_repetition(allowed, []).verdict == Verdict.PASS


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
# The cell's fold and its words, spelled out on hand-made repetition verdicts


def test_a_repetition_that_breaks_the_checker_is_unknown_naming_the_error() -> None:
    raw = {**_cell_result(), "counts": {**_cell_result()["counts"], "lost": -1}}
    rep = verdicts.judge_repetition(typed(raw), [])
    assert rep.verdict == Verdict.UNKNOWN
    assert rep.reasons == (
        "checker error: ValueError: count 'lost' is -1, expected a non-negative int",
    )
    assert (rep.guarantee, rep.run_dir, rep.repetition) == (None, raw["run_dir"], 3)
    for bad in (True, "3", 2.0, None):
        raw = {**_cell_result(), "counts": {**_cell_result()["counts"], "unseen": bad}}
        (reason,) = verdicts.judge_repetition(typed(raw), []).reasons
        assert reason == (
            f"checker error: ValueError: count 'unseen' is {bad!r}, expected a non-negative int"
        )


def _cell_result(**counts: int) -> dict[str, Any]:
    from tests.unit.report_runs import CP, result

    return {**result("c", CP, 3, **counts), "repetition": 3}


def test_a_repetition_without_acknowledged_messages_has_nothing_to_judge() -> None:
    from tests.unit.report_runs import healthy_events

    raw = _cell_result()
    raw["counts"] = {**raw["counts"], "acked": 0, "sent": 12, "failed": 5, "indeterminate": 7}
    raw["contract"] = {**raw["contract"], "reported_ok": 0, "reported_failed": 5,
                       "reported_indeterminate": 7}  # fmt: skip
    events = healthy_events()
    events[1] = {**events[1], "reports": {"ok": 0, "failed": 5, "indeterminate": 7}}
    rep = verdicts.judge_repetition(typed(raw), events)
    assert rep.verdict == Verdict.UNKNOWN
    assert rep.reasons == (
        "no message was acknowledged (sent 12, failed 5, indeterminate 7): nothing to judge",
    )
    assert (rep.loss, rep.acked) == (0, 0)
    incomplete = {**_cell_result(), "status": "incomplete", "error": None}
    assert verdicts.judge_repetition(typed(incomplete), events).reasons == (
        "run incomplete: no error recorded",
    )


def test_cells_are_judged_in_first_seen_order_with_repetitions_sorted() -> None:
    from tests.unit.report_runs import AP, CP, result

    raws = [result("b", CP, 1), result("a", AP, 0), result("b", CP, 0), result("a", AP, 1)]
    cells = verdicts.judge_all([typed(r) for r in raws], {})
    assert [c.cell for c in cells] == ["b", "a"]
    assert [r.repetition for r in cells[0].repetitions] == [0, 1]
    assert cells[0].config == typed(raws[0]).config
    with pytest.raises(ValueError, match="judge_cell needs at least one repetition"):
        verdicts.judge_cell([], {})


def test_a_hanging_transaction_decides_a_run_with_nothing_acknowledged() -> None:
    # Every transaction aborted by plan: no loss to judge, a transaction left open all the same.
    config = {**CP, "transactions": True, "kafka_version": "4.3.1", "client": "java 4.3.1"}
    hanging = {"partition": 0, "offset": 3, "from_us": 0, "to_us": 40_000_000}
    events = [
        {**readback_event(True), "uncommitted": {"complete": True, "records": 10}},
        tally_event(0, failed=10),
    ]
    unacked = {"acked": 0, "failed": 10, "indeterminate": 0, "sent": 10, "read": 0}
    unacked |= {"txn_committed": 0, "txn_aborted": 2}
    held = result(config, examples={"txn_hanging": [hanging]}, txn_hanging=1, **unacked)
    v = verdicts.judge_repetition(typed(held), events)
    assert v.verdict == Verdict.VIOLATION, v.reasons
    assert "p0 held at offset 3 for 40 s" in v.reasons[0]
    assert "loss not judged" in v.reasons[-1]
    quiet = verdicts.judge_repetition(typed(result(config, **unacked)), events)
    assert quiet.verdict == Verdict.UNKNOWN and "nothing to judge" in quiet.reasons[0]
