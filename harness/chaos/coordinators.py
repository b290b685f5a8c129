"""Which broker coordinates an id: the transaction coordinator of a transactional.id, the group
coordinator of a group.id.

Kafka assigns an id to the partition `Utils.abs(id.hashCode()) % partitions` of its internal
topic (__transaction_state, __consumer_offsets: TransactionStateManager.partitionFor and
GroupMetadataManager.partitionFor), and the coordinator is that partition's leader.
confluent-kafka 2.16 has no DescribeTransactions, so the harness computes it the same way for
both ids.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from harness.chaos.faults.base import FaultError

if TYPE_CHECKING:
    from harness.platform.cluster import KafkaCluster

TRANSACTION_STATE: Final = "__transaction_state"
CONSUMER_OFFSETS: Final = "__consumer_offsets"


def java_string_hash(text: str) -> int:
    """Java's String.hashCode of `text` (UTF-16 code units, 32-bit signed overflow)."""
    h = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(key: str, partitions: int) -> int:
    """Kafka's partitionFor: Utils.abs(key.hashCode()) % partitions (abs(MIN_VALUE) is 0)."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def coordinator_of(cluster: KafkaCluster, internal_topic: str, key: str) -> int:
    """The broker id leading `key`'s partition of `internal_topic`; FaultError when the topic
    does not exist yet or the partition has no leader."""
    try:
        states = cluster.partition_states(internal_topic)
    except Exception as exc:
        raise FaultError(f"no {internal_topic} to find the coordinator of {key!r}: {exc}") from exc
    state = states[partition_for(key, len(states))]
    if state.leader is None:
        raise FaultError(f"{internal_topic} partition {state.partition} (of {key!r}) has no leader")
    return state.leader
