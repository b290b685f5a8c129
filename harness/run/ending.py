"""The end of a repetition, whoever drove its workload (the runner, or a test through the
pytest plugin): `end_run` heals, closes the consumer group, builds the records from the
journals, reads the topic back and keeps the log segments, in this order; both callers call
it once their journals are closed, and sequence none of these steps themselves. (The runner
reads back apart, `read_back_and_keep`, after a Ctrl-C has had its chance to stop it.)"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from harness.chaos.heal import heal_all
from harness.run.final_read import read_back_topic
from harness.run.kept_segments import segments_event
from harness.rundir.events import EventLog, PhaseEvent, SegmentsKept
from harness.workload.finalize import finalize
from harness.workload.readback import Decoder, Readback
from harness.workload.transactions.librdkafka import finalize_transactions
from harness.workload.values import decode_value

if TYPE_CHECKING:
    from harness.chaos.faults import FaultContext
    from harness.nemesis.schedule import Nemesis
    from harness.run.sampler import Sampler

__all__ = ["GroupEnd", "ReadBackPlan", "RunEnd", "end_run", "read_back_and_keep"]


@dataclass(frozen=True)
class ReadBackPlan:
    """What the final read-back reads and how long it waits for a full ISR first."""

    topic: str
    partitions: int
    full_isr_timeout_s: float
    transactional: bool = False
    decode: Decoder = decode_value


class GroupEnd(Protocol):
    """The consumer group's part of the end, for a run that had one."""

    def catch_up(self) -> None:
        """Let the group commit up to the end of every partition (bounded)."""

    def close(self) -> None:
        """End every member and record the group's final offsets (after catch_up, if it ran)."""


@dataclass(frozen=True)
class RunEnd:
    """What the end of a repetition acts on. `records`: build acked.parquet (and
    transactions.parquet) from the journals (False when the run journalled nothing);
    `read_back`: what to read back (None: no read-back)."""

    ctx: FaultContext
    nemesis: Nemesis
    events: EventLog
    run_dir: Path
    sampler: Sampler
    read_back: ReadBackPlan | None
    records: bool = True
    group: GroupEnd | None = None
    phase: Callable[[str], None] = lambda name: None


def end_run(end: RunEnd) -> Readback | None:
    """End a repetition whose journals are closed: the final heal; the consumer group caught
    up (only after a heal that held) and closed; the records; then the read-back and the
    segments kept, whose result is returned (None without a plan); the sampler stopped last.

    The sampler records on through the read-back's wait for a full ISR: who leads once the
    final heal brought every node back (a replica whose own heal did not hold returns only
    then) is evidence the judge reads. Every step before the read-back runs even when one of
    them failed (or was interrupted): the sampler is then stopped, the first failure is raised
    after them all, an interrupt before any other, and there is no read-back (the nodes may
    not be whole); a read-back that fails still stops the sampler, and its error is raised."""
    failures: list[BaseException] = []

    def attempt(step: Callable[[], object]) -> bool:
        try:
            step()
        except BaseException as exc:  # the journals' records must be written all the same
            failures.append(exc)
            return False
        return True

    end.phase("final heal")
    if attempt(lambda: final_heal(end.ctx, end.nemesis, end.events)) and end.group is not None:
        attempt(end.group.catch_up)
    if end.group is not None:
        attempt(end.group.close)
    if end.records:
        attempt(lambda: write_records(end.run_dir))
    if failures or end.read_back is None:
        attempt(end.sampler.stop)
        if failures:
            interrupts = [f for f in failures if not isinstance(f, Exception)]
            raise (interrupts or failures)[0]
        return None
    try:
        result = read_back_and_keep(end.ctx, end.read_back, end.run_dir, end.events, end.phase)
    except BaseException:
        attempt(end.sampler.stop)  # the read-back's error is the one to raise
        raise
    end.sampler.stop()
    return result


def final_heal(ctx: FaultContext, nemesis: Nemesis, events: EventLog) -> list[str]:
    """Stop the nemesis, heal what it left active, then every node (start, unpause, clean
    up); the `heal` event lists the actions taken, which are returned."""
    nemesis.stop()
    actions = heal_all(ctx)
    events.write(PhaseEvent(phase="heal", actions=actions))
    return actions


def write_records(run_dir: Path) -> None:
    """acked.parquet from the producers' journals, and transactions.parquet when the run
    journalled transactions."""
    finalize(run_dir)
    finalize_transactions(run_dir)


def read_back_and_keep(
    ctx: FaultContext,
    plan: ReadBackPlan,
    run_dir: Path,
    events: EventLog,
    phase: Callable[[str], None] = lambda name: None,
) -> Readback:
    """Read the topic back (after a bounded wait for a full ISR), then, while the brokers
    still hold their logs, keep the segments that say where each missing message still is."""
    result = read_back_topic(
        ctx.cluster,
        plan.topic,
        plan.partitions,
        run_dir,
        events,
        full_isr_timeout_s=plan.full_isr_timeout_s,
        transactional=plan.transactional,
        phase=phase,
        decode=plan.decode,
    )
    phase("keeping segments")
    segments = segments_event(ctx.cluster.nodes, plan.topic, plan.partitions, run_dir)
    events.write(SegmentsKept(**segments))
    return result
