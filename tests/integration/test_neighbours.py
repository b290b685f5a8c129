"""The neighbour load on real brokers: the hand-written OffsetCommit and OffsetFetch are taken
by the groups' coordinator and refused by the other brokers, the groups land on the workload
group's __consumer_offsets partition, and the load process ends on stop()."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition

from harness.chaos.coordinators import partition_for as offsets_partition
from harness.platform.cluster import KafkaCluster
from harness.waiting import wait_for
from harness.workload.neighbours import (
    OFFSETS_PARTITIONS,
    TOPIC,
    Broker,
    NeighbourLoad,
    Neighbours,
    neighbour_ids,
)

NOT_COORDINATOR = 16  # Kafka's error code

pytestmark = pytest.mark.integration

PARTITIONS = 12
GROUP = "kchaos-neighbours-test"


def answered(log: Path, kind: str) -> set[tuple[int, int | str]]:
    """(broker, error) of every `kind` request in the load's log."""
    if not log.exists():
        return set()
    lines = [json.loads(line) for line in log.read_text().splitlines() if line]
    return {(line["broker"], line["error"]) for line in lines if line["kind"] == kind}


def test_neighbours_commit_and_fetch_through_their_coordinator(
    cluster: KafkaCluster, tmp_path: Path
):
    cluster.create_topic(TOPIC, PARTITIONS, 1)
    member = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": GROUP})
    member.commit(offsets=[TopicPartition(TOPIC, 0, 1)], asynchronous=False)  # makes the topic
    member.close()
    brokers = cluster.admin().list_topics(timeout=10).brokers.values()
    groups = tuple(neighbour_ids(GROUP, OFFSETS_PARTITIONS, 3))
    log = tmp_path / "neighbours.jsonl"
    load = NeighbourLoad(
        tuple(Broker(b.id, b.host, b.port) for b in brokers), groups, PARTITIONS, 1, 0.2, str(log)
    )
    neighbours = Neighbours(load)
    neighbours.start()
    try:
        both = wait_for(
            lambda: answered(log, "fetch") and len(answered(log, "commit")) >= len(brokers),
            timeout_s=60,
        )
        assert both, log.read_text() if log.exists() else "no log"
    finally:
        neighbours.stop()
    assert neighbours.process is not None and neighbours.process.returncode is not None
    # One broker commits and answers (the coordinator), the others refuse: NOT_COORDINATOR.
    commits = answered(log, "commit")
    assert {error for _, error in commits} == {0, NOT_COORDINATOR}, commits
    assert {b for b, error in commits if error == 0} == {
        b for b, e in answered(log, "fetch") if e == 0
    }
    # The groups share the test group's partition and hold every partition's offset.
    assert {offsets_partition(g, OFFSETS_PARTITIONS) for g in groups} == {
        offsets_partition(GROUP, OFFSETS_PARTITIONS)
    }
    [future] = (
        cluster.admin()
        .list_consumer_group_offsets([ConsumerGroupTopicPartitions(groups[0])])
        .values()
    )
    offsets = future.result(timeout=30).topic_partitions
    assert sorted(tp.partition for tp in offsets if tp.topic == TOPIC) == list(range(PARTITIONS))
