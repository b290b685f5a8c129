"""Prints how long a read of the partitions' roles (`KafkaCluster.partition_states`, what every
role-targeted schedule step reads before it acts, and again after) takes on a healthy 3-broker
cluster and while each broker in turn is paused, read after read: as the harness reads now,
and as it read before (the shared client first, for the whole 5 s timeout, and the running
brokers only when it failed), on the same cluster in the same run.

A paused broker keeps its connections open and never answers; a read that waits its whole
timeout on it delays the steps after it, which moves a cascade's drawn gaps. Target: no read
with a broker paused takes over 0.5 s.
  python bench/metadata_reads.py [--reads 3] [--rounds 3]
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections.abc import Callable

from confluent_kafka import KafkaException

from harness.platform.cluster import KafkaCluster, _quiet_admin
from harness.platform.engine import ensure_engine
from harness.platform.image import ensure_image
from harness.waiting import wait_for

TARGET_S = 0.5
TIMEOUT_S = 5.0  # partition_states' default timeout


def read_before(cluster: KafkaCluster, topic: str) -> None:
    """The metadata read as the harness did it before: the shared client for the whole
    timeout, the running brokers only when it failed."""
    try:
        cluster.admin().list_topics(topic=topic, timeout=TIMEOUT_S)
    except KafkaException:
        running = [n.address for n in cluster.nodes if n.state() == "running"]
        _quiet_admin(",".join(running)).list_topics(topic=topic, timeout=TIMEOUT_S)


def timed_reads(read: Callable[[], object], reads: int) -> list[float]:
    """Seconds each of `reads` consecutive reads took."""
    times = []
    for _ in range(reads):
        started = time.monotonic()
        read()
        times.append(time.monotonic() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reads", type=int, default=3, help="reads per pause")
    parser.add_argument("--rounds", type=int, default=3, help="pauses of each broker, each way")
    args = parser.parse_args()
    ensure_engine()
    cluster = KafkaCluster(image=ensure_image(log=print).tag).start()
    try:
        topic = f"reads-{uuid.uuid4().hex[:6]}"
        cluster.create_topic(topic, 3, 3, {"min.insync.replicas": "2"})
        wait_for(lambda: all(s.leader for s in cluster.partition_states(topic)), 30)
        healthy = timed_reads(lambda: cluster.partition_states(topic), args.reads)
        ways = {
            "before": lambda: read_before(cluster, topic),
            "now": lambda: cluster.partition_states(topic),
        }
        paused: dict[str, list[float]] = {}
        for way, read in ways.items():
            # Each broker in turn: which one the shared client asks is librdkafka's choice.
            for frozen in [node for _ in range(args.rounds) for node in cluster.nodes]:
                cluster._admin = None  # a fresh client, connected by one healthy read
                cluster.partition_states(topic)
                frozen.pause()
                try:
                    paused.setdefault(way, []).extend(timed_reads(read, args.reads))
                finally:
                    frozen.unpause()
    finally:
        cluster.close()
    print(f"healthy reads (s): {', '.join(f'{t:.2f}' for t in healthy)}")
    for way, times in paused.items():
        shown = ", ".join(f"{t:.2f}" for t in times)
        print(f"each broker paused in turn, reads {way} (s): {shown}")
    worst = max(paused["now"])
    print(
        f"sum with a broker paused: {sum(paused['before']):.2f} s before, "
        f"{sum(paused['now']):.2f} s now"
    )
    verdict = "met" if worst <= TARGET_S else "MISSED"
    print(f"slowest read with a broker paused: {worst:.2f} s (target {TARGET_S:.1f} s: {verdict})")


if __name__ == "__main__":
    main()
