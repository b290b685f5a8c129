"""The recorder on real brokers: every send journalled, offsets only where the broker gives them."""

from __future__ import annotations

import threading

import pytest

from harness.journal import AckJournal, finalize
from harness.readback import read_back
from harness.recorder import Recorder, Workload, outcome_of

pytestmark = pytest.mark.integration


def record(cluster, topic, run_dir, acks: str, count: int = 500):
    journal = AckJournal(run_dir, 4, outcome_of)
    recorder = Recorder(
        cluster.bootstrap_servers,
        topic,
        {"acks": acks, "linger.ms": 5},
        Workload(None, None, count, 64, 4),
        journal,
    )
    stats = recorder.run(threading.Event())
    journal.close()
    return stats, finalize(run_dir)


def test_acks_all_sends_are_all_acked_at_the_offsets_read_back(cluster, topic, tmp_path):
    stats, acked = record(cluster, topic, tmp_path, "all")
    assert stats.sent == stats.ok == acked.num_rows == 500
    result = read_back(cluster.bootstrap_servers, topic, 3, tmp_path / "readback.parquet")
    import pyarrow.parquet as pq

    read = {
        (r["partition"], r["offset"]): r["msg_id"]
        for r in pq.read_table(tmp_path / "readback.parquet").to_pylist()
    }
    assert result.records == 500
    assert all(read[(r["partition"], r["offset"])] == r["msg_id"] for r in acked.to_pylist())
    per_key = {}
    for row in acked.to_pylist():
        per_key.setdefault(row["key"], []).append(row["key_seq"])
    assert all(seqs == list(range(len(seqs))) for seqs in per_key.values())


def test_acks_0_records_no_offsets(cluster, topic, tmp_path):
    stats, acked = record(cluster, topic, tmp_path, "0")
    assert stats.ok == 500
    assert acked.column("offset").null_count == 500
