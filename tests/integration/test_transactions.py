"""A transactional repetition end to end (real brokers, Spark), and the coordinator lookup."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from confluent_kafka.admin import AdminClient

from harness.chaos.coordinators import CONSUMER_OFFSETS, TRANSACTION_STATE, coordinator_of
from harness.platform.cluster import KafkaCluster
from harness.rundir import layout
from harness.rundir.events import EventLog
from harness.workload.recorder import Workload
from harness.workload.transactions import (
    GROUP_ID,
    TRANSACTIONAL_ID,
    TransactionalRecorder,
    TransactionPlan,
    finalize_transactions,
)
from tests.integration.test_experiment import run_experiment

pytestmark = pytest.mark.integration


def test_transactional_repetition_end_to_end(tmp_path: Path) -> None:
    root, _ = run_experiment("transactions", tmp_path)
    [path] = list(root.rglob("results.json"))
    result = json.loads(path.read_text())
    counts, run_dir = result["counts"], Path(result["run_dir"])
    # Commits and deliberate aborts both happened, and the aborts reached the log ...
    assert counts["txn_committed"] > 0 and counts["txn_aborted"] > 0, counts
    assert counts["txn_aborted_in_log"] > 0, counts
    # ... yet read_committed showed none of them, and every committed transaction whole.
    assert counts["aborted_read"] == counts["torn_transaction"] == 0, counts
    assert counts["committed_lost"] == counts["txn_committed_hidden"] == 0, counts
    assert counts["acked"] > 0 and result["loss"] == 0
    assert result["sensitivity"]["passed"] is True
    for name in (layout.TRANSACTIONS, layout.READBACK_UNCOMMITTED, layout.READBACK):
        assert (run_dir / name).exists(), name
    uncommitted = pq.read_table(run_dir / layout.READBACK_UNCOMMITTED).num_rows
    assert uncommitted > pq.read_table(run_dir / layout.READBACK).num_rows  # the aborted ones
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    [fault] = [e for e in events if e["type"] == "fault_start"]
    assert fault["target"] == "txn-coordinator" and len(fault["nodes"]) == 1
    [readback] = [e for e in events if e["type"] == "readback"]
    assert readback["isolation"] == "read_committed" and readback["uncommitted"]["complete"]
    report = json.loads((root / "report" / "report.json").read_text())
    assert [c["verdict"] for c in report["cells"]] == ["PASS"], report["cells"]


def test_coordinators_match_what_the_brokers_say(
    cluster: KafkaCluster, topic: str, tmp_path: Path
) -> None:
    """The hash lookup names the broker the group coordinator really is (describe_consumer_
    groups reports it); the transaction coordinator is computed the same way. On the way,
    every second transaction is aborted as planned."""
    plan = TransactionPlan(3, 2, None, 1, 10_000, True, 3)
    workload = Workload(200, None, 60, 100, 4)  # 60 messages: 20 transactions of 3
    out = tmp_path
    recorder = TransactionalRecorder(
        cluster.bootstrap_servers,
        topic,
        {"acks": "all", "message.timeout.ms": 10_000},
        workload,
        plan,
        out,
    )
    recorder.start()
    recorder.run(threading.Event())
    assert recorder.close(EventLog(out / layout.EVENTS)) is None
    outcomes = finalize_transactions(out)["outcome"].to_pylist()
    assert outcomes == ["committed", "aborted"] * 10
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    [group] = admin.describe_consumer_groups([GROUP_ID]).values()
    assert group.result().coordinator.id == coordinator_of(cluster, CONSUMER_OFFSETS, GROUP_ID)
    assert coordinator_of(cluster, TRANSACTION_STATE, TRANSACTIONAL_ID) in {
        n.node_id for n in cluster.nodes
    }
