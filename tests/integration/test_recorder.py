"""The recorder on real brokers, checked against a read-back decoded here.

Expectations come from the README's contract and from arithmetic in this file (value
`<msg_id 15 digits>:<msg_id // keys 12 digits>:` padded with '.', key `k<msg_id % keys>`),
and records are read with a plain consumer: nothing the code under test derives itself.
"""

from __future__ import annotations

import threading

import pytest

from harness.workload.journal import AckJournal
from harness.workload.producer.recorder import Recorder, Workload, status_of
from tests.integration.support import expected_value, high_watermarks, poll_until, read_all
from tests.unit.finalized import finalized

pytestmark = pytest.mark.integration

KEYS, SIZE, COUNT = 4, 64, 500


def record(cluster, topic, run_dir, acks: str):
    journal = AckJournal(run_dir, KEYS, status_of)
    recorder = Recorder(
        cluster.bootstrap_servers,
        topic,
        {"acks": acks, "linger.ms": 5},
        Workload(None, None, COUNT, SIZE, KEYS),
        journal,
    )
    stats = recorder.run(threading.Event())
    journal.close()
    return stats, recorder.tally.as_dict(), finalized(run_dir).to_pylist()


def located(cluster, topic) -> dict[int, tuple[int, int]]:
    """msg_id -> (partition, offset) of every record read back; each value checked in full."""
    where = {}
    for (partition, offset), (key, value) in read_all(cluster.bootstrap_servers, topic, 3).items():
        msg_id = int(value[:15])
        assert value == expected_value(msg_id, KEYS, SIZE), (partition, offset)
        assert key == f"k{msg_id % KEYS}".encode()
        assert msg_id not in where, f"message {msg_id} read twice"
        where[msg_id] = (partition, offset)
    return where


def test_acks_all_journal_offsets_are_where_the_messages_were_read(cluster, topic, tmp_path):
    stats, tally, acked = record(cluster, topic, tmp_path, "all")
    assert stats.sent == COUNT and tally == {"ok": COUNT, "failed": 0, "indeterminate": 0}
    assert [row["msg_id"] for row in acked] == list(range(COUNT))
    assert [(row["key"], row["key_seq"]) for row in acked] == [
        (f"k{i % KEYS}", i // KEYS) for i in range(COUNT)
    ]
    where = located(cluster, topic)
    assert sorted(where) == list(range(COUNT))
    assert {row["msg_id"]: (row["partition"], row["offset"]) for row in acked} == where
    # The journal's times are plausible: each send precedes its acknowledgement.
    assert all(row["send_ts_us"] <= row["ack_ts_us"] for row in acked)


def test_acks_0_records_no_offsets_though_the_messages_have_them(cluster, topic, tmp_path):
    stats, tally, acked = record(cluster, topic, tmp_path, "0")
    assert stats.ok == tally["ok"] == COUNT
    assert [row["offset"] for row in acked] == [None] * COUNT
    # Nothing waited for the followers: the high watermark catches up after the producer
    # ends. acks=0 promises nothing, so a write the broker dropped is no failure here.
    poll_until(lambda: sum(high_watermarks(cluster.bootstrap_servers, topic)) >= COUNT, 15)
    where = located(cluster, topic)
    assert where and set(where) <= set(range(COUNT))
    assert len({offset for _, offset in where.values()}) > 1  # real offsets, not recorded
