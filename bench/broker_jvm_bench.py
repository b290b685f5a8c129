"""Prints what the brokers' JVM options cost and buy: a 3-broker cluster's time from start to
ready, and the acks=all throughput it then serves, for each variant, in alternating order
(ABBA rounds), with each variant's ratio to the image's own options.

The image runs the brokers on the C1 compiler alone (TieredStopAtLevel=1); `tiered` is the
JVM's own default, C1 then C2. On 2 cores three Kafka JVMs compete with their C2 compilations
for the cores; C2's code is faster once compiled. This bench says which wins, on this machine,
at start and over a workload of `--messages`.

  python bench/broker_jvm_bench.py [--rounds 3] [--messages 200000] [--variants image,tiered]
Run it on an otherwise idle machine: no other cluster, Spark job or test beside it.
"""

from __future__ import annotations

import argparse
import statistics
import time

from confluent_kafka import Producer

from harness.platform.cluster import KafkaCluster
from harness.platform.engine import ensure_engine
from harness.platform.image import ensure_image

VARIANTS: dict[str, str | None] = {
    "image": None,  # the entrypoint's default: C1 alone, G1
    "tiered": "-XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true",  # the JVM's
    "c1-serial": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Djava.awt.headless=true",
}
TOPIC, PARTITIONS, MESSAGE_BYTES = "jvm-bench", 6, 100


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="ABBA rounds (each starts each)")
    parser.add_argument("--messages", type=int, default=200_000, help="acks=all sends a start")
    parser.add_argument("--variants", default="image,tiered", help=f"of {', '.join(VARIANTS)}")
    args = parser.parse_args()
    names = args.variants.split(",")
    unknown = [name for name in names if name not in VARIANTS]
    if unknown or names[0] != "image":
        parser.error(f"variants are {', '.join(VARIANTS)}, the first 'image' (got {names})")
    ensure_engine()
    image = ensure_image(log=lambda line: None).tag
    ready: dict[str, list[float]] = {name: [] for name in names}
    rate: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(args.rounds):
        for name in names if round_ % 2 == 0 else reversed(names):
            seconds, per_s = one_start(image, VARIANTS[name], args.messages)
            ready[name].append(seconds)
            rate[name].append(per_s)
            print(f"  round {round_ + 1} {name:8} ready {seconds:5.1f} s, {per_s:9,.0f} msg/s")
    base_ready, base_rate = statistics.median(ready["image"]), statistics.median(rate["image"])
    for name in names:
        r, t = statistics.median(ready[name]), statistics.median(rate[name])
        print(
            f"{name:8} ready median {r:5.1f} s ({r / base_ready:4.2f}x the image's), "
            f"acks=all {t:9,.0f} msg/s ({t / base_rate:4.2f}x); options: {VARIANTS[name]}"
        )


def one_start(image: str, jvm_options: str | None, messages: int) -> tuple[float, float]:
    """(seconds from start to ready, acks=all messages a second) of one fresh cluster."""
    started = time.monotonic()
    cluster = KafkaCluster(image=image, jvm_options=jvm_options)
    try:
        cluster.start()
        seconds = time.monotonic() - started
        cluster.create_topic(TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
        return seconds, throughput(cluster.bootstrap_servers, messages)
    finally:
        cluster.close()


def throughput(bootstrap: str, messages: int) -> float:
    """acks=all messages a second of one producer sending `messages` as fast as it may."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "log_level": 0}
    )
    value = b"x" * MESSAGE_BYTES
    delivered = 0

    def on_delivery(error: object, _: object) -> None:
        nonlocal delivered
        delivered += error is None

    started = time.monotonic()
    for i in range(messages):
        while True:
            try:
                producer.produce(TOPIC, value, key=str(i % 16), on_delivery=on_delivery)
                break
            except BufferError:  # the local queue is full: serve reports, then go on
                producer.poll(0.05)
        producer.poll(0)
    producer.flush(120)
    elapsed = time.monotonic() - started
    if delivered != messages:
        raise SystemExit(f"only {delivered} of {messages} sends were acknowledged")
    return messages / elapsed


if __name__ == "__main__":
    main()
