"""workload.transactions and the coordinator targets in experiment files."""

from __future__ import annotations

import random
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from harness.experiment.load import parse_experiment
from harness.experiment.matrix import expand
from harness.experiment.plan import cell_config, fault_class, schedule_for
from harness.run.resolved import transaction_plan
from harness.rundir.transactions import Intent
from harness.workload.transactions.librdkafka import TransactionPlan
from tests.unit.spec_documents import doc, rejects, step

TXN = {"rate": 100, "duration_s": 30, "transactions": {"size": 4, "abort_every": 3}}


def test_a_transactional_workload_with_a_coordinator_pause_is_valid() -> None:
    spec = parse_experiment(
        doc(
            workload=TXN,
            faults={"schedule": [step(fault="pause", target="txn-coordinator")]},
        ),
        source="exp.yaml",
    )
    assert spec.workload.transactions is not None
    assert spec.workload.transactions.send_offsets is False
    [cell] = expand(spec)
    steps = schedule_for(cell, 1)
    assert fault_class(steps) == "node-pause"  # one broker, judged by the roles it held
    config = cell_config(cell, steps)
    assert config.transactions is True and config.enable_idempotence is True


def test_a_plain_cell_config_says_nothing_of_transactions() -> None:
    [cell] = expand(parse_experiment(doc(), source="exp.yaml"))
    assert "transactions" not in cell_config(cell, []).as_json()


def test_coordinator_targets_need_transactions() -> None:
    rejects(
        doc(faults={"schedule": [step(target="txn-coordinator")]}),
        "faults.schedule[0].target",
        "needs workload.transactions",
    )
    rejects(
        doc(
            workload=TXN,
            faults={"schedule": [step(target="group-coordinator")]},
        ),
        "send_offsets: true",
    )


def test_transactions_refuse_several_producers_and_acks_1() -> None:
    rejects(doc(workload={**TXN, "producers": 2}), "workload.producers", "one producer")
    rejects(doc(workload=TXN, producer={"acks": "1"}), "producer.acks", "transactions require")


def test_abort_every_and_abort_ratio_exclude_each_other() -> None:
    both = {**TXN, "transactions": {"abort_every": 3, "abort_ratio": 0.5}}
    rejects(doc(workload=both), "abort_every or abort_ratio, not both")


def test_transactions_need_a_release_that_has_them() -> None:
    rejects(
        doc(workload=TXN, kafka={"version": "0.10.2.2", "mode": "zookeeper"}),
        "workload.transactions",
    )


def test_the_message_timeout_must_fit_in_the_transaction_timeout() -> None:
    short = {**TXN, "transactions": {"timeout_ms": 10_000}}
    rejects(doc(workload=short), "producer.message_timeout_ms", "transactions.timeout_ms (10000)")


def test_reads_are_resolved_into_the_plan() -> None:
    reading = {**TXN, "transactions": {"reads": 20}}
    spec = parse_experiment(doc(workload=reading), source="exp.yaml")
    assert transaction_plan(spec, seed=1).reads == 20
    assert transaction_plan(parse_experiment(doc(workload=TXN), source="x"), seed=1).reads == 0
    rejects(doc(workload={**TXN, "transactions": {"reads": -1}}), "workload.transactions.reads")


def test_reads_are_refused_on_the_java_client() -> None:
    java = {**TXN, "client": "java:3.8.0", "transactions": {"reads": 5}}
    message = rejects(
        doc(workload=java),
        "workload.transactions.reads",
        "librdkafka client only",
        "Fix: set workload.transactions.reads: 0 or use client: librdkafka",
    )
    assert "java" in message
    parse_experiment(doc(workload={**java, "transactions": {"reads": 0}}), source="exp.yaml")


def test_ageing_needs_transaction_version_2_on_both_sides() -> None:
    def aged(client: str, version: str = "4.3.1") -> dict:
        transactions = {"size": 4, "abort_every": 3, "age_commits": 32_765}
        return doc(
            workload={**TXN, "client": client, "transactions": transactions},
            kafka={"version": version},
        )

    spec = parse_experiment(aged("java:4.3.1"), source="exp.yaml")
    assert transaction_plan(spec, seed=1).age_commits == 32_765
    rejects(aged("java:3.9.1"), "workload.transactions.age_commits", "Fix: set workload.client")
    rejects(aged("librdkafka"), "workload.transactions.age_commits", "Java client from 4.0.0")
    rejects(aged("java:4.3.1", "3.9.1"), "age_commits", "Fix: use Kafka 4.0 or later")
    too_far = {**TXN, "client": "java:4.3.1", "transactions": {"age_commits": 32_767}}
    rejects(doc(workload=too_far), "workload.transactions.age_commits", "32,767")


@given(
    st.integers(0, 6),
    st.one_of(st.none(), st.integers(2, 5)),
    st.floats(0, 1),
    st.integers(0, 2**32),
)
def test_abort_first_aborts_the_first_transactions_and_changes_no_later_intent(
    first, every, ratio, seed
) -> None:
    plain = TransactionPlan(4, every, None if every else ratio, seed, 30_000, False, 3)
    aged = replace(plain, abort_first=first)
    rng_plain, rng_aged = random.Random(seed), random.Random(seed)
    for txn in range(12):
        expected = plain.intent(txn, rng_plain)
        got = aged.intent(txn, rng_aged)
        assert got == (Intent.ABORT if txn < first else expected), (txn, got, expected)
