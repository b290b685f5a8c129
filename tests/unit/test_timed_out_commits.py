"""The timed-out commit check (analysis.checks.timed_out_commits) against an oracle written
here, over generated transaction journals, and its judgement."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.checks.timed_out_commits import (
    refused_invalid_state,
    timed_out_commits,
    transaction_timeout_ms,
)
from analysis.checks.transactions import Transactions
from analysis.judge.outcomes import Verdict
from analysis.judge.transactions import transaction_findings
from analysis.model.anomalies import AnomalyName, CountName
from analysis.model.evidence import RunEvidence
from analysis.model.results import Example
from harness.rundir.config import CellConfig
from harness.rundir.spec import RunSpec
from harness.rundir.transactions import TRANSACTION_SCHEMA

# Clauses as the clients journal them: the refusal in each client's words, and others.
REFUSALS = (
    "InvalidTxnStateException: The producer attempted a transactional operation in an invalid "
    "state.",
    "INVALID_TXN_STATE: Failed to end transaction: Broker: Producer attempted a transactional "
    "operation in an invalid state",
    "INVALID_TXN_STATE: INVALID_TXN_STATE: The producer attempted a transactional operation",
    "kafka.errors.InvalidTxnStateError: [Error 48] InvalidTxnStateError",
)
OTHERS = (
    "ProducerFencedException: There is a newer producer with the same transactionalId",
    "TimeoutException: Timeout expired after 6000ms",
    "KafkaException: Cannot execute transactional method because we are in an error state",
    # A commit that failed because a send of the transaction was refused so: not the commit's.
    "main.errSendFailed: a send in the transaction failed: INVALID_TXN_STATE: The producer",
)
clause = st.tuples(
    st.sampled_from(("commit", "abort", "send")), st.sampled_from(REFUSALS + OTHERS)
).map(lambda c: f"{c[0]}: {c[1]}")
errors = st.one_of(
    st.none(),
    st.lists(st.one_of(clause, st.just("on timeout: abort")), min_size=1, max_size=3).map(
        "; ".join
    ),
)
rows = st.lists(
    st.tuples(
        st.integers(0, 10_000_000),
        st.one_of(st.none(), st.integers(0, 10_000_000)),
        errors,
    ),
    max_size=25,
)


def journal(generated) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "txn": i,
                "first_msg_id": 6 * i,
                "messages": 6,
                "intent": "commit",
                "outcome": "unknown" if error else "committed",
                "error": error,
                "begin_ts_us": begin,
                "end_ts_us": None if length is None else begin + length,
            }
            for i, (begin, length, error) in enumerate(generated)
        ],
        schema=TRANSACTION_SCHEMA,
    )


def oracle(generated, timeout_ms: int) -> list[int]:
    """The transactions open longer than the timeout with a commit clause naming the
    coordinator's INVALID_TXN_STATE in one of the clients' words."""
    found = []
    for i, (_, length, error) in enumerate(generated):
        if length is None or length <= timeout_ms * 1000:
            continue
        clauses = (error or "").split("; ")
        refused = {f"commit: {r}" for r in REFUSALS}
        if any(c in refused for c in clauses):
            found.append(i)
    return found


@settings(max_examples=300, deadline=None)
@given(rows, st.integers(1_000, 9_000))
def test_the_check_counts_what_the_oracle_counts(generated, timeout_ms):
    found = timed_out_commits(Transactions.of_table(journal(generated)), timeout_ms)
    assert [row["txn"] for row in found] == oracle(generated, timeout_ms)
    for row in found:
        begin, length, _ = generated[row["txn"]]
        assert (row["from_us"], row["to_us"]) == (begin, begin + length)


def test_a_refusal_counts_only_in_a_commit_clause():
    assert refused_invalid_state(f"commit: {REFUSALS[0]}; abort: {OTHERS[2]}")
    assert refused_invalid_state(f"on timeout: abort; commit: {REFUSALS[1]}")
    assert not refused_invalid_state(f"abort: {REFUSALS[1]}")
    assert not refused_invalid_state(f"commit: {OTHERS[0]}")
    assert not refused_invalid_state(None)


def test_the_timeout_is_the_cells_transaction_timeout():
    assert transaction_timeout_ms(RunSpec(workload={"transactions": {"timeout_ms": 2000}})) == 2000
    assert transaction_timeout_ms(RunSpec(workload={"transactions": None})) is None
    assert transaction_timeout_ms(RunSpec()) is None


def judged(version: str, client: str) -> list:
    config = CellConfig(kafka_version=version, client=client, transactions=True)
    counts = {CountName.TXN_COMMITTED: 3, AnomalyName.COMMIT_INVALID_STATE: 1}
    examples = {AnomalyName.COMMIT_INVALID_STATE: [Example(txn=4, from_us=0, to_us=5_100_000)]}
    findings = transaction_findings(
        config, counts, RunEvidence.coerce([]), examples, loss_is_violation=True
    )
    return [f for f in findings if f.anomaly == AnomalyName.COMMIT_INVALID_STATE]


def test_a_refused_commit_is_kafka_20785_where_it_affects_and_a_violation_elsewhere():
    [known] = judged("4.3.1", "java 4.3.1")
    assert known.verdict == Verdict.KNOWN_BUG and "KAFKA-20785" in known.detail
    assert "transaction 4 was open 5.1 s" in known.detail
    for version, client in (
        ("4.3.2", "java 4.3.1"),
        ("4.3.1", "java 3.9.1"),
        ("4.3.1", "sarama 1.61.1"),
    ):
        [finding] = judged(version, client)
        assert finding.verdict == Verdict.VIOLATION, (version, client)
        assert "PRODUCER_FENCED" in finding.detail
