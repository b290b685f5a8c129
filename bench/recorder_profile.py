"""Where the recorder's extra client CPU goes, per message, without Kafka.

    python bench/recorder_profile.py [--messages 1000000] [--repeats 5]

bench/recorder_bench.py measures the recorder against a bare producer on a live cluster: the
recorder spends more client CPU per message. This splits the recorder's own Python work into
the steps a message takes, on synthetic delivery reports (confluent_kafka.Message objects with
a partition, offset, latency and the recorder's value), so each figure is the step alone:

- value: encode_value, which the bare producer in recorder_bench does as well;
- callback: the recorder's on_delivery (tally + append), beside the bare producer's (a count);
- commit: handing the served reports to the journal (once per poll, here per 100 reports);
- decode: the journal thread's column-wise decode of the reports into an Arrow batch
  (the msg_id parsed from each value, partition, offset, latency);
- write: the Arrow stream write of those batches (the crash-safe journal on disk).

Each figure is the median over --repeats of CPU seconds (process_time) divided by messages.
librdkafka's own CPU (the same for both producers) is not here; recorder_bench prints the
total.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from confluent_kafka import Message

from harness.workload.journal import AckJournal
from harness.workload.producer.recorder import DeliveryTally, delivery_callback, status_of
from harness.workload.values import encode_value

POLL_EVERY = 100  # reports served per poll (commit) in the profile


def cpu_us(step: Callable[[], object], messages: int, repeats: int) -> float:
    """Median CPU µs per message of step() over repeats."""
    runs = []
    for _ in range(repeats):
        started = time.process_time()
        step()
        runs.append((time.process_time() - started) / messages * 1e6)
    return statistics.median(runs)


def reports(messages: int) -> list[Message]:
    """Delivered reports as librdkafka serves them: the recorder's values, 3 partitions."""
    return [
        Message(
            topic="t",
            partition=i % 3,
            offset=i // 3,
            value=encode_value(i, i // 16, 100),
            key=b"k",
            latency=0.004,
        )
        for i in range(messages)
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    n, repeats = args.messages, args.repeats
    served = reports(n)
    figures: dict[str, float] = {}

    def values() -> None:
        for i in range(n):
            encode_value(i, i // 16, 100)

    figures["value (both producers)"] = cpu_us(values, n, repeats)

    count = [0]

    def bare_cb(err: object, msg: object) -> None:
        count[0] += 1

    def bare() -> None:
        for msg in served:
            bare_cb(None, msg)

    figures["bare callback (a count)"] = cpu_us(bare, n, repeats)

    with tempfile.TemporaryDirectory() as tmp:
        journal = AckJournal(Path(tmp), 16, status_of)
        journal._stop.set()  # the profile calls flush itself, on this thread
        journal._thread.join()
        on_delivery = delivery_callback(journal, DeliveryTally())

        def callback() -> None:
            for msg in served:
                on_delivery(None, msg)
            journal.delivered.clear()

        figures["recorder callback"] = cpu_us(callback, n, repeats)

        def commit() -> None:
            for start in range(0, n, POLL_EVERY):
                journal.delivered.extend(served[start : start + POLL_EVERY])
                journal.commit()
            journal._pages.clear()

        def fill_only() -> None:  # what commit() adds is measured beyond this
            for start in range(0, n, POLL_EVERY):
                journal.delivered.extend(served[start : start + POLL_EVERY])
                journal.delivered.clear()

        filling = cpu_us(fill_only, n, repeats)
        figures["commit (per poll)"] = max(cpu_us(commit, n, repeats) - filling, 0.0)

        stamps = np.full(n, time.time_ns(), dtype=np.int64)
        figures["decode (journal thread)"] = cpu_us(
            lambda: journal._columnwise(served, stamps, "ok"), n, repeats
        )
        batch = journal._columnwise(served, stamps, "ok")
        figures["write (Arrow stream)"] = cpu_us(lambda: journal._acks.write(batch), n, repeats)
        journal._acks.close()
        journal._sends.close()

    extra = (
        figures["recorder callback"]
        - figures["bare callback (a count)"]
        + figures["commit (per poll)"]
        + figures["decode (journal thread)"]
        + figures["write (Arrow stream)"]
    )
    print(f"{n:,} synthetic delivery reports, median of {repeats}, CPU µs per message")
    for name, value in figures.items():
        print(f"  {name:<28} {value:6.3f}")
    print(f"  {'recorder extra (sum)':<28} {extra:6.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
