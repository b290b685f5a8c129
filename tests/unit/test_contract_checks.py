"""Contract checks: each one alone turns a clean CP repetition UNKNOWN, with its reason, word
for word."""

from __future__ import annotations

from typing import Any

import pytest

from analysis.judge.outcomes import Verdict
from tests.unit.verdict_runs import (
    CP,
    T0_US,
    clean_cp,
    raw_judge,
    readback_event,
    result,
    tally_event,
)


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
# Every breach word for word, in the order the checks run


def test_every_breach_of_the_record_is_named_in_order() -> None:
    from dataclasses import replace

    from analysis.judge.contract import contract_breaches
    from analysis.model.results import Sensitivity
    from tests.unit.report_runs import CP, result
    from tests.unit.results_json import typed

    raw = result("c", CP, 0)
    raw["contract"] = {
        "repeated_msg_ids": 2,
        "unidentified_rows": 3,
        "unknown_statuses": 4,
        "reported_ok": 1900,
        "reported_failed": 41,
        "reported_indeterminate": 58,
    }
    run = replace(typed(raw), sensitivity=Sensitivity(5, 3, False))
    events = [
        {"type": "readback", "ts_us": 9, "complete": True, "high_watermarks": {"0": 1}},
        {"type": "readback", "ts_us": 10, "complete": False, "high_watermarks": {"0": 7}},
        {"type": "fault_error", "ts_us": 3, "fault_id": 4, "fault": "kill", "target": "leader",
         "stage": "heal", "error": "no such container"},
        {"type": "harness_error", "ts_us": 4, "error": "disk full"},
        {"type": "fault_error", "ts_us": 5, "error": "boom"},
        {"type": "recorder_tally", "ts_us": 1, "reports": {"ok": 1}},
        {"type": "recorder_tally", "ts_us": 11, "journal_error": "EIO",
         "reports": {"ok": 1900, "failed": 40, "indeterminate": 60}},
    ]  # fmt: skip
    assert contract_breaches(run, events) == [
        "incomplete read-back: it timed out before the high watermarks {'0': 7} (? records read)",
        "fault 4 (kill leader) failed to heal: no such container",
        "harness error: disk full",
        "fault ? (? ?) failed to inject: boom",
        "acked.parquet holds 2 msg_id(s) more than once",
        "acked.parquet holds 3 delivery report(s) without a msg_id (a value the producer did "
        "not write): they cannot be matched to a send",
        "acked.parquet holds 4 row(s) whose status is none of ok, failed, indeterminate",
        "the journal failed to write: EIO",
        "the journal disagrees with the recorder's tally: 40 failed delivery reports, 41 "
        "journalled (-1 dropped)",
        "the journal disagrees with the recorder's tally: 60 indeterminate delivery reports, 58 "
        "journalled (+2 dropped)",
        "the checker failed its sensitivity check: of 5 acknowledged records removed from a copy "
        "of the read-back, 3 were reported missing, or it reported other messages missing too",
    ]
    counted = [{"type": "readback", "ts_us": 1, "complete": False, "records": 1234}]
    assert contract_breaches(replace(run, contract=None, sensitivity=None), counted) == [
        "incomplete read-back: it timed out before the high watermarks {} (1234 records read)",
        "the result carries no contract facts (reconciled by an older analysis)",
    ]
    clean = replace(typed(result("c", CP, 0)), sensitivity=Sensitivity(0, 0, None))
    assert contract_breaches(clean, []) == [
        "no read-back was recorded in events.jsonl: its completeness is unknown",
        "no recorder tally in events.jsonl: the journal cannot be checked",
    ]
    complete = [
        {"type": "readback", "ts_us": 1, "complete": True},
        {"type": "recorder_tally", "ts_us": 1,
         "reports": {"ok": 1900, "failed": 40, "indeterminate": 60}},
    ]  # fmt: skip
    assert contract_breaches(clean, complete) == []
    assert contract_breaches(replace(clean, sensitivity=Sensitivity(5, 5, True)), complete) == []


def test_cell_statistics_over_the_repetitions_with_counts() -> None:
    from analysis.judge.cell import cell_stats
    from analysis.judge.outcomes import CountStats
    from tests.unit.report_runs import CP, result
    from tests.unit.results_json import typed

    def run(rep: int, **counts: Any) -> Any:
        raw = result("c", CP, rep)
        return typed({**raw, "counts": {**raw["counts"], **counts}})

    runs = [
        run(0, lost=2, offset_divergent=1, acked=100),
        run(1, lost=4, unseen=1, acked=300, moved=True),
        run(2, lost=-1),  # malformed loss class: not counted at all
        run(3, lost=0, acked=0, offset_divergent="2"),
        typed({**result("c", CP, 4), "counts": None}),
    ]
    stats = cell_stats(runs)
    assert (stats.repetitions, stats.counted) == (5, 3)
    assert stats.counts["lost"] == CountStats(2.0, 0, 4, 6)
    assert stats.counts["loss"] == CountStats(7 / 3, 0, 5, 7)
    assert stats.counts["acked"] == CountStats(400 / 3, 0, 300, 400)
    assert stats.counts["offset_divergent"] == CountStats(0.5, 0, 1, 1)  # "2" left out
    assert stats.counts["moved"] == CountStats(0.0, 0, 0, 0)  # True is no count
    assert stats.loss_rate == 7 / 400
    assert stats.divergence_rate == 1 / 400  # over the rows with both counts
    none_acked = cell_stats([run(0, acked=0)])
    assert (none_acked.loss_rate, none_acked.divergence_rate) == (None, None)
    nothing = cell_stats([typed({**result("c", CP, 0), "counts": None})])
    assert (nothing.counted, nothing.counts, nothing.loss_rate) == (0, {}, None)
