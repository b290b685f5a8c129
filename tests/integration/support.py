"""Helpers for tests against real brokers: waiting for a condition, and reading a topic back
with a plain consumer (independent of the harness's own read-back)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TypeVar

import docker
import pyarrow.compute as pc
import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from harness import waiting
from harness.rundir.layout import JournalFiles
from harness.rundir.records import ACK_SCHEMA
from harness.rundir.streams import read_stream
from harness.settings import load_settings

T = TypeVar("T")
Record = tuple[bytes | None, bytes | None]  # (key, value)


def poll_until(condition: Callable[[], T], timeout_s: float) -> T | None:
    """Poll `condition` until it returns something truthy (returned), or None after `timeout_s`."""
    return waiting.wait_for(condition, timeout_s, interval_s=0.25)


def first_event_us(run_dir: Path, event_type: str) -> int:
    """The `ts_us` of the run's first event of `event_type` (it must have been written)."""
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    return next(e["ts_us"] for e in map(json.loads, lines) if e.get("type") == event_type)


def acks_after(run_dir: Path, files: JournalFiles, ts_us: int) -> int:
    """The delivery reports a recorder's journal holds, stamped after `ts_us` (read while it
    is written: a torn last batch is left out)."""
    acks = read_stream(run_dir / files.acks, ACK_SCHEMA)
    return int(pc.sum(pc.greater(acks["ack_ts_us"], ts_us)).as_py() or 0)


def wait_until(condition: Callable[[], T], timeout_s: float, what: str) -> T:
    """Poll `condition` until it returns something truthy (returned); fail after `timeout_s`."""
    value = poll_until(condition, timeout_s)
    if not value:
        pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
    return value


def expected_value(msg_id: int, keys: int, size: int) -> bytes:
    """The value message `msg_id` must carry, from the README's format (not the harness code)."""
    head = f"{msg_id:015d}:{msg_id // keys:012d}:".encode()
    return head + b"." * (size - len(head))


def read_all(bootstrap: str, topic: str, partitions: int, timeout_s: float = 60) -> dict:
    """Every record of `topic` up to the high watermark: {(partition, offset): (key, value)}."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "log_level": 0,
        }
    )
    records: dict[tuple[int, int], Record] = {}
    try:
        high = {p: _high_watermark(consumer, TopicPartition(topic, p)) for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        pending = {p for p, hw in high.items() if hw > 0}
        deadline = time.monotonic() + timeout_s
        while pending and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=5000, timeout=1.0):
                if msg.error() is not None:
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        pending.discard(msg.partition())
                    continue
                records[(msg.partition(), msg.offset())] = (msg.key(), msg.value())
                if msg.offset() >= high[msg.partition()] - 1:
                    pending.discard(msg.partition())
    finally:
        consumer.close()
    assert not pending, f"partitions {sorted(pending)} not read to their high watermark"
    return records


def _high_watermark(consumer: Consumer, partition: TopicPartition, timeout_s: float = 15) -> int:
    """The partition's high watermark, retried while metadata lags (a new topic, a new leader)."""
    lagging = {
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError._UNKNOWN_TOPIC,
    }
    try:
        low_high = waiting.poll_until(
            lambda: consumer.get_watermark_offsets(partition, timeout=5, cached=False),
            timeout_s,
            f"the watermarks of {partition.topic}-{partition.partition}",
            retry_on=lambda exc: isinstance(exc, KafkaException) and exc.args[0].code() in lagging,
        )
    except waiting.WaitTimeout as timeout:
        raise timeout.last_error or timeout from None
    return low_high[1]


def high_watermarks(bootstrap: str, topic: str, partitions: int = 3) -> list[int]:
    """The high watermark of each partition of `topic`, asked of the leaders now."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"hw-{uuid.uuid4().hex[:8]}", "log_level": 0}
    )
    try:
        return [_high_watermark(consumer, TopicPartition(topic, p)) for p in range(partitions)]
    finally:
        consumer.close()


# --- the CLI, as a user runs it ---------------------------------------------------------------

HERE = Path(__file__).parent
CLI = [sys.executable, "-m", "kafka_chaos.cli"]


class CliRun(subprocess.CompletedProcess):
    """A finished kafka-chaos process, with its pid: the owner label of its clusters."""

    def __init__(self, process: subprocess.Popen, stdout: str, stderr: str):
        super().__init__(process.args, process.returncode, stdout, stderr)
        self.pid = process.pid


def run_cli(*args: str, timeout_s: float = 600) -> CliRun:
    """Run kafka-chaos with `args`; return the finished process (output captured)."""
    with subprocess.Popen(
        [*CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
    return CliRun(process, stdout, stderr)


def only_dir(root: Path) -> Path:
    """The one run under runs/<experiment>/ (beside the `latest` link that points at it)."""
    (found,) = [p for p in root.iterdir() if p.is_dir() and not p.is_symlink()]
    assert (root / "latest").resolve() == found.resolve()
    return found


def labelled_leftovers(owner: int, known: Collection[str] = ()) -> list[str]:
    """Names of the containers and networks that the harness process `owner` labelled as its
    own, beside those in `known` (what existed before the test began).

    Scoped to one process, so tests can share a machine (and this process's shared cluster)
    with other runs: another run's containers are never this test's leftovers.
    """
    client = docker.from_env()
    owned = f"{load_settings().label}.pid={owner}"
    found = client.containers.list(all=True, filters={"label": owned})
    found += client.networks.list(filters={"label": owned})
    return sorted(thing.name for thing in found if thing.name not in known)


def wait_for_event(run_dir_parent: Path, event_type: str, timeout_s: float) -> Path:
    """Wait until some events.jsonl under the folder has an event of `event_type`; its folder."""

    def holding() -> Path | None:
        for events in run_dir_parent.rglob("events.jsonl"):
            if f'"type": "{event_type}"' in events.read_text():
                return events.parent
        return None

    return wait_until(holding, timeout_s, f"a {event_type} event under {run_dir_parent}")


def run_experiment(name: str, runs_dir: Path, *extra: str) -> tuple[Path, CliRun]:
    """Run tests/integration/experiments/<name>.yaml through the CLI into `runs_dir` (with
    `extra` arguments); assert it exited 0 and return its run root and the finished process."""
    done = run_cli(
        "run",
        str(HERE / "experiments" / f"{name}.yaml"),
        "--runs-dir",
        str(runs_dir),
        "--quiet",
        "--master",
        "local[2]",
        *extra,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return only_dir(runs_dir / name), done
