"""The loss figure and its rules, what a verdict carries, its reason texts, the ISR exception,
and the violation flag as data."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from analysis.judge import findings, guarantees, outcomes, verdicts
from analysis.judge.outcomes import Verdict
from analysis.model.anomalies import anomaly
from analysis.model.evidence import RunEvidence
from harness.rundir.config import CellConfig, ConfigError
from tests.unit.results_json import typed
from tests.unit.verdict_runs import (
    AP,
    CP,
    MIN1,
    T0_US,
    _read_counts,
    fault,
    guarantee_for,
    healthy_events,
    judge,
    judge_all,
    judge_repetition,
    raw_judge,
    readback_event,
    result,
    rows,
    sample,
    tally_event,
    with_fault,
)


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
