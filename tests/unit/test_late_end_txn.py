"""The evidence of KAFKA-17754 from a shaped fault's held EndTxn: it names the EndTxn whose
hold ended while a witness transaction was open, and nothing else."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from analysis.judge.transactions import RUN_EVIDENCE, late_end_txn
from analysis.model.evidence import RunEvidence
from analysis.model.results import Example

T0 = 1_795_849_200_000_000  # epoch microseconds


def _run(held_at_us: int, delay_ms: int, api_key: int = 26) -> RunEvidence:
    """One delay fault of the coordinator whose shaper held one connection from a request."""
    held = {"172.22.0.1:59286 > 172.22.0.2:9094": {"at_us": held_at_us, "api_key": api_key}}
    return RunEvidence.coerce([
        {"type": "fault_start", "ts_us": T0, "fault_id": 4, "fault": "delay",
         "target": "txn-coordinator", "nodes": [1],
         "detail": {"direction": "in", "delay_ms": delay_ms, "requests": ["EndTxn"]}},
        {"type": "fault_end", "ts_us": T0 + 30_000_000, "fault_id": 4, "fault": "delay",
         "nodes": [1], "hosts": ["kafka-1"],
         "detail": {"shaper": {"kafka-1": {"packets": 10, "held_connections": held}}}},
    ])  # fmt: skip


def _witness(txn: int, from_us: int | None, to_us: int | None) -> Example:
    return Example(msg_id=5, partition=0, offset=9, txn=txn, from_us=from_us, to_us=to_us)


@given(
    st.integers(0, 20_000_000),
    st.integers(1, 10_000),
    st.integers(0, 40_000_000),
    st.integers(0, 5_000_000),
)
@example(0, 1000, 0, 1_000_000)  # landed at the transaction's end
@example(0, 1000, 1_000_000, 0)  # landed at its begin, which is its end
@example(0, 1000, 1_000_001, 5)  # a microsecond too early
def test_the_held_end_txn_is_named_exactly_when_it_landed_inside_the_witness(
    held_after_us, delay_ms, begin_after_us, open_us
):
    held_at, begin = T0 + held_after_us, T0 + begin_after_us
    landed = held_at + delay_ms * 1000
    said = late_end_txn(_run(held_at, delay_ms), [_witness(57, begin, begin + open_us)])
    inside = begin <= landed <= begin + open_us  # the oracle
    assert bool(said) == inside
    if inside:
        assert "transaction 57 was open" in said and "172.22.0.1:59286" in said


def test_a_held_produce_or_a_witness_without_times_is_no_late_end_txn():
    inside = [_witness(57, T0, T0 + 20_000_000)]
    assert late_end_txn(_run(T0 + 1_000_000, 7000, api_key=0), inside) == ""
    assert late_end_txn(_run(T0 + 1_000_000, 7000), [_witness(57, None, None)]) == ""


def test_the_known_bug_evidence_falls_back_to_the_fault_that_made_requests_late():
    outside = [_witness(57, T0 + 60_000_000, T0 + 61_000_000)]
    said = RUN_EVIDENCE["KAFKA-17754"](_run(T0 + 1_000_000, 7000), outside)
    assert said.startswith("delay of txn-coordinator made requests to nodes [1] arrive late")
    inside = [_witness(57, T0 + 7_500_000, T0 + 8_500_000)]
    said = RUN_EVIDENCE["KAFKA-17754"](_run(T0 + 1_000_000, 7000), inside)
    assert said.startswith("an EndTxn sent at ") and "it ended transaction 57, not its own" in said


def test_a_late_end_txn_is_found_among_every_kept_witness_not_only_the_quoted_ones():
    """The reason quotes three examples; the evidence reads every one the check kept, so a
    late EndTxn that landed in the fourth's transaction is named."""
    from analysis.judge.transactions import transaction_findings
    from harness.rundir.config import CellConfig

    config = CellConfig(transactions=True, kafka_version="3.8.1", client="java 3.8.0")
    early = [_witness(7, T0 + 50_000_000, T0 + 51_000_000) for _ in range(3)]
    landed_in = _witness(9, T0 + 7_500_000, T0 + 8_500_000)
    counts = {"txn_committed": 5, "aborted_read": 4, "txn_aborted_in_log": 4}
    examples = {"aborted_read": [*early, landed_in]}
    findings = transaction_findings(
        config, counts, _run(T0 + 1_000_000, 7000), examples, loss_is_violation=True
    )
    [finding] = [f for f in findings if f.anomaly == "aborted_read"]
    assert finding.verdict.value == "KNOWN-BUG"
    assert "while transaction 9 was open" in finding.detail, finding.detail
