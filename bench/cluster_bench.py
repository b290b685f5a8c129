"""Prints cold and warm broker-image build times, the 3-broker cluster's time from start to
ready in one mode, and how long a SIGKILLed broker takes from restart to being back in the
ISR (idle cluster).

Targets on a 2-core machine: warm build <= 5 s, ready <= 5 s (warm image, kraft mode).
  python bench/cluster_bench.py [--cold] [--starts 3] [--mode kraft|kraft-dedicated|zookeeper]
                                [--version 3.9.1] [--zookeeper-nodes 1|3]
--cold removes the locally built image and base first (a full mmdebstrap + Maven build).
--version defaults to the settings' Kafka version, or 3.9.1 (the last ZooKeeper line) in
zookeeper mode.
"""

from __future__ import annotations

import argparse
import statistics
import time

import docker

from harness.platform.cluster import KafkaCluster
from harness.platform.engine import ensure_engine
from harness.platform.image import base_tag, ensure_image, image_tag
from harness.platform.versions import Mode
from harness.settings import load_settings

LAST_ZOOKEEPER_LINE = "3.9.1"

READY_TARGET_S = 5.0  # a 3-node cluster ready from a warm image (the everyday loop)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cold", action="store_true", help="also time a build from scratch")
    parser.add_argument("--starts", type=int, default=3, help="cluster starts to time")
    parser.add_argument("--image", help="time this image's starts instead of the built one")
    parser.add_argument("--mode", choices=[m.value for m in Mode], default=Mode.KRAFT.value)
    parser.add_argument("--version", help="Kafka release (see the module docstring)")
    parser.add_argument("--zookeeper-nodes", type=int, default=1, choices=(1, 3))
    args = parser.parse_args()
    ensure_engine()
    settings = load_settings()
    mode = Mode(args.mode)
    version = args.version or (
        LAST_ZOOKEEPER_LINE if mode is Mode.ZOOKEEPER else settings.kafka_version
    )
    if args.cold:
        client = docker.from_env()
        for tag in (image_tag(version, settings.compose_dir), base_tag(settings.compose_dir)):
            if client.images.list(name=tag):
                client.images.remove(tag, force=True)
        cold = ensure_image(version, log=lambda line: None)
        print(f"cold image build          {cold.seconds:7.1f} s  ({cold.tag})")
    warm = ensure_image(version, log=lambda line: None)
    print(f"warm image build          {warm.seconds:7.1f} s  (target <= 5 s)")
    shape = f"{mode.value}, Kafka {version}"
    if mode is Mode.ZOOKEEPER:
        shape += f", {args.zookeeper_nodes} ZooKeeper"
    ready, rejoin = [], []
    for _ in range(args.starts):
        started = time.monotonic()
        cluster = KafkaCluster(
            image=args.image or warm.tag,
            mode=mode,
            version=version,
            zookeeper_nodes=args.zookeeper_nodes,
        )
        try:
            cluster.start()
            ready.append(time.monotonic() - started)
            rejoin.append(restart_to_isr(cluster))
        finally:
            cluster.close()
    print(
        f"cluster ready (3 brokers) median {statistics.median(ready):5.1f} s, "
        f"min {min(ready):.1f} s, max {max(ready):.1f} s over {len(ready)} starts "
        f"({shape}; target <= {READY_TARGET_S:.0f} s: "
        f"{'met' if statistics.median(ready) <= READY_TARGET_S else 'MISSED'})"
    )
    print(
        f"SIGKILL, restart, in ISR  median {statistics.median(rejoin):5.1f} s, "
        f"min {min(rejoin):.1f} s, max {max(rejoin):.1f} s (from the start call)"
    )


def restart_to_isr(cluster: KafkaCluster) -> float:
    """Seconds from restarting a SIGKILLed, fenced node to its being in every ISR again."""
    cluster.create_topic("bench", 3, 3)
    node = cluster.node(1)
    node.kill()
    # Wait until the controller fenced it (broker session timeout): the ISR lost it.
    while not _isr_holds(cluster, 1, want=False):
        time.sleep(0.2)
    started = time.monotonic()
    node.start()
    while not _isr_holds(cluster, 1, want=True):
        time.sleep(0.1)
    return time.monotonic() - started


def _isr_holds(cluster: KafkaCluster, node_id: int, want: bool) -> bool:
    """Whether every partition of `bench` has (want) or lacks (not want) the node in its ISR."""
    try:
        return all((node_id in s.isr) == want for s in cluster.partition_states("bench"))
    except Exception:  # metadata briefly unavailable while nodes die and start
        return False


if __name__ == "__main__":
    main()
