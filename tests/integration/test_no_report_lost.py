"""No delivery report is lost: an idempotent CP producer through the harness's Recorder and
journal while the partition leader is SIGKILLed and restarted again and again.

The user's case: after a leader SIGKILL, librdkafka acknowledges some messages without an
offset (an idempotent retry the broker took as a duplicate), and failed or timed-out sends
never have one. The old journal dropped every page holding such a report, so acknowledged
messages read as 'no delivery report' and a loss among them could pass as indeterminate.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import Counter

import pytest

from harness.chaos.faults import FaultContext
from harness.chaos.heal import heal_all
from harness.experiment.model import FaultStep
from harness.nemesis.schedule import Nemesis
from harness.rundir import layout
from harness.rundir.events import EventLog, load_events
from harness.rundir.records import NO_REPORT, STATUSES
from harness.workload.journal import AckJournal
from harness.workload.producer.recorder import Recorder, Workload, status_of
from tests.integration.support import expected_value, read_all
from tests.unit.finalized import finalized

KEYS, SIZE = 16, 100
CP_IDEMPOTENT = {
    "acks": "all",
    "enable.idempotence": True,
    "max.in.flight.requests.per.connection": 5,
    "linger.ms": 5,
    "request.timeout.ms": 5000,
    # Shorter than a leader's failover: sends time out, and such reports never have an offset.
    "message.timeout.ms": 5000,
}
# Three SIGKILLs of partition 0's leader during 30 s, each restarted 4 s later.
KILLS = [
    FaultStep(at_s=at, fault="kill", target="leader", partition=0, duration_s=4)
    for at in (4, 13, 22)
]


def run_under_kills(cluster, topic: str, run_dir, seed: int) -> tuple[AckJournal, Recorder]:
    """30 s at 2000 msg/s through Recorder + AckJournal while the nemesis kills leaders."""
    ctx = FaultContext(cluster, topic, random.Random(seed))
    events = EventLog(run_dir / layout.EVENTS)
    journal = AckJournal(run_dir, KEYS, status_of)
    recorder = Recorder(
        cluster.bootstrap_servers,
        topic,
        CP_IDEMPOTENT,
        Workload(2000, 30, None, SIZE, KEYS),
        journal,
    )
    nemesis = Nemesis(ctx, KILLS, events)
    nemesis.start(time.monotonic())
    try:
        recorder.run(threading.Event())
    finally:
        nemesis.stop()
        heal_all(ctx)
        events.close()
        journal.close()  # raises JournalError when any report was not written
    assert nemesis.errors == []
    kills = [e for e in load_events(run_dir) if e["type"] == "fault_start"]
    assert len(kills) == len(KILLS)
    return journal, recorder


@pytest.mark.chaos
@pytest.mark.parametrize("repetition", range(3))
def test_every_delivery_report_reaches_acked_parquet_across_leader_kills(
    cluster, topic, tmp_path, caplog, repetition
):
    caplog.set_level(logging.WARNING, logger="kafka_chaos.journal")
    journal, recorder = run_under_kills(cluster, topic, tmp_path, seed=repetition)
    acked = finalized(tmp_path).to_pylist()
    cluster.wait_full_isr(topic, timeout_s=90)
    records = read_all(cluster.bootstrap_servers, topic, 3)

    # Zero reports lost: the callback's tally is exactly the reported rows, status by status.
    reported = Counter(row["status"] for row in acked if row["error"] != NO_REPORT)
    tally = recorder.tally.as_dict()
    assert {s: reported[s] for s in STATUSES} == tally == journal.counts
    assert journal.error is None
    journal_log = [r.getMessage() for r in caplog.records if r.name == "kafka_chaos.journal"]
    assert journal_log == []  # not even a fallback to the slow decoder: None is normal
    # Every send was settled, so every send has its report.
    assert len(acked) == journal.sent_upto == sum(tally.values())
    assert [row["msg_id"] for row in acked] == list(range(len(acked)))

    # The read-back, decoded here: every record is a value the workload sent, under its key.
    where = {}
    for (partition, offset), (key, value) in records.items():
        msg_id = int(value[:15])
        assert value == expected_value(msg_id, KEYS, SIZE)
        assert key == f"k{msg_id % KEYS}".encode()
        where.setdefault(msg_id, []).append((partition, offset))
    # Every acknowledged message is in the log (CP: acks=all, min.insync=2), and where its
    # report says when the report has an offset.
    ok = [row for row in acked if row["status"] == "ok"]
    missing = [row["msg_id"] for row in ok if row["msg_id"] not in where]
    assert missing == []
    misplaced = [
        row["msg_id"]
        for row in ok
        if row["offset"] is not None
        and (row["partition"], row["offset"]) not in where[row["msg_id"]]
    ]
    assert misplaced == []
    without_offset = sum(row["offset"] is None for row in ok)
    # Reports without an offset are what the old journal dropped, whole pages at a time.
    assert tally["failed"] + tally["indeterminate"] + without_offset > 0, "nothing provoked"
    print(
        f"repetition {repetition}: {len(acked)} sent, reports {tally}, "
        f"{without_offset} acks without offset, {len(records)} records read"
    )
