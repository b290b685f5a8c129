"""Jepsen's history checks judged and reported: poll skips and backward polls by LIVENESS_TABLE,
write cycles and cyclic information flow by the transactional rules and the known-bug table,
each reason quoting its witness; and report.html showing the witness of a G1c cycle, an
aborted read and a poll skip. Crafted results; no Docker, no Spark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from analysis.judge import verdicts
from analysis.judge.known_bugs import bugs_explaining
from analysis.judge.outcomes import Verdict
from analysis.model.anomalies import AnomalyName
from analysis.model.polls import UNJOURNALLED_STARTS
from analysis.report.render import render_report
from tests.unit.report_runs import RUNS
from tests.unit.results_json import typed
from tests.unit.verdict_runs import AP, CP, T0_US, fault, healthy_events, judge_repetition, result

GROUP = {**CP, "consumers": 2, "consumer_commit": "before-process"}
TXN = {**CP, "transactions": True, "kafka_version": "4.3.1", "client": "java 4.3.1"}
CLEAN_TXN = {
    "txn_committed": 150, "txn_aborted": 50, "txn_unknown": 0, "txn_unjournalled_sends": 0,
    "txn_committed_hidden": 0, "txn_aborted_in_log": 250,
}  # fmt: skip
CONSUMERS_EVENT = {"type": "consumers", "ts_us": T0_US, "caught_up": True, "journal_errors": []}
SKIP = {"partition": 0, "consumer": 1, "at_us": T0_US + 3_000_000, "from_offset": 4,
        "to_offset": 9, "skipped": 4}  # fmt: skip
BACK = {**SKIP, "to_offset": 2, "skipped": 0}
G0_CYCLE = "T12 -ww p0@345-> T13 -ww p1@120-> T12"
G1C_CYCLE = "T14 -wr m7-> T12 -ww p0@345-> T14"
ABORTED = {"msg_id": 21, "partition": 0, "offset": 7, "reads": 1, "consumed": 0, "txn": 4}


def group_run(config: dict[str, Any], examples: dict[str, list], **counts: int) -> dict[str, Any]:
    return result(config, examples=examples, **counts)


def txn_run(config: dict[str, Any], examples: dict[str, list], **counts: int) -> dict[str, Any]:
    res = result(config, examples=examples)
    res["counts"] |= CLEAN_TXN | counts
    return res


def txn_events(res: dict[str, Any], *extra: dict[str, Any]) -> list[dict[str, Any]]:
    base = healthy_events(res)
    base[0] = {**base[0], "uncommitted": {"complete": True}}
    return [*extra, *base]


def test_a_poll_skip_where_the_log_is_kept_is_a_violation_quoting_the_step() -> None:
    verdict = judge_repetition(group_run(GROUP, {"poll_skip": [SKIP]}, poll_skip=1), [])
    assert verdict.verdict == Verdict.VIOLATION
    [reason] = [r for r in verdict.violations if "poll skip" in r]
    assert "consumer-1 on p0 at t=" in reason and "4 then 9 (4 records between)" in reason
    assert "the offset of the next record that will be given out" in reason


def test_a_backward_poll_where_loss_is_allowed_is_unknown_naming_truncation_detection() -> None:
    ap = {**AP, "consumers": 2, "consumer_commit": "auto", "fault_class": "leader-kill"}
    res = group_run(ap, {"nonmonotonic_poll": [BACK]}, nonmonotonic_poll=1)
    verdict = judge_repetition(res, [CONSUMERS_EVENT])
    assert verdict.verdict == Verdict.UNKNOWN
    assert any("4 then 2" in r and "KIP-320" in r for r in verdict.reasons)
    assert judge_repetition(group_run(ap, {}), [CONSUMERS_EVENT]).verdict == Verdict.PASS


def test_member_starts_without_an_assignment_journal_are_said_not_judged() -> None:
    res = group_run(GROUP, {})
    res["counts"][UNJOURNALLED_STARTS] = 3
    verdict = judge_repetition(res, [CONSUMERS_EVENT])
    assert verdict.verdict == Verdict.PASS
    assert any("not judged for 3 member starts" in r for r in verdict.reasons)


def test_a_write_cycle_on_a_fixed_release_is_a_violation_quoting_its_witness() -> None:
    res = txn_run(TXN, {"g0": [{"txn": 12, "transactions": 2, "cycle": G0_CYCLE}]}, g0=2)
    verdict = verdicts.judge_repetition(typed(res), txn_events(res, *fault(5, 10)))
    assert verdict.verdict == Verdict.VIOLATION
    assert any(G0_CYCLE in r and "no cycle can form" in r for r in verdict.violations)


def test_a_cycle_on_a_release_kafka_17754_affects_after_a_fault_is_that_known_bug() -> None:
    assert {b.reference for b in bugs_explaining(AnomalyName.G1C)} == {"KAFKA-17754"}
    old = {**TXN, "kafka_version": "3.8.1", "client": "java 3.8.1"}
    res = txn_run(old, {"g1c": [{"txn": 12, "transactions": 2, "cycle": G1C_CYCLE}]}, g1c=2)
    verdict = verdicts.judge_repetition(typed(res), txn_events(res, *fault(5, 10)))
    assert verdict.verdict == Verdict.KNOWN_BUG, verdict.reasons
    assert any("KAFKA-17754" in r and G1C_CYCLE in r for r in verdict.reasons)
    without_fault = verdicts.judge_repetition(typed(res), txn_events(res))
    assert without_fault.verdict == Verdict.VIOLATION


def test_the_report_shows_the_witnesses_of_a_cycle_an_aborted_read_and_a_poll_skip(
    tmp_path: Path,
) -> None:
    cycles = {
        "g1c": [{"txn": 12, "transactions": 2, "cycle": G1C_CYCLE}],
        "aborted_read": [ABORTED],
    }
    raws = [
        {**txn_run(TXN, cycles, g1c=2, aborted_read=1), "cell": "txn", "run_dir": "runs/t/0"},
        {**group_run(GROUP, {"poll_skip": [SKIP]}, poll_skip=1), "cell": "group"},
    ]
    events = {
        raws[0]["run_dir"]: txn_events(raws[0]),
        raws[1]["run_dir"]: [CONSUMERS_EVENT, *healthy_events(raws[1])],
    }
    results = [typed(r) for r in raws]
    cells = verdicts.judge_all(results, events)
    assert [c.verdict for c in cells] == [Verdict.VIOLATION, Verdict.VIOLATION]
    paths = render_report(cells, results, events, RUNS, tmp_path / "report", "History checks")
    page = paths.html.read_text()
    assert G1C_CYCLE.replace(">", "&gt;") in page
    assert "txn 4: msg_id 21 at p0@7" in page
    assert "consumer-1 on p0 at t=" in page and "4 then 9 (4 records between)" in page
