"""The rules of `workload.transactions` across sections (producer, client, Kafka release),
checked on every resolved matrix cell as harness.experiment.rules checks the others: each
yields (field path, problem) pairs."""

from __future__ import annotations

from collections.abc import Iterator

from harness.experiment.model import Experiment
from harness.experiment.problems import Problem
from harness.platform.versions import TV2_JAVA_CLIENT, Feature
from harness.rundir.release import KafkaVersion

__all__ = ["transaction_problems"]


def transaction_problems(spec: Experiment) -> Iterator[Problem]:
    """Every problem of a transactional workload with the rest of the cell; none without."""
    transactions = spec.workload.transactions
    if transactions is None:
        return
    if transactions.abort_every is not None and transactions.abort_ratio is not None:
        reason = "give workload.transactions.abort_every or abort_ratio, not both (null the other)"
        yield "workload.transactions.abort_ratio", reason
    if spec.workload.producers != 1:
        reason = "a transactional workload runs one producer (one transactional.id); set 1"
        yield "workload.producers", reason
    if spec.producer.acks != "all":
        reason = f'transactions require producer.acks: all (got "{spec.producer.acks}")'
        yield "producer.acks", reason
    librdkafka = spec.workload.client.kind == "librdkafka"  # Java has no such bound
    if librdkafka and not 0 < spec.producer.message_timeout_ms <= transactions.timeout_ms:
        reason = (
            f"librdkafka requires producer.message_timeout_ms ({spec.producer.message_timeout_ms})"
            f" to be 1..workload.transactions.timeout_ms ({transactions.timeout_ms}); lower it "
            "or raise the transaction timeout"
        )
        yield "producer.message_timeout_ms", reason
    if transactions.reads and (not librdkafka or spec.workload.client.runs_program):
        reason = (
            f"reads ({transactions.reads}) run on the librdkafka client only (this cell's is "
            f"{spec.workload.client.label}); Fix: set workload.transactions.reads: 0 or use "
            "client: librdkafka (the in-process one, no version)"
        )
        yield "workload.transactions.reads", reason
    if not transactions.rewind_on_abort and not transactions.reads:
        reason = (
            "rewind_on_abort: false moves the position of the transactions' reader, which "
            "reads nothing (reads: 0); Fix: set workload.transactions.reads above 0 or drop "
            "rewind_on_abort"
        )
        yield "workload.transactions.rewind_on_abort", reason
    yield from _aging_problems(spec)
    if lacking := spec.kafka.lacks(Feature.TRANSACTIONS):
        yield "workload.transactions", f"{lacking} Fix: use Kafka 0.11 or later."


def _aging_problems(spec: Experiment) -> Iterator[Problem]:
    """age_commits raises the epoch only under transaction version 2: a Java client from 4.0
    (the one the harness ages the transactional.id with) and a Kafka release from 4.0."""
    transactions = spec.workload.transactions
    if transactions is None or not transactions.age_commits:
        return
    client = spec.workload.client
    field = "workload.transactions.age_commits"
    if client.kind != "java" or KafkaVersion.parse(client.version or "0") < TV2_JAVA_CLIENT:
        reason = (
            f"age_commits ({transactions.age_commits}) needs a Java client from "
            f"{TV2_JAVA_CLIENT} (transaction version 2; this cell's is {client.label}); Fix: "
            'set workload.client: "java:4.3.1" or drop age_commits'
        )
        yield field, reason
    if lacking := spec.kafka.lacks(Feature.TRANSACTION_VERSION_2):
        yield field, f"{lacking} Fix: use Kafka 4.0 or later, or drop age_commits."
