"""The transactional verdict rules on crafted results; no Docker, no Spark."""

from __future__ import annotations

from typing import Any

import pytest

from analysis.judge import verdicts
from analysis.judge.known_bugs import bugs_explaining
from analysis.judge.outcomes import Verdict
from analysis.model.anomalies import AnomalyName
from tests.unit.results_json import typed
from tests.unit.verdict_runs import CP, T0_US, fault, healthy_events, result

# A release and client immune to KAFKA-17754: 4.x brokers with the Java 4.x client (KIP-890).
TXN = {**CP, "transactions": True, "kafka_version": "4.3.1", "client": "java 4.3.1"}
LIBRDKAFKA_TXN = {k: v for k, v in TXN.items() if k != "client"}  # no KIP-890 client side
CLEAN_TXN = {
    "txn_committed": 150, "txn_aborted": 50, "txn_unknown": 0, "txn_unjournalled_sends": 0,
    "txn_committed_hidden": 0, "txn_aborted_in_log": 250,
}  # fmt: skip


def txn_result(config: dict[str, Any] = TXN, **overrides: int) -> dict[str, Any]:
    """A transactional results.json: a clean run unless overridden."""
    res = result(config)
    res["counts"] |= CLEAN_TXN | overrides
    return res


def judge(res: dict[str, Any], events: list[dict[str, Any]] | None = None, uncommitted=True):
    """judge_repetition with a healthy read-back whose read_uncommitted part is complete."""
    base = healthy_events(res)
    base[0] = {**base[0], "uncommitted": {"complete": uncommitted}}
    return verdicts.judge_repetition(typed(res), [*(events or []), *base])


def test_a_clean_transactional_run_passes_and_says_what_ran() -> None:
    v = judge(txn_result())
    assert v.verdict == Verdict.PASS, v.reasons
    assert any(
        "150 committed, 50 aborted (250 aborted messages in the log)" in r for r in v.reasons
    )


def test_an_aborted_read_is_a_violation_on_a_fixed_release() -> None:
    res = txn_result(aborted_read=3)
    res["examples"] = {
        "aborted_read": [{"msg_id": 21, "partition": 0, "offset": 7, "reads": 1, "txn": 4}]
    }
    v = judge(res, fault(5, 10))
    assert v.verdict == Verdict.VIOLATION
    assert any("forbidden aborted reads: 3" in r and "Transactions" in r for r in v.violations)
    assert any("txn 4: msg_id 21 at p0@7" in r for r in v.violations)


def test_an_aborted_read_on_an_affected_release_after_a_fault_is_a_known_bug() -> None:
    [bug] = [b for b in bugs_explaining(AnomalyName.ABORTED_READ) if b.reference == "KAFKA-17754"]
    v = judge(txn_result({**TXN, "kafka_version": "3.8.1"}, aborted_read=3), fault(5, 10))
    assert v.verdict == Verdict.KNOWN_BUG, v.reasons
    assert any(bug.reference in r for r in v.reasons)


@pytest.mark.parametrize(
    ("config", "verdict"),
    [
        # KIP-890 needs both sides: a 4.x broker and a client that bumps its epoch per
        # transaction. librdkafka does not (yet), nor does the Java client before 4.0.
        (LIBRDKAFKA_TXN, Verdict.KNOWN_BUG),
        ({**TXN, "client": "java 3.8.0"}, Verdict.KNOWN_BUG),
        ({**TXN, "client": "command my-producer"}, Verdict.KNOWN_BUG),
        ({**TXN, "kafka_version": "3.8.1"}, Verdict.KNOWN_BUG),
        (TXN, Verdict.VIOLATION),
        ({**TXN, "client": "java 4.0.0"}, Verdict.VIOLATION),
        ({**TXN, "kafka_version": "2.8.2", "client": "java 2.8.2"}, Verdict.VIOLATION),
    ],
)
def test_kafka_17754_needs_the_release_and_the_client_to_be_immune(config, verdict) -> None:
    lost = txn_result(config, committed_lost=2, torn_transaction=1)
    lost["counts"] |= {"lost": 2}  # a committed transaction's messages lost are lost messages
    lost["loss_by_partition"] = {"0": 2}
    for anomaly, res in (("aborted_read", txn_result(config, aborted_read=2)), ("lost", lost)):
        v = judge(res, fault(5, 10))
        assert v.verdict == verdict, (anomaly, v.reasons)
        if verdict == Verdict.KNOWN_BUG:
            [reason] = [r for r in v.reasons if "KAFKA-17754" in r]
            assert "with the Java client 4.0.0 or later" in reason
            assert (config.get("client") or "librdkafka") in reason
        if anomaly == "lost":  # the loss follows the committed transactions lost
            [loss] = [r for r in v.reasons if "acked missing" in r]
            explained = loss.endswith("; explained by the known bug of the committed "
                                      "transactions lost")  # fmt: skip
            assert explained == (verdict == Verdict.KNOWN_BUG)
            assert (loss in v.violations) == (verdict == Verdict.VIOLATION)


def test_the_evidence_names_the_fault_that_made_requests_arrive_late() -> None:
    [kill_start, kill_end] = fault(5, 10)
    detail = {"direction": "in", "from": ["clients"], "delay_ms": 6000}
    late = {**kill_start, "fault_id": 2, "fault": "delay", "target": "txn-coordinator",
            "nodes": [2], "detail": detail}  # fmt: skip
    v = judge(txn_result(LIBRDKAFKA_TXN, aborted_read=1), [kill_start, late, kill_end])
    [reason] = [r for r in v.reasons if "KAFKA-17754" in r]
    assert "delay of txn-coordinator made requests to nodes [2] arrive late (6000 ms)" in reason


def test_an_aborted_read_without_a_fault_is_a_violation_even_on_an_affected_release() -> None:
    v = judge(txn_result({**TXN, "kafka_version": "3.8.1"}, aborted_read=1))
    assert v.verdict == Verdict.VIOLATION


def test_committed_messages_hidden_from_read_committed_are_a_violation() -> None:
    res = txn_result(txn_committed_hidden=4, committed_lost=1, torn_transaction=1)
    res["counts"] |= {"lost": 4, "acked": 990}
    res["loss_by_partition"] = {"0": 4}
    v = judge(res, fault(5, 10))
    assert v.verdict == Verdict.VIOLATION
    assert any("forbidden hidden commits: 4" in r for r in v.violations)
    assert any("forbidden torn or lost transactions" in r for r in v.violations)


def test_torn_transactions_follow_an_allowed_loss() -> None:
    config = {**TXN, "fault_class": "all-power-loss"}  # any loss allowed
    res = txn_result(config, committed_lost=2, torn_transaction=1)
    res["counts"] |= {"lost": 3}
    res["loss_by_partition"] = {"0": 3}
    v = judge(res, fault(5, 10))
    assert v.verdict != Verdict.VIOLATION, v.reasons
    assert any("allowed with the loss" in r for r in v.reasons)


@pytest.mark.parametrize(
    ("drop", "uncommitted", "reason"),
    [
        (True, True, "without transaction outcomes"),
        (False, False, "read_uncommitted read-back is incomplete"),
    ],
)
def test_a_transactional_record_in_doubt_is_unknown(drop: bool, uncommitted: bool, reason: str):
    res = txn_result()
    if drop:
        for key in CLEAN_TXN:
            del res["counts"][key]
    v = judge(res, uncommitted=uncommitted)
    assert v.verdict == Verdict.UNKNOWN
    assert any(reason in r for r in v.reasons), v.reasons


def test_aborts_that_never_reached_the_log_are_said_to_be_untested() -> None:
    v = judge(txn_result(txn_aborted_in_log=0))
    assert v.verdict == Verdict.PASS
    assert any("aborted reads were not tested" in r for r in v.reasons)


def test_a_plain_run_gets_no_transactional_finding() -> None:
    res = result(CP)
    v = verdicts.judge_repetition(typed(res), healthy_events(res))
    assert not any("transaction" in r for r in v.reasons)
    assert T0_US  # the shared clock of the crafted events
