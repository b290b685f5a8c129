"""The workload's waits on the one poll loop, without Kafka or child processes: the producer
fleet's and the consumer group's start, the group's catch-up, the recorder's final drain."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.rundir import layout
from harness.rundir.events import EventLog
from harness.rundir.records import CommitMode
from harness.workload.consumer_group import group as consumers
from harness.workload.consumer_group.group import ConsumerGroup
from harness.workload.consumer_group.librdkafka import ASSIGNED, ConsumerCrash
from harness.workload.journal import ProducerSlot
from harness.workload.producer.fleet import Fleet, ProducerCrash
from harness.workload.producer.librdkafka import READY, ProducerProcess, producer_tasks
from harness.workload.producer.recorder import Recorder, Workload


@pytest.fixture(autouse=True)
def _no_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("harness.waiting.time.sleep", lambda s: None)


@pytest.fixture
def events(tmp_path: Path):
    log = EventLog(tmp_path / layout.EVENTS)
    yield log
    log.close()


# --- the producer fleet ---------------------------------------------------------------------


class _Member:
    """A fleet member without a process: ready once `has_client`, crashed when `crash`."""

    pid = 7

    def __init__(self, has_client: bool, crash: str | None = None):
        self.has_client, self.crash = has_client, crash

    def start(self) -> None:
        pass

    def ready(self) -> bool:
        if self.crash:
            raise ProducerCrash(self.crash)
        return self.has_client


def test_the_fleet_is_ready_once_every_member_has_its_client(events) -> None:
    members = [_Member(True), _Member(False)]
    fleet = Fleet(members, events)  # type: ignore[arg-type]
    assert not fleet._ready()
    members[1].has_client = True
    assert fleet._ready()


def test_a_member_that_crashed_while_starting_ends_the_wait_at_once(events) -> None:
    fleet = Fleet([_Member(False), _Member(False, "producer 1: exited")], events)  # type: ignore[list-item]
    with pytest.raises(ProducerCrash, match="producer 1: exited"):
        fleet.start()


def test_a_fleet_not_ready_in_time_is_a_producer_crash(events, monkeypatch) -> None:
    fleet = Fleet([_Member(False)], events)  # type: ignore[list-item]
    monkeypatch.setattr(fleet, "READY_TIMEOUT_S", 0.0)
    with pytest.raises(ProducerCrash, match="producers not ready within 0 s"):
        fleet.start()


def test_a_producer_process_that_crashed_while_starting_is_a_producer_crash(
    events, tmp_path: Path
) -> None:
    workload = Workload(rate=None, duration_s=None, count=2, message_bytes=10, keys=1)
    (task,) = producer_tasks(1, workload, "127.0.0.1:9", "t", {}, tmp_path)
    member = ProducerProcess(replace(task, slot=ProducerSlot(1)), events)
    assert not member.ready()  # never started: no client, no crash
    member.crash = "exited with code 1"
    with pytest.raises(ProducerCrash, match="producer 1: exited with code 1"):
        member.ready()
    member.counters[READY] = 1
    assert member.ready()


# --- the consumer group ---------------------------------------------------------------------


def _group(tmp_path: Path, events: EventLog, members: int, partitions: int) -> ConsumerGroup:
    group = ConsumerGroup(members, "b:9092", "t", partitions, CommitMode.AUTO, tmp_path, events)
    for member in group.members:

        def start(member: Any = member) -> None:
            member.process = SimpleNamespace(pid=100 + member.index, exitcode=None)
            member.counters = [1, 0]
            member.starts += 1

        member.start = start
    return group


def test_the_group_starts_once_its_members_hold_every_partition(tmp_path, events, monkeypatch):
    group = _group(tmp_path, events, members=2, partitions=3)
    held_at_ready: list[int] = []
    looks = 0

    def one_more_assigned() -> None:  # the broker's side: each look, one more partition
        nonlocal looks
        looks += 1
        group.members[looks % 2].counters[ASSIGNED] += 1

    def write(event: Any) -> None:  # what the group held when it said it was ready
        held_at_ready.append(sum(m.counters[ASSIGNED] for m in group.members))
        written.append(event)

    written: list[Any] = []
    monkeypatch.setattr(group, "check", one_more_assigned)
    monkeypatch.setattr(group.events, "write", write)
    group.start()
    # Ready exactly when the third partition was held: neither before, nor a look later.
    assert held_at_ready == [3]
    assert [(e.phase, e.pids, e.group) for e in written] == [
        ("consumers-ready", [100, 101], group.group_id)
    ]


def test_a_member_that_ends_while_joining_is_a_consumer_crash(tmp_path, events, monkeypatch):
    group = _group(tmp_path, events, members=2, partitions=3)
    monkeypatch.setattr(group, "check", lambda: None)
    group.members[1].start = lambda: setattr(
        group.members[1], "process", SimpleNamespace(pid=7, exitcode=1)
    )
    group.members[1].counters = [0, 0]
    with pytest.raises(ConsumerCrash, match="consumer-1 ended while joining the group"):
        group.start()


def test_a_group_that_does_not_get_its_partitions_in_time(tmp_path, events, monkeypatch):
    group = _group(tmp_path, events, members=1, partitions=3)
    monkeypatch.setattr(group, "check", lambda: None)
    monkeypatch.setattr(group, "READY_TIMEOUT_S", 0.0)
    with pytest.raises(ConsumerCrash, match="did not get all 3 partitions within 0 s"):
        group.start()


class _Probe:
    closed = False

    def __init__(self, config: dict) -> None:
        pass

    def close(self) -> None:
        _Probe.closed = True


@pytest.fixture
def probe(monkeypatch: pytest.MonkeyPatch) -> type[_Probe]:
    monkeypatch.setattr("confluent_kafka.Consumer", _Probe)
    _Probe.closed = False
    return _Probe


def _positions(group: ConsumerGroup, monkeypatch, answers: list[tuple[dict, dict]]) -> list:
    asked: list[int] = []

    def positions(probe: Any) -> tuple[dict, dict]:
        asked.append(1)
        return answers[min(len(asked), len(answers)) - 1]

    monkeypatch.setattr(group, "_positions", positions)
    monkeypatch.setattr(group, "check", lambda: None)
    # Behind means behind here: the reader finds records past the committed offsets (the
    # reader's own walk is tests/unit/test_consumer_catch_up.py).
    monkeypatch.setattr(consumers, "nothing_readable", lambda *args, **kwargs: False)
    return asked


def test_catch_up_waits_until_the_commits_reach_the_ends(tmp_path, events, monkeypatch, probe):
    group = _group(tmp_path, events, members=1, partitions=2)
    behind, there = ({0: 5, 1: 2}, {0: 5, 1: 4}), ({0: 5, 1: 4}, {0: 5, 1: 4})
    asked = _positions(group, monkeypatch, [behind, behind, there])
    caught = group.catch_up(60, threading.Event())
    assert caught.caught_up and caught.committed == {0: 5, 1: 4} and len(asked) == 3
    assert probe.closed


def test_catch_up_ends_at_an_interrupt_with_where_the_group_stood(
    tmp_path, events, monkeypatch, probe
) -> None:
    group = _group(tmp_path, events, members=1, partitions=1)
    asked = _positions(group, monkeypatch, [({0: 1}, {0: 4})])
    stop = threading.Event()
    stop.set()
    caught = group.catch_up(60, stop)
    assert not caught.caught_up and caught.committed == {0: 1} and caught.end_offsets == {0: 4}
    assert len(asked) == 1


def test_catch_up_gives_up_after_its_timeout(tmp_path, events, monkeypatch, probe) -> None:
    group = _group(tmp_path, events, members=1, partitions=1)
    _positions(group, monkeypatch, [({}, {0: 1})])
    caught = group.catch_up(0, threading.Event())
    assert not caught.caught_up and caught.end_offsets == {0: 1}


# --- the recorder's final drain -------------------------------------------------------------


class _Outstanding:
    """A producer client holding `left` messages; each poll serves one."""

    def __init__(self, left: int) -> None:
        self.left, self.polls = left, 0

    def __len__(self) -> int:
        return self.left

    def poll(self, timeout_s: float) -> None:
        self.polls += 1
        self.left -= 1


def _recorder(left: int) -> Recorder:
    recorder = Recorder.__new__(Recorder)
    recorder.producer = _Outstanding(left)
    recorder.journal = SimpleNamespace(commit=lambda: None)
    return recorder


def test_the_drain_serves_reports_until_nothing_is_outstanding() -> None:
    recorder = _recorder(3)
    assert recorder._drain(60) == 0
    assert recorder.producer.polls == 3


def test_the_drain_without_time_serves_nothing_and_counts_what_is_left() -> None:
    recorder = _recorder(3)
    assert recorder._drain(0) == 3
    assert recorder.producer.polls == 0
