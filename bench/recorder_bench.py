"""Recorder throughput against a bare confluent-kafka producer, same cluster and config.

acks=1, no faults, unthrottled, 100-byte values. "bare" produces the same values with a
delivery callback that only counts; the recorder also journals every send and outcome.
Target: recorder >= 90 % of bare.

Brokers and client share the machine's cores, so wall-clock rates drift between rounds; the
rounds run in ABBA order and each adjacent pair gives one ratio (drift cancels), and the
client's own CPU time per message is printed beside it (steadier than wall time).
  python bench/recorder_bench.py [--messages 200000] [--pairs 4]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Producer

from harness.platform.cluster import KafkaCluster
from harness.platform.engine import ensure_engine
from harness.platform.image import ensure_image
from harness.workload.finalize import finalize
from harness.workload.journal import AckJournal
from harness.workload.producer.recorder import Recorder, Workload, status_of
from harness.workload.values import encode_value

CONFIG = {"acks": "1", "linger.ms": 5, "enable.idempotence": False}

PAIR_TARGET = 0.95  # the recorder keeps 95 % of a bare producer in each ABBA pair


def bare(bootstrap: str, topic: str, count: int, size: int, keys: int) -> tuple[float, float]:
    """(messages per second, client CPU µs per message) of a plain producer loop."""
    delivered = [0]

    def on_delivery(err, msg):
        delivered[0] += 1

    producer = Producer({**CONFIG, "bootstrap.servers": bootstrap, "on_delivery": on_delivery})
    names = [f"k{i}" for i in range(keys)]
    started, cpu = time.monotonic(), time.process_time()
    sent = 0
    while sent < count:
        try:
            producer.produce(topic, encode_value(sent, sent // keys, size), key=names[sent % keys])
        except BufferError:
            producer.poll(0.05)
            continue
        sent += 1
        producer.poll(0)
    producer.flush(60)
    elapsed, cpu = time.monotonic() - started, time.process_time() - cpu
    producer.close()
    return count / elapsed, cpu / count * 1e6


def recorded(bootstrap: str, topic: str, count: int, size: int, keys: int) -> tuple[float, float]:
    """(messages per second, client CPU µs per message) of the Recorder, journal included."""
    with tempfile.TemporaryDirectory() as tmp:
        journal = AckJournal(Path(tmp), 16, status_of)
        recorder = Recorder(
            bootstrap, topic, CONFIG, Workload(None, None, count, size, keys), journal
        )
        started, cpu = time.monotonic(), time.process_time()
        recorder.run(threading.Event())
        journal.close()
        elapsed, cpu = time.monotonic() - started, time.process_time() - cpu
        assert finalize(Path(tmp)) == count  # acked.parquet's rows
    return count / elapsed, cpu / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--pairs", type=int, default=4)
    args = parser.parse_args()
    ensure_engine()
    with KafkaCluster(image=ensure_image(log=lambda line: None).tag) as cluster:
        cluster.create_topic("bench", 3, 3, {"min.insync.replicas": "1"})
        run = {"bare": bare, "recorder": recorded}
        # One unmeasured round of each: the brokers' JIT warms up over the first ~200k.
        for measure in run.values():
            measure(cluster.bootstrap_servers, "bench", args.messages, 100, 16)
        results: dict[str, list[tuple[float, float]]] = {"bare": [], "recorder": []}
        for pair in range(args.pairs):
            order = ["bare", "recorder"] if pair % 2 == 0 else ["recorder", "bare"]
            for name in order:
                results[name].append(
                    run[name](cluster.bootstrap_servers, "bench", args.messages, 100, 16)
                )
    for name, rows in results.items():
        rates = [rate for rate, _ in rows]
        cpus = [cpu for _, cpu in rows]
        print(
            f"{name:9} {statistics.median(rates):10,.0f} msg/s median "
            f"(min {min(rates):,.0f}, max {max(rates):,.0f}); "
            f"client CPU {statistics.median(cpus):.2f} µs/msg"
        )
    ratios = [r[0] / b[0] for b, r in zip(results["bare"], results["recorder"], strict=True)]
    cpu_ratio = statistics.median(c for _, c in results["bare"]) / statistics.median(
        c for _, c in results["recorder"]
    )
    print(
        f"recorder / bare throughput, median of {len(ratios)} pairs: "
        f"{statistics.median(ratios):.1%} (pairs: {', '.join(f'{r:.0%}' for r in ratios)}); "
        f"target >= {PAIR_TARGET:.0%} in every pair: "
        f"{'met' if min(ratios) >= PAIR_TARGET else 'MISSED'}"
    )
    print(f"bare / recorder client CPU per message: {cpu_ratio:.1%}")


if __name__ == "__main__":
    main()
