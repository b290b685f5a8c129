"""A transactional repetition end to end (real brokers, Spark), and the coordinator lookup."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from confluent_kafka.admin import AdminClient

from analysis.checks.consumers import processed_table
from harness.chaos.coordinators import CONSUMER_OFFSETS, TRANSACTION_STATE, coordinator_of
from harness.platform.cluster import KafkaCluster
from harness.rundir import layout
from harness.rundir.events import EventLog
from harness.workload.producer.recorder import Workload
from harness.workload.transactions.librdkafka import (
    GROUP_ID,
    TRANSACTIONAL_ID,
    TransactionalRecorder,
    TransactionPlan,
    finalize_transactions,
)
from tests.integration.support import run_experiment


def judged_transactional(root: Path) -> tuple[Path, list[dict]]:
    """The one repetition of a transactional experiment run at `root`, asserted PASS with
    commits and deliberate aborts in the log, none of the aborted messages read committed and
    every committed transaction whole; its run directory and events."""
    report = json.loads((root / "report" / "report.json").read_text())
    assert [c["verdict"] for c in report["cells"]] == ["PASS"], report["cells"]
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
    committed = pq.read_table(run_dir / layout.READBACK).num_rows
    assert 0 < committed < pq.read_table(run_dir / layout.READBACK_UNCOMMITTED).num_rows
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    return run_dir, events


@pytest.mark.integration
def test_transactional_repetition_end_to_end(tmp_path: Path) -> None:
    root, done = run_experiment("transactions", tmp_path, "--json")
    # --json: stdout is one JSON object, the progress went to stderr.
    printed = json.loads(done.stdout)
    assert printed["exit_code"] == 0 and Path(printed["runs"]).resolve() == root.resolve()
    assert [(c["verdict"], c["loss"]) for c in printed["cells"]] == [("PASS", 0)]
    assert Path(printed["files"]["html"]).is_file()
    _, events = judged_transactional(root)
    [fault] = [e for e in events if e["type"] == "fault_start"]
    assert fault["target"] == "txn-coordinator" and len(fault["nodes"]) == 1
    [readback] = [e for e in events if e["type"] == "readback"]
    assert readback["isolation"] == "read_committed" and readback["uncommitted"]["complete"]
    # Each transaction read before it wrote: the reads name messages of earlier transactions
    # none of which was aborted (read_committed), and no cycle of reads and writes was found.
    run_dir = Path(json.loads(next(root.rglob("results.json")).read_text())["run_dir"])
    reads = pq.read_table(run_dir / layout.TXN_READS).to_pylist()
    txns = {r["txn"]: r for r in pq.read_table(run_dir / layout.TRANSACTIONS).to_pylist()}
    assert len({r["txn"] for r in reads}) > 10, len(reads)
    for read in reads:
        writer = next(
            t for t in txns.values() if 0 <= read["msg_id"] - t["first_msg_id"] < t["messages"]
        )
        assert writer["txn"] < read["txn"] and writer["outcome"] != "aborted", (read, writer)
    counts = json.loads(next(root.rglob("results.json")).read_text())["counts"]
    assert counts["g0"] == counts["g1c"] == 0, counts

    # The reader went back after each abort (rewind_on_abort, the default): what an aborted
    # transaction read below where the committed reads of its partition got to, a committed
    # one read again (without the rewind, the committed reads pass over it), and no committed
    # read skipped a record.
    def read_by(outcome: str) -> set[tuple[int, int]]:
        return {
            (r["partition"], r["offset"]) for r in reads if txns[r["txn"]]["outcome"] == outcome
        }

    committed, aborted = read_by("committed"), read_by("aborted")
    reached = {p: max(o for q, o in committed if q == p) for p, _ in committed}
    below = {(p, o) for p, o in aborted if o < reached.get(p, -1)}
    assert below and below <= committed, sorted(below - committed)
    assert counts["poll_skip"] == 0, counts


@pytest.mark.integration
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


@pytest.mark.chaos
def test_java_transactions_under_a_leader_kill(tmp_path: Path) -> None:
    """The transactional workload on the Java client (3.8.0), offsets sent to the group, the
    leader of partition 0 killed: PASS, committed messages read back, aborted ones invisible to
    read_committed, every transaction journalled with the plan's intent; a group of Java
    members, one killed and started again, processed the committed messages and no aborted
    one."""
    run_dir, events = judged_transactional(run_experiment("java-transactions", tmp_path)[0])
    rows = pq.read_table(run_dir / layout.TRANSACTIONS).to_pylist()
    assert len(rows) >= 6  # ~4 s before the kill, ~12 s of failover, what follows
    assert [row["intent"] for row in rows] == [
        "abort" if row["txn"] % 3 == 2 else "commit" for row in rows
    ]
    assert {row["outcome"] for row in rows} <= {"committed", "aborted", "unknown"}
    # Read directly, besides the checks: every committed message read committed, no aborted one.
    read = set(pq.read_table(run_dir / layout.READBACK, columns=["msg_id"])["msg_id"].to_pylist())
    ids = {outcome: set() for outcome in ("committed", "aborted", "unknown")}
    for row in rows:
        first = row["first_msg_id"]
        ids[row["outcome"]].update(range(first, first + row["messages"]))
    assert ids["committed"] and ids["committed"] <= read
    assert ids["aborted"] and not ids["aborted"] & read
    [config] = [e for e in events if e["type"] == "client_config"]
    assert config["client"] == "java 3.8.0" and config["idempotent"] is True
    assert config["config"]["transactional.id"] == TRANSACTIONAL_ID
    [tally] = [e for e in events if e["type"] == "recorder_tally"]
    assert sum(tally["transactions"].values()) == len(rows)
    # The group ran on the Java client too, member 0 killed and started again, and processed
    # every committed message the read-back holds, none of the aborted ones.
    [group] = [e for e in events if e["type"] == "consumers"]
    assert group["client"] == "java 3.8.0" and group["caught_up"] is True, group
    assert group["starts"] == {"consumer-0": 2, "consumer-1": 1}
    # its settings as the client resolved them (what the report shows)
    assert group["config"]["isolation.level"] == "read_committed", group["config"]
    assert group["config"]["enable.auto.commit"] == "false"
    assert group["config"]["max.poll.interval.ms"] == "300000"  # a default, resolved
    assert group["journal_errors"] == [] and group["crashes"] == [], group
    processed = set(processed_table(run_dir)["msg_id"].to_pylist())
    assert (run_dir / layout.java_consumer_journal(0, 1).processed).is_file()
    assert ids["committed"] & read <= processed and not ids["aborted"] & processed
