"""The sampler: leader and ISR of every partition, and each partition's ends (high watermark,
last stable offset), recorded while a repetition runs."""

from __future__ import annotations

import contextlib
import threading
from typing import Any, TypedDict

from harness.chaos.faults import FaultContext
from harness.rundir.events import EventLog, PartitionEnd, PartitionRoles, Sample, now_us

# ListOffsets may wait on a leader that is gone (a fault): bounded, so a sample stays ~1 s.
ENDS_TIMEOUT_S = 1.5


class _SampleFields(TypedDict, total=False):
    """The fields of a `sample` event the sampler learnt (the others stay out of the line)."""

    partitions: list[PartitionRoles]
    controller: int | None
    ends: list[PartitionEnd]
    ends_error: str
    ends_us: int


class Sampler:
    """Records leader/ISR and ends of every partition about once a second, the controller every
    5th."""

    def __init__(self, ctx: FaultContext, events: EventLog, interval_s: float = 1.0):
        self.ctx = ctx
        self.events = events
        self.interval_s = interval_s
        self.latest: list[PartitionRoles] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        tick = 0
        while not self._stop.is_set():
            self.sample(with_controller=tick % 5 == 0)
            tick += 1
            self._stop.wait(self.interval_s)

    def sample(self, with_controller: bool = False) -> None:
        """Write one `sample` event; metadata errors are recorded, not raised."""
        try:
            states = self.ctx.cluster.partition_states(self.ctx.topic, timeout_s=2.0)
        except Exception as exc:
            self.events.write(Sample(error=str(exc), partitions=[]))
            return
        stamp = now_us()  # the leader/ISR's time: the ends, read after, carry their own
        self.latest = [
            PartitionRoles(partition=s.partition, leader=s.leader, isr=list(s.isr)) for s in states
        ]
        fields: _SampleFields = {"partitions": self.latest}
        if with_controller:
            with contextlib.suppress(Exception):
                fields["controller"] = self.ctx.cluster.active_controller()
        try:
            partitions = [s.partition for s in states]
            fields["ends"] = read_ends(self.ctx.cluster.admin(), self.ctx.topic, partitions)
        except Exception as exc:
            fields["ends_error"] = f"{type(exc).__name__}: {exc}"
        fields["ends_us"] = now_us()
        self.events.write(Sample(ts_us=stamp, **fields))

    def stop(self) -> None:
        """Stop sampling (a no-op when never started)."""
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(10)


def read_ends(
    admin: Any, topic: str, partitions: list[int], timeout_s: float = ENDS_TIMEOUT_S
) -> list[PartitionEnd]:
    """Each partition's high watermark (ListOffsets latest, read_uncommitted) and last stable
    offset (the same, read_committed); a value its leader did not give in `timeout_s` is None.
    Raises only when neither request could be sent."""
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    asked = {TopicPartition(topic, p): OffsetSpec.latest() for p in partitions}
    answers = {
        level: admin.list_offsets(asked, isolation_level=level, request_timeout=timeout_s)
        for level in (IsolationLevel.READ_UNCOMMITTED, IsolationLevel.READ_COMMITTED)
    }
    by_level = {level: _offsets(futures, timeout_s) for level, futures in answers.items()}
    return [
        PartitionEnd(
            partition=p,
            high_watermark=by_level[IsolationLevel.READ_UNCOMMITTED].get(p),
            last_stable=by_level[IsolationLevel.READ_COMMITTED].get(p),
        )
        for p in partitions
    ]


def _offsets(futures: dict[Any, Any], timeout_s: float) -> dict[int, int]:
    """Partition → offset of every future that answered; the failed ones are left out."""
    offsets: dict[int, int] = {}
    for tp, future in futures.items():
        with contextlib.suppress(Exception):
            offset = int(future.result(timeout=timeout_s).offset)
            if offset >= 0:
                offsets[tp.partition] = offset
    return offsets
