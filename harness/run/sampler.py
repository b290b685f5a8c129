"""The sampler: leader and ISR of every partition, each partition's ends (high watermark,
last stable offset), the containers that stood stopped and the consumer group's committed
offsets, recorded about once a second while a repetition runs and on through its final heal
and read-back (harness.run.ending). The lost-commit check reads the committed offsets (a
committed position that went back and was committed past again by the end shows only while
the run goes on); the liveness checks read the stopped containers (a node can exit on its own,
as a broker paused while it starts does once it may no longer register, and no fault records
that); the judge reads who led once the final heal brought back a replica whose own restart
had failed (the last replica standing)."""

from __future__ import annotations

import contextlib
import threading
from typing import Any, TypedDict

from harness.chaos.faults import FaultContext
from harness.platform.offsets import ENDS_TIMEOUT_S, read_ends
from harness.rundir.events import EventLog, PartitionEnd, PartitionRoles, Sample, now_us

# Docker's states in which a container's process is there (running, or frozen by a pause): in
# any other the node is stopped.
UP_STATES = frozenset({"running", "paused"})


class _SampleFields(TypedDict, total=False):
    """The fields of a `sample` event the sampler learnt (the others stay out of the line)."""

    partitions: list[PartitionRoles]
    stopped: list[str] | None
    controller: int | None
    ends: list[PartitionEnd]
    ends_error: str
    ends_us: int
    committed: dict[int, int]
    committed_asked_us: int
    committed_error: str


class Sampler:
    """Records leader/ISR and ends of every partition about once a second, the controller every
    5th."""

    def __init__(self, ctx: FaultContext, events: EventLog, interval_s: float = 1.0):
        self.ctx = ctx
        self.events = events
        self.interval_s = interval_s
        self.latest: list[PartitionRoles] = []
        self._probe: Any = None  # a consumer of the group that never joins: its OffsetFetch
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
            self.events.write(Sample(error=str(exc), partitions=[], stopped=self._stopped()))
            return
        stamp = now_us()  # the leader/ISR's time: the ends, read after, carry their own
        stopped = self._stopped()  # read at the stamp, not before the (up to 2 s) read above
        self.latest = [
            PartitionRoles(partition=s.partition, leader=s.leader, isr=list(s.isr)) for s in states
        ]
        fields: _SampleFields = {"partitions": self.latest, "stopped": stopped}
        if with_controller:
            with contextlib.suppress(Exception):
                fields["controller"] = self.ctx.cluster.active_controller()
        partitions = [s.partition for s in states]
        try:
            fields["ends"] = read_ends(self.ctx.cluster.admin(), self.ctx.topic, partitions)
        except Exception as exc:
            fields["ends_error"] = f"{type(exc).__name__}: {exc}"
        fields["ends_us"] = now_us()
        group = getattr(self.ctx.consumers, "group_id", None)  # set once the group exists
        if group:
            fields["committed_asked_us"] = now_us()
            try:
                fields["committed"] = read_committed(
                    self._group_probe(group), self.ctx.topic, partitions
                )
            except Exception as exc:
                fields["committed_error"] = f"{type(exc).__name__}: {exc}"
        self.events.write(Sample(ts_us=stamp, **fields))

    def _stopped(self) -> list[str] | None:
        """The host names of the cluster's containers neither running nor paused; None when
        the engine did not answer for every one."""
        try:
            return [n.hostname for n in self.ctx.cluster.all_nodes if n.state() not in UP_STATES]
        except Exception:
            return None

    def _group_probe(self, group: str) -> Any:
        """A consumer of `group` that never subscribes (so never joins it), made once: its
        committed() is an OffsetFetch to the group's coordinator, as the group's own catch-up
        reads it."""
        if self._probe is None:
            from confluent_kafka import Consumer

            servers = self.ctx.cluster.bootstrap_servers
            self._probe = Consumer(
                {"bootstrap.servers": servers, "group.id": group, "log_level": 3}
            )
        return self._probe

    def stop(self) -> None:
        """Stop sampling (a no-op when never started), and close the group's probe."""
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(10)
        if self._probe is not None:
            with contextlib.suppress(Exception):
                self._probe.close()
            self._probe = None


def read_committed(
    probe: Any, topic: str, partitions: list[int], timeout_s: float = ENDS_TIMEOUT_S
) -> dict[int, int]:
    """The committed offset of each partition (-1: none committed) of the group of `probe` (a
    Consumer of it), of those its coordinator answered for without an error; raises when it
    does not answer in `timeout_s`."""
    from confluent_kafka import TopicPartition

    asked = [TopicPartition(topic, p) for p in partitions]
    return {
        tp.partition: max(int(tp.offset), -1)
        for tp in probe.committed(asked, timeout=timeout_s)
        if not tp.error
    }
