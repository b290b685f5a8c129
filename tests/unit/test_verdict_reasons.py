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


# ---------------------------------------------------------------------------------------------
# The findings' words, spelled out on hand-made counts (no run directory, no partition facts)


def _judge_words() -> Any:
    from analysis.judge import findings
    from analysis.judge.guarantees import ALLOWED, FORBIDDEN, Guarantee
    from analysis.model.anomalies import COUNT_NAMES
    from analysis.model.evidence import RunEvidence
    from analysis.model.results import Example

    zero = dict.fromkeys(COUNT_NAMES, 0) | {"acked": 100}
    strict = Guarantee(FORBIDDEN, FORBIDDEN, "guaranteed", "CIT", "DUP", "ORD")
    loose = Guarantee(ALLOWED, ALLOWED, "not-guaranteed", "cit", "dup", "ord")
    context = findings.LossContext(RunEvidence.coerce([]), 0.0, {})
    return findings, zero, strict, loose, context, Example


def test_loss_is_described_class_by_class_with_its_first_examples() -> None:
    findings, zero, strict, loose, context, example = _judge_words()
    from analysis.judge.outcomes import Finding, Verdict
    from analysis.model.anomalies import anomaly

    assert findings.judge_loss(zero, {}, strict, context) == Finding(
        "loss", Verdict.PASS, "no acknowledged message lost: 0 of 100 acked missing (loss "
        "forbidden: CIT)"
    )  # fmt: skip
    lost = tuple(example(msg_id=i, partition=1, offset=i) for i in range(7))
    unseen = (example(msg_id=50, partition=None, offset=None, readback_msg_id_at_offset=None),)
    examples = {"lost": lost, "unseen": unseen}
    counts = zero | {"lost": 7, "unseen": 1}
    what = (
        f"8 of 100 acked missing (7 {anomaly('lost').label}: {anomaly('lost').meaning}; e.g. "
        "msg_id 0 at p1@0, msg_id 1 at p1@1, msg_id 2 at p1@2, msg_id 3 at p1@3, msg_id 4 at "
        f"p1@4, …; 1 {anomaly('unseen').label}: {anomaly('unseen').meaning}; e.g. msg_id 50)"
    )
    quoted = (*lost[:5], *unseen)
    assert findings.judge_loss(counts, examples, strict, context) == Finding(
        "loss", Verdict.VIOLATION, f"loss: {what}; CIT", quoted
    )
    assert findings.judge_loss(counts, examples, loose, context) == Finding(
        "loss", Verdict.EXPECTED_LOSS, f"{what}; loss allowed: cit", quoted
    )
    odd = loose.__class__("sometimes", "allowed", "x", "c", "d", "o")
    with pytest.raises(ValueError, match="unknown loss rule 'sometimes'"):
        findings.judge_loss(counts, examples, odd, context)


def test_divergence_duplicates_order_and_legal_anomalies_in_words() -> None:
    findings, zero, strict, loose, context, example = _judge_words()
    from analysis.judge.outcomes import Finding, Verdict
    from analysis.model.anomalies import anomaly

    assert findings.judge_divergence(zero, {}, strict, context) == []
    diverged = (example(msg_id=9, partition=0, offset=3, readback_msg_id_at_offset=11),)
    counts = zero | {"offset_divergent": 1}
    what = (
        f"1 acknowledged offsets rewritten (1 {anomaly('offset_divergent').label}: "
        f"{anomaly('offset_divergent').meaning}; e.g. msg_id 9 at p0@3 (read-back holds msg_id "
        "11))"
    )
    examples = {"offset_divergent": diverged}
    assert findings.judge_divergence(counts, examples, strict, context) == [
        Finding("offset_divergent", Verdict.VIOLATION,
                f"acknowledged offset rewritten: {what}; CIT", diverged)
    ]  # fmt: skip
    assert findings.judge_divergence(counts, examples, loose, context) == [
        Finding("offset_divergent", Verdict.PASS, f"{what}; allowed where loss is: cit", diverged)
    ]
    dup = (example(msg_id=4, partition=2, offset=8),)
    counts = zero | {"duplicated": 2, "duplicated_unacked": 3}
    examples = {"duplicated": dup}
    meaning = anomaly("duplicated").meaning
    unacked = anomaly("duplicated_unacked")
    note = (
        f"3 {unacked.label} ({unacked.meaning}): the idempotence guarantee covers acknowledged "
        "messages only"
    )
    assert findings.judge_duplicates(counts, examples, strict) == [
        Finding("duplicated", Verdict.VIOLATION,
                f"duplicates: 2 duplicated ({meaning}; e.g. msg_id 4 at p2@8); DUP", dup),
        Finding("duplicated_unacked", Verdict.PASS, note),
    ]  # fmt: skip
    assert findings.judge_duplicates(counts, examples, loose)[0] == Finding(
        "duplicated", Verdict.PASS, f"2 duplicated ({meaning}; e.g. msg_id 4 at p2@8); allowed: "
        "dup", dup
    )  # fmt: skip
    assert findings.judge_duplicates(zero, {}, strict) == []
    reordered = (example(msg_id=6, partition=1, offset=2),)
    counts = zero | {"reordered": 1}
    what = "1 reordered (read order differs from send order per key; e.g. msg_id 6 at p1@2)"
    assert findings.judge_order(counts, {"reordered": reordered}, strict) == [
        Finding("reordered", Verdict.VIOLATION, f"reordering: {what}; ORD", reordered)
    ]
    assert findings.judge_order(counts, {"reordered": reordered}, loose) == [
        Finding("reordered", Verdict.PASS, f"{what}; allowed: ord", reordered)
    ]
    assert findings.judge_order(zero, {}, strict) == []
    legal = zero | {"moved": 2, "phantom": 1, "expired": 0}
    assert findings.legal_anomaly_notes(legal) == [
        Finding("moved", Verdict.PASS, f"2 {anomaly('moved').label}: {anomaly('moved').meaning}"),
        Finding(
            "phantom", Verdict.PASS, f"1 {anomaly('phantom').label}: {anomaly('phantom').meaning}"
        ),
    ]


def test_the_isr_exception_reads_the_samples_before_the_last_fault() -> None:
    findings, zero, *_ = _judge_words()
    from analysis.judge.guarantees import FORBIDDEN_UNLESS_ISR_SHRANK, Guarantee
    from analysis.judge.outcomes import Verdict

    rule = Guarantee(FORBIDDEN_UNLESS_ISR_SHRANK, "allowed", "x", "CIT", "d", "o")
    counts = zero | {"lost": 1}

    def judged(events: list[dict[str, Any]], partitions: dict[str, int]) -> Any:
        evidence = findings.LossContext(
            RunEvidence.coerce(events), 1_000_000.0, {"loss": partitions}
        )
        return findings.judge_loss(counts, {}, rule, evidence)

    def sample(ts_us: int, isr: list[int], partition: int = 0) -> dict[str, Any]:
        return {"type": "sample", "ts_us": ts_us,
                "partitions": [{"partition": partition, "leader": isr[0], "isr": isr}]}  # fmt: skip

    # No fault at all: every sample counts, two of them at the same moment.
    shrunk = [sample(3_500_000, [1, 2]), sample(3_500_000, [2], 1), sample(9_000_000, [1])]
    allowed = judged(shrunk, {"1": 1})
    assert allowed.verdict == Verdict.EXPECTED_LOSS
    assert allowed.detail.endswith(
        "; allowed because the ISR had shrunk to the leader before the fault (p1 ISR [2] at "
        "t=2.5 s): CIT"
    )
    # Without partition facts any partition's shrunk ISR will do.
    assert "(p1 ISR [2] at t=2.5 s)" in judged(shrunk, {}).detail
    fault = {"type": "fault_start", "ts_us": 3_000_000, "fault_id": 1, "fault": "kill",
             "nodes": [1], "detail": {}}  # fmt: skip
    violation = judged([*shrunk, fault], {"1": 1, "0": 2})
    assert violation.verdict == Verdict.VIOLATION
    assert violation.detail.endswith(
        "no leader/ISR sample before the last fault shows an ISR of one replica for partition "
        "0, partition 1, so the exception does not apply: CIT"
    )
    unknown = judged([fault], {})
    assert "for an unknown partition, so the exception" in unknown.detail


def test_the_classes_a_check_decides() -> None:
    from analysis.model.anomalies import ANOMALIES, classes_of

    for check in {a.check for a in ANOMALIES}:
        assert classes_of(check) == tuple(a.name for a in ANOMALIES if a.check == check)
    assert "lost" in classes_of(next(a.check for a in ANOMALIES if a.name == "lost"))
    assert "lost" not in classes_of(next(a.check for a in ANOMALIES if a.name == "stuck"))


def test_each_partitions_judgement_is_joined_into_one_reason() -> None:
    from analysis.judge.guarantees import guarantee_for
    from analysis.judge.history import FaultHit, PartitionHistory
    from analysis.judge.outcomes import Verdict
    from analysis.model.anomalies import COUNT_NAMES

    config = CellConfig.read(
        {"acks": "1", "min_insync_replicas": 1, "unclean_leader_election": False,
         "enable_idempotence": False, "max_in_flight": 5, "replication_factor": 3,
         "partitions": 2, "fault_class": "leader-kill", "kafka_version": "3.9.0"}
    )  # fmt: skip
    counts = dict.fromkeys(COUNT_NAMES, 0) | {"acked": 100, "lost": 2}
    hit = FaultHit(1, "kill", "kill", "leader", (1,), 2_000_000)
    hit_both = {p: PartitionHistory(p, (hit,), (), ()) for p in (0, 1)}

    def judged(histories: dict[int, PartitionHistory]) -> Any:
        context = findings.LossContext(
            RunEvidence.coerce([]), 0.0, {"loss": {"0": 1, "1": 1}}, config, "r", histories
        )
        return findings.judge_loss(counts, {}, guarantee_for(config), context)

    allowed = judged(hit_both)
    assert allowed.verdict == Verdict.EXPECTED_LOSS
    head, _, partitions = allowed.detail.partition("; allowed by mechanism: ")
    assert head.startswith("2 of 100 acked missing (2 ")
    first, second = partitions.split("; p1: ")
    assert first.startswith("p0: acks=1 truncation: fault 1 (kill) hit node 1, leader of p0, at")
    assert second.startswith("acks=1 truncation: fault 1 (kill) hit node 1, leader of p1, at")
    unexplained = judged({})  # no fault hit either partition: nothing allows the loss
    assert unexplained.verdict == Verdict.VIOLATION
    p0, p1 = unexplained.detail.split("; p1 (none: no fault hit its replicas): ")
    assert p0.startswith("loss: 2 of 100 acked missing (")
    assert p0.endswith("; p0 (none: no fault hit its replicas): " + p1)
