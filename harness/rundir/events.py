"""events.jsonl: the event types of a run, their writer (EventLog) and their reader."""

from __future__ import annotations

import json
import threading
import time
from enum import StrEnum
from pathlib import Path
from typing import Any

from harness.rundir.layout import EVENTS

# ---------------------------------------------------------------------------------------------
# events.jsonl


class EventType(StrEnum):
    """The `type` of an events.jsonl line."""

    PHASE = "phase"  # phase: cluster-start, topic-ready, workload-start, ...
    # fault_id, step, fault, target, nodes, hosts, class_kind, whole_cluster, detail, and
    # partitions: [{partition, leader, isr, replicas}] just before injection (or
    # partitions_error); `as` and `open` for a named fault left active until a heal step
    FAULT_START = "fault_start"
    FAULT_END = "fault_end"  # fault_id, fault, nodes, detail?
    FAULT_ERROR = "fault_error"  # fault_id, fault, target, error, stage (inject|heal|condition)
    CONDITION = "condition"  # step, condition, waited_s: a step's `after:` condition held
    SAMPLE = "sample"  # controller, partitions: [{partition, leader, isr}]
    READBACK = "readback"  # complete, log_start_offsets, high_watermarks, records, ...
    RECORDER_TALLY = "recorder_tally"  # reports: {ok, failed, indeterminate}, journal_error
    HARNESS_ERROR = "harness_error"  # error
    # producer, pid, exitcode, error: a producer process (workload.producers > 1) that died or
    # failed before it finished; its journal is still merged into acked.parquet
    PRODUCER_CRASHED = "producer_crashed"
    # kept, reason, missing_acked, budget_bytes, topic, error,
    # brokers: {id: {files, bytes, partitions, skipped}}
    SEGMENTS = "segments"
    # member, start, pid, exitcode, error: a group consumer process (workload.consumers > 0)
    # that ended unexpectedly (not by a consumer fault); its journal is still read
    CONSUMER_CRASHED = "consumer_crashed"
    # caught_up, waited_s, committed: {partition: offset}, end_offsets: {partition: offset},
    # commit, members, starts: after the final heal, whether the group's committed offsets
    # reached every partition's end (else consumer_unprocessed cannot be judged)
    CONSUMERS = "consumers"


def load_events(run_dir: str | Path) -> list[dict[str, Any]]:
    """The events of a run dir in file order; [] when missing; skips torn or non-object lines."""
    path = Path(run_dir) / EVENTS
    if not path.is_file():
        return []
    events: list[dict[str, Any]] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue  # a crashed run may leave a torn last line; the rest is still evidence
        if isinstance(event, dict):
            events.append(event)
    return events


def now_us() -> int:
    """Wall-clock time as int64 epoch microseconds."""
    return time.time_ns() // 1000


class EventLog:
    """events.jsonl: one JSON object a line, each flushed as it is written (thread-safe)."""

    def __init__(self, path: Path):
        self.path = path
        self._file = path.open("a", buffering=1)
        self._lock = threading.Lock()

    def write(self, type_: str, **fields: Any) -> dict[str, Any]:
        """Append an event with `ts_us` (now unless given) and `type`; return it."""
        event = {"ts_us": fields.pop("ts_us", None) or now_us(), "type": type_, **fields}
        line = json.dumps(event, default=str)
        with self._lock:
            if not self._file.closed:
                self._file.write(line + "\n")
        return event

    def close(self) -> None:
        with self._lock:
            self._file.close()
