"""Recorder throughput against a bare confluent-kafka producer, same cluster and config.

acks=1, no faults, unthrottled, 100-byte values. "bare" produces the same values with a
delivery callback that only counts; the recorder also journals every send and outcome.
Target: recorder >= 90 % of bare.
  python bench/recorder_bench.py [--messages 300000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Producer

from harness.cluster import KafkaCluster
from harness.engine import ensure_engine
from harness.image import ensure_image
from harness.journal import AckJournal, finalize
from harness.recorder import Recorder, Workload, encode_value

CONFIG = {"acks": "1", "linger.ms": 5, "enable.idempotence": False}


def bare(bootstrap: str, topic: str, count: int, size: int, keys: int) -> float:
    """Messages per second of a plain producer loop over the same values."""
    delivered = [0]

    def on_delivery(err, msg):
        delivered[0] += 1

    producer = Producer({**CONFIG, "bootstrap.servers": bootstrap, "on_delivery": on_delivery})
    names = [f"k{i}" for i in range(keys)]
    started = time.monotonic()
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
    elapsed = time.monotonic() - started
    producer.close()
    return count / elapsed


def recorded(bootstrap: str, topic: str, count: int, size: int, keys: int) -> float:
    """Messages per second of the Recorder, journal included."""
    with tempfile.TemporaryDirectory() as tmp:
        journal = AckJournal(Path(tmp))
        recorder = Recorder(
            bootstrap, topic, CONFIG, Workload(None, None, count, size, keys), journal
        )
        started = time.monotonic()
        recorder.run(threading.Event())
        journal.close()
        elapsed = time.monotonic() - started
        acked = finalize(Path(tmp))
        assert acked.num_rows == count
    return count / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    ensure_engine()
    with KafkaCluster(image=ensure_image(log=lambda line: None).tag) as cluster:
        cluster.create_topic("bench", 3, 3, {"min.insync.replicas": "1"})
        bare_rates, recorder_rates = [], []
        for _ in range(args.rounds):  # interleaved so drift hits both alike
            bare_rates.append(bare(cluster.bootstrap_servers, "bench", args.messages, 100, 16))
            recorder_rates.append(
                recorded(cluster.bootstrap_servers, "bench", args.messages, 100, 16)
            )
    b, r = statistics.median(bare_rates), statistics.median(recorder_rates)
    print(f"bare producer   {b:10,.0f} msg/s (median of {args.rounds})")
    print(f"recorder        {r:10,.0f} msg/s (median of {args.rounds})")
    print(f"recorder / bare {r / b:10.1%}  (target >= 90 %)")


if __name__ == "__main__":
    main()
