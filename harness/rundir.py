"""The run directory: the one contract between harness/ (which writes it) and analysis/.

This module owns every file name, Arrow schema, send status and event type of that contract,
and imports no Kafka client, so the analysis can read runs on a machine without one.

    runs/<experiment>/<timestamp>/<cell>/<repetition>/   one repetition (a "run directory")
    runs/<experiment>/<timestamp>/                       plan, outcomes, harness log, report
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Any, Final

import pyarrow as pa

# ---------------------------------------------------------------------------------------------
# File names of one repetition's directory

SPEC: Final = "spec.json"
ACKED: Final = "acked.parquet"
READBACK: Final = "readback.parquet"
EVENTS: Final = "events.jsonl"
RESULTS: Final = "results.json"
JOURNAL_META: Final = "journal-meta.json"
JOURNAL_SENDS: Final = "journal-sends.arrows"
JOURNAL_ACKS: Final = "journal-acks.arrows"
JOURNAL_GLOB: Final = "journal-*"
BROKER_LOGS: Final = "broker-logs"
# Copies of the topic's log segments, kept for the analysis' attribution of missing messages:
# segments/broker-<id>/<topic>-<partition>/<base offset>.log
SEGMENTS: Final = "segments"
SEGMENTS_BROKER_PREFIX: Final = "broker-"
# The most segment bytes one repetition keeps; a broker whose copy would pass it keeps none.
SEGMENTS_BUDGET_BYTES: Final = 256 * 1024 * 1024

# File names of an experiment run's root directory
PLAN: Final = "plan.json"
OUTCOMES: Final = "outcomes.json"
HARNESS_LOG: Final = "harness.log"
REPORT_DIR: Final = "report"


# ---------------------------------------------------------------------------------------------
# Send outcomes


class Status(StrEnum):
    """The outcome of one send, as the producer learnt it."""

    OK = "ok"  # a delivery report without error: acknowledged
    FAILED = "failed"  # a definite error: the write was refused
    INDETERMINATE = "indeterminate"  # unknown: may or may not be in the log, never a loss


STATUSES: Final = tuple(s.value for s in Status)
# The `error` of an acked.parquet row whose send never got a delivery report.
NO_REPORT: Final = "no delivery report"


# ---------------------------------------------------------------------------------------------
# Arrow schemas (all timestamps int64 epoch microseconds: Spark cannot read ns Parquet stamps)

CHECKPOINT_SCHEMA: Final = pa.schema([("sent_upto", pa.int64()), ("ts_us", pa.int64())])
ACK_SCHEMA: Final = pa.schema([
    ("msg_id", pa.int64()), ("status", pa.string()), ("partition", pa.int32()),
    ("offset", pa.int64()), ("error", pa.string()), ("ack_ts_us", pa.int64()),
    ("latency_us", pa.int64()),
])  # fmt: skip
ACKED_SCHEMA: Final = pa.schema([
    ("msg_id", pa.int64()), ("key", pa.string()), ("key_seq", pa.int64()), ("status", pa.string()),
    ("partition", pa.int32()), ("offset", pa.int64()), ("error", pa.string()),
    ("send_ts_us", pa.int64()), ("ack_ts_us", pa.int64()),
])  # fmt: skip
READBACK_SCHEMA: Final = pa.schema([
    ("msg_id", pa.int64()), ("key", pa.string()), ("key_seq", pa.int64()),
    ("partition", pa.int32()), ("offset", pa.int64()), ("ts_us", pa.int64()),
])  # fmt: skip


# ---------------------------------------------------------------------------------------------
# events.jsonl


class EventType(StrEnum):
    """The `type` of an events.jsonl line."""

    PHASE = "phase"  # phase: cluster-start, topic-ready, workload-start, ...
    FAULT_START = "fault_start"  # fault_id, fault, target, nodes, detail
    FAULT_END = "fault_end"  # fault_id, fault, nodes, detail?
    FAULT_ERROR = "fault_error"  # fault_id, fault, target, error, stage (inject|heal)
    SAMPLE = "sample"  # controller, partitions: [{partition, leader, isr}]
    READBACK = "readback"  # complete, log_start_offsets, high_watermarks, records, ...
    RECORDER_TALLY = "recorder_tally"  # reports: {ok, failed, indeterminate}, journal_error
    HARNESS_ERROR = "harness_error"  # error
    # kept, reason, missing_acked, budget_bytes, topic, error,
    # brokers: {id: {files, bytes, partitions, skipped}}
    SEGMENTS = "segments"


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


def segments_dir(run_dir: str | Path, broker: int) -> Path:
    """Where a repetition keeps broker `broker`'s segment copies."""
    return Path(run_dir) / SEGMENTS / f"{SEGMENTS_BROKER_PREFIX}{broker}"


def is_run_dir(path: Path) -> bool:
    """True when path holds the two files every run writes before its read-back."""
    return (path / SPEC).is_file() and (path / ACKED).is_file()
