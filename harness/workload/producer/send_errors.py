"""What a client's send error says about the write: `failed` (the broker refused it, or it never
left the client: not in the log) or `indeterminate` (it may or may not be in the log: never
counted as a loss).

An error the harness does not know is indeterminate: a guess of `failed` could turn a write
that reached the log into an unexplained record (docs/kafka-reliability.md, judgement rules:
prefer UNKNOWN to a guess). Java names its errors by exception class; librdkafka-based
clients by error code name (confluent_kafka.KafkaError), which the librdkafka recorder
classifies the same way (recorder.INDETERMINATE).
"""

from __future__ import annotations

from typing import Final

from confluent_kafka import KafkaError

from harness.rundir.records import Status
from harness.workload.producer.protocol import PROTOCOL_PREFIX
from harness.workload.producer.recorder import INDETERMINATE

__all__ = ["status_of_error"]

_ERRORS = "org.apache.kafka.common.errors."
# Java send errors where the write is known not to be in the log: refused by the client before
# it was sent, or by the partition leader before the append (the last attempt's answer; a
# retried earlier attempt that did land shows up as failed_present, never as a loss).
JAVA_FAILED: Final = frozenset(
    _ERRORS + name
    for name in (
        "RecordTooLargeException",
        "RecordBatchTooLargeException",
        "SerializationException",
        "InvalidTopicException",
        "TopicAuthorizationException",
        "ClusterAuthorizationException",
        "InvalidRecordException",
        "CorruptRecordException",
        "NotEnoughReplicasException",
        "NotLeaderForPartitionException",
        "NotLeaderOrFollowerException",
        "UnknownTopicOrPartitionException",
        "InvalidRequiredAcksException",
        "UnsupportedVersionException",
        "UnsupportedForMessageFormatException",
        "InvalidProducerEpochException",
        "ProducerFencedException",
    )
)
# librdkafka's error names (KafkaError._MSG_TIMED_OUT is "_MSG_TIMED_OUT") that the librdkafka
# recorder journals as indeterminate.
_LIBRDKAFKA_INDETERMINATE: Final = frozenset(KafkaError(code).name() for code in INDETERMINATE)
_LIBRDKAFKA_NAMES: Final = frozenset(
    name
    for name in dir(KafkaError)
    if not name.startswith("__") and isinstance(getattr(KafkaError, name), int)
)


# Kafka's protocol error codes (the `error_code` a family program reports) of the errors JAVA_FAILED
# names: the leader refused the write before the append, or the request could never be valid.
# Any other code (REQUEST_TIMED_OUT 7, NOT_ENOUGH_REPLICAS_AFTER_APPEND 20 ...) is indeterminate.
PROTOCOL_FAILED: Final = frozenset({2, 3, 6, 10, 17, 18, 19, 21, 29, 31, 35, 43, 47, 87, 90})


def status_of_error(name: str) -> str:
    """`failed` or `indeterminate` for a send error named `name` (a Java exception class, a
    librdkafka error code name, `kafka-error-<code>` for the Kafka protocol error a family
    program reported, or any other text a client printed)."""
    if name.startswith(PROTOCOL_PREFIX):
        code = name.removeprefix(PROTOCOL_PREFIX)
        failed = code.isdigit() and int(code) in PROTOCOL_FAILED
        return Status.FAILED.value if failed else Status.INDETERMINATE.value
    if name in JAVA_FAILED:
        return Status.FAILED.value
    if name in _LIBRDKAFKA_NAMES and name not in _LIBRDKAFKA_INDETERMINATE:
        return Status.FAILED.value
    return Status.INDETERMINATE.value
