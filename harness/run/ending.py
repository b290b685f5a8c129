"""The end of a repetition, whoever drove its workload (the runner, or a test through the
pytest plugin): the final heal, the records built from the journals, the read-back and the
log segments kept. Both callers run these steps, in this order, and nothing else between."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.chaos.heal import heal_all
from harness.run.final_read import read_back_topic
from harness.run.kept_segments import segments_event
from harness.rundir.events import EventLog, PhaseEvent, SegmentsKept
from harness.workload.finalize import finalize
from harness.workload.readback import Decoder, Readback
from harness.workload.recorder import decode_value
from harness.workload.transactions import finalize_transactions

if TYPE_CHECKING:
    from harness.chaos.faults import FaultContext
    from harness.chaos.nemesis import Nemesis

__all__ = ["ReadBackPlan", "final_heal", "read_back_and_keep", "write_records"]


@dataclass(frozen=True)
class ReadBackPlan:
    """What the final read-back reads and how long it waits for a full ISR first."""

    topic: str
    partitions: int
    full_isr_timeout_s: float
    transactional: bool = False
    decode: Decoder = decode_value


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
