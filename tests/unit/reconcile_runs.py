"""Run directories written as the harness writes them, the reconciled scenarios, and their
fixtures (registered in tests/unit/conftest.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis.model.anomalies import ANOMALY_NAMES
from analysis.model.results import RunResult
from analysis.spark.reconcile import (
    find_runs,
    reconcile_in_process,
)
from harness.rundir.records import ACKED_SCHEMA, READBACK_SCHEMA

T0_US = 1_700_000_000_000_000

# The schemas the harness writes: the fixtures must look like real run directories.
ACKED = ACKED_SCHEMA

READBACK = READBACK_SCHEMA

ZERO = dict.fromkeys(ANOMALY_NAMES, 0)


def sent(
    msg_id: int,
    offset: int | None,
    *,
    partition: int | None = 0,
    status: str = "ok",
    key: str | None = None,
    key_seq: int | None = 0,
    send_us: int | None = None,
    latency_us: int = 500,
) -> dict:
    """An acked.parquet row; each message has its own key unless told."""
    send_ts = T0_US + msg_id * 1000 if send_us is None else send_us
    return {
        "msg_id": msg_id,
        "key": key or f"k{msg_id}",
        "key_seq": key_seq,
        "status": status,
        "partition": partition,
        "offset": offset,
        "error": None if status == "ok" else "timed out",
        "send_ts_us": send_ts,
        "ack_ts_us": send_ts + latency_us if status == "ok" else None,
    }


def read(
    msg_id: int | None,
    offset: int,
    *,
    partition: int = 0,
    key: str | None = None,
    key_seq: int | None = 0,
) -> dict:
    """A readback.parquet row."""
    return {
        "msg_id": msg_id,
        "key": key or f"k{msg_id}",
        "key_seq": key_seq,
        "partition": partition,
        "offset": offset,
        "ts_us": T0_US,
    }


def write_run(
    root: Path,
    cell: str,
    acked: list[dict],
    readback: list[dict] | None,
    *,
    repetition: int = 0,
    acks: str = "1",
    events: list[dict] | None = None,
) -> Path:
    """A repetition directory in the README layout; no readback.parquet when readback is None."""
    run_dir = root / "runs" / "exp" / "20260101T000000Z" / cell / str(repetition)
    run_dir.mkdir(parents=True)
    spec = {
        "experiment": "exp",
        "cell": cell,
        "repetition": repetition,
        "seed": 7,
        "axes": {"acks": acks},
        "config": {"acks": acks, "min_insync_replicas": 1, "fault_class": "leader-kill"},
    }
    (run_dir / "spec.json").write_text(json.dumps(spec))
    (run_dir / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events or []))
    pq.write_table(pa.Table.from_pylist(acked, schema=ACKED), run_dir / "acked.parquet")
    if readback is not None:
        table = pa.Table.from_pylist(readback, schema=READBACK)
        pq.write_table(table, run_dir / "readback.parquet")
    return run_dir


def in_order(n: int) -> tuple[list[dict], list[dict]]:
    """n messages acked at offsets 0..n-1 of partition 0, all read where acked."""
    return [sent(i, i - 1) for i in range(1, n + 1)], [read(i, i - 1) for i in range(1, n + 1)]


def reordered_run() -> tuple[list[dict], list[dict]]:
    """Key k sent with seq 0,1,2,3 but logged as 0,2,1,3, plus a seq-less record and key j."""
    layout = [(1, "k", 0, 0), (2, "k", 1, 2), (3, "k", 2, 1), (4, "k", 3, 3)]
    layout += [(5, "k", None, 4), (6, "j", 0, 5)]
    acked = [sent(m, off, key=key, key_seq=seq) for m, key, seq, off in layout]
    readback = [read(m, off, key=key, key_seq=seq) for m, key, seq, off in layout]
    return acked, readback


def acks0_run() -> tuple[list[dict], list[dict]]:
    """acks=0: no offsets; partition 0 reads a later send than msg 2, partition 1 none after 6."""
    acked = [sent(m, None, partition=0 if m <= 3 else 1) for m in range(1, 7)]
    acked[2]["offset"] = -1001  # librdkafka's "no offset", must be read as unknown
    readback = [read(1, 0), read(3, 1), read(4, 0, partition=1), read(5, 1, partition=1)]
    return acked, readback


def timeline_run() -> tuple[list[dict], list[dict]]:
    """Sends at +0.1 s, +0.5 s (ok, 2 and 4 ms), +0.9 s (failed) and +2.2 s (indeterminate)."""
    acked = [
        sent(1, 0, send_us=T0_US + 100_000, latency_us=2000),
        sent(2, 1, send_us=T0_US + 500_000, latency_us=4000),
        sent(3, None, partition=None, status="failed", send_us=T0_US + 900_000),
        sent(4, None, partition=None, status="indeterminate", send_us=T0_US + 2_200_000),
    ]
    return acked, [read(1, 0), read(2, 1)]


SCENARIOS: dict[tuple[str, int], tuple[list[dict], list[dict] | None]] = {
    ("clean", 0): in_order(6),
    ("lost", 0): ([sent(i, i - 1) for i in range(1, 5)], [read(1, 0), read(2, 1), read(4, 3)]),
    ("lost", 1): ([sent(i, i - 1) for i in range(1, 5)], [read(3, 2), read(4, 3)]),
    ("unseen", 0): (
        [*(sent(i, i - 1) for i in range(1, 5)), sent(5, None, partition=None)],
        [read(1, 0), read(2, 1), read(3, 2)],
    ),
    ("duplicated", 0): (in_order(3)[0], [*in_order(3)[1], read(2, 3)]),
    ("offset_divergent", 0): (
        [sent(1, 0), sent(2, 1), sent(3, 1), sent(4, 2)],
        [read(1, 0), read(3, 1), read(4, 2)],
    ),
    ("moved", 0): (in_order(3)[0], [read(1, 0), read(2, 3), read(3, 2)]),
    ("failed_present", 0): (
        [sent(1, 0), sent(2, None, partition=None, status="failed")],
        [read(1, 0), read(2, 1)],
    ),
    ("indeterminate_present", 0): (
        [sent(1, 0), *(sent(m, None, status="indeterminate") for m in (2, 3))],
        [read(1, 0), read(2, 1)],
    ),
    ("reordered", 0): reordered_run(),
    ("phantom", 0): (in_order(2)[0], [*in_order(2)[1], read(99, 2), read(None, 3), read(99, 4)]),
    ("acks0", 0): acks0_run(),
    ("timeline", 0): timeline_run(),
    ("incomplete", 0): (in_order(2)[0], None),
    # AP under a cut-off: offsets 0..5 acked; the new leader rewrote 2..3 with 7, 8 and the
    # read-back ends at offset 3, so 3 and 4 are lost (one holds another message) and 5, 6 unseen.
    ("ap_cut", 0): (
        [*(sent(i, i - 1) for i in range(1, 7)), sent(7, 2), sent(8, 3)],
        [read(1, 0), read(2, 1), read(7, 2), read(8, 3)],
    ),
    # Item 10: the last offset read holds another message: proven lost, not unseen.
    ("last_offset_rewritten", 0): ([sent(1, 0), sent(2, 1), sent(3, 1)], [read(1, 0), read(3, 1)]),
    # Item 7: the consumer returned one record (p0@1) twice: one record, not a duplicate.
    ("record_read_twice", 0): (in_order(3)[0], [*in_order(3)[1], read(2, 1)]),
    # Item 8: ids 2 (failed) and 3 (indeterminate) in the log twice each; 1 (ok) twice too.
    ("unacked_duplicates", 0): (
        [sent(1, 0), sent(2, None, status="failed"), sent(3, None, status="indeterminate")],
        [read(1, 0), read(2, 1), read(3, 2), read(2, 3), read(3, 4), read(1, 5)],
    ),
    # A producer's queue written again (librdkafka#4953): key k's sends 1-4 at offsets 0-3,
    # then 2-4 once more at 4-6. Three duplicates; judged by first reads, nothing reordered.
    ("requeued", 0): (
        [sent(i, i - 1, key="k", key_seq=i - 1) for i in range(1, 5)],
        [
            *(read(i, i - 1, key="k", key_seq=i - 1) for i in range(1, 5)),
            *(read(i, i + 2, key="k", key_seq=i - 1) for i in range(2, 5)),
        ],
    ),
    # Item 6: key k in partitions 0 and 1 with interleaved sequences; in order per partition.
    ("order_per_partition", 0): (
        [
            sent(1, 0, key="k", key_seq=0),
            sent(2, 0, key="k", key_seq=1, partition=1),
            sent(3, 1, key="k", key_seq=2),
        ],
        [
            read(1, 0, key="k", key_seq=0),
            read(3, 1, key="k", key_seq=2),
            read(2, 0, key="k", key_seq=1, partition=1),
        ],
    ),
    # Item 9: retention moved the log start of p0 to 3: ids 1-3 expired, 5 lost, p1 untouched.
    ("retention", 0): (
        [*(sent(i, i - 1) for i in range(1, 7)), sent(7, 0, partition=1)],
        [read(4, 3), read(6, 5)],
    ),
    # Item 5: acked.parquet holds msg_id 2 twice (ok and failed), a status nobody defined, and
    # two reports whose value was not ours (no msg_id).
    ("broken_contract", 0): (
        [
            sent(1, 0),
            sent(2, 1),
            sent(2, None, status="failed"),
            sent(3, 2, status="maybe"),
            {**sent(4, 3), "msg_id": None},
            {**sent(5, None, status="failed"), "msg_id": None},
        ],
        [read(1, 0), read(3, 2)],
    ),
}

EVENTS = {
    ("retention", 0): [
        {"ts_us": T0_US, "type": "readback", "complete": True, "log_start_offsets": {"0": 3}}
    ]
}


@pytest.fixture(scope="session")
def runs_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A runs tree with every scenario, plus two broken runs."""
    root = tmp_path_factory.mktemp("reconcile")
    for (cell, repetition), (acked, readback) in SCENARIOS.items():
        acks = "0" if cell == "acks0" else "1"
        events = EVENTS.get((cell, repetition))
        write_run(root, cell, acked, readback, repetition=repetition, acks=acks, events=events)
    garbage = write_run(root, "garbage", *in_order(1))
    (garbage / "acked.parquet").write_bytes(b"not parquet")
    no_status = write_run(root, "no_status", *in_order(1))
    table = pq.read_table(no_status / "acked.parquet").drop(["status"])
    pq.write_table(table, no_status / "acked.parquet")
    return root


def _per_test_under_mutmut(fixture_name: str, config: pytest.Config) -> str:
    """ "function" while mutmut maps or runs tests, else "session".

    mutmut credits a test with the functions it calls while it runs: a result computed once
    for the session is credited to the first test only, and the mutants that only later
    tests catch are run without them and counted as survivors."""
    return "function" if os.environ.get("MUTANT_UNDER_TEST") else "session"


@pytest.fixture(scope=_per_test_under_mutmut)
def results(runs_root: Path) -> dict[tuple[str, int], RunResult]:
    """Every run of runs_root reconciled in one call, by (cell, repetition), by the Spark task's
    body in this process (test_the_spark_job_answers_each_run_as_its_task_body_does holds the
    Spark job to the same answers)."""
    reconciled = reconcile_in_process(find_runs([str(runs_root / "runs")]))
    return {(r.cell, r.repetition): r for r in reconciled}


def counts(sent: int, acked: int, read: int, **classes: int) -> dict[str, int]:
    """The full counts dict of a run with only these anomaly classes non-zero."""
    failed, indeterminate = classes.pop("failed", 0), classes.pop("indeterminate", 0)
    base = {"sent": sent, "acked": acked, "failed": failed, "indeterminate": indeterminate}
    return {**base, "read": read, **ZERO, **classes}


def example_ids(result: RunResult, anomaly: str) -> list[int | None]:
    """msg_ids of the examples of one class, in reported order."""
    return [example.msg_id for example in result.examples[anomaly]]


RESULTS_KEYS = {
    "run_dir", "experiment", "cell", "repetition", "config", "axes", "status", "counts",
    "examples", "timeline", "error", "loss", "loss_by_partition", "divergence_by_partition",
    "contract", "sensitivity", "attribution", "availability", "availability_error",
}  # fmt: skip
