"""A run's schedule pinned to the states its faults met.

The generic nemesis finds races: a fault that struck while the controller had just moved a
partition's leadership, within a gap drawn by chance. Replayed on the clock alone, the same
schedule meets that state only some of the time, and a shrinker cannot tell a needed step from
a lucky one. Pinned, each fault step aimed at a role of a partition waits (`after:`) until
that partition shows what the nemesis read just before injecting it in the run: as many ISR
members, and a leader or none. The first such step after the run's first acknowledgement of
its partition also waits for a high watermark of at least 1: a fault that struck a partition
holding acknowledged messages can lose them, one struck before the producer's first
acknowledgement (which a replay's producer may take a second longer to get) has nothing to
lose. Only the first: the steps after it come after it, and a leader left alone below
min.insync.replicas may answer no high watermark at all. The race becomes a state the replay
waits for. A state that was passing (ISR members a heal brought back rejoin within a second)
may be gone before the replay's step comes, so a pin waits at most PIN_GRACE_S past the step's
time and then acts on the clock, as an unpinned replay would (`... or after_s(X)`); a step
with a condition of its own waits for both, as long as that condition may.

A step is left as it was when the run holds no reading for it: a heal, a step on a node not
chosen by a partition role (a coordinator, the controller, every broker), a step that did
not act, or one whose reading the nemesis could not take (`partitions_error`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness.chaos.conditions import parse_condition
from harness.experiment.fields import PARTITION_TARGETS
from harness.experiment.model import FaultStep
from harness.rundir import layout
from harness.rundir.events import FaultStart
from harness.rundir.records import Status

__all__ = ["PIN_GRACE_S", "first_acks", "pin"]

PIN_GRACE_S = 5.0  # how long past its time a pinned step waits for its state before acting


def first_acks(run_dir: Path) -> dict[int, int]:
    """Partition → when the run at `run_dir` got its first acknowledgement of it (epoch µs),
    from acked.parquet; {} when the run holds no such file."""
    path = run_dir / layout.ACKED
    if not path.is_file():
        return {}
    table = pq.read_table(path, columns=["status", "partition", "ack_ts_us"])
    acked = table.filter(pc.equal(table["status"], Status.OK.value))
    first = acked.group_by("partition").aggregate([("ack_ts_us", "min")]).to_pydict()
    return {
        int(p): int(ts)
        for p, ts in zip(first["partition"], first["ack_ts_us_min"], strict=True)
        if p is not None and ts is not None
    }


def _state_met(start: FaultStart) -> str | None:
    """The condition that holds in the state `start`'s injection met: `isr_size(P) == n and
    has_leader(P)` (or `not has_leader(P)`), P the partition the step resolved; None for a
    step on no partition role, or without a reading of P (see the module's docstring)."""
    if start.partition is None or start.target not in PARTITION_TARGETS:
        return None
    if start.partitions_error is not None:
        return None
    p = start.partition
    roles = next((r for r in start.partitions or () if r.get("partition") == p), None)
    if roles is None:
        return None
    led = "has_leader" if roles.get("leader") is not None else "not has_leader"
    return f"isr_size({p}) == {len(roles.get('isr') or ())} and {led}({p})"


def pin(
    steps: Sequence[FaultStep],
    starts: Iterable[FaultStart],
    first_acks: Mapping[int, int] | None = None,
) -> tuple[FaultStep, ...]:
    """`steps` (the run's schedule) with each fault step waiting, after its own condition if
    it had one, for the state its fault_start event met, and the first such step on a
    partition that the run had acknowledged a message of (`first_acks`: partition → the
    run's first acknowledgement of it, epoch µs; None: not known) for a committed message
    there too (the steps after it come after it: a leader alone below min.insync.replicas
    may answer no high watermark at all); heals, steps without such a reading, and steps
    whose event names another fault or target (a schedule of another run) unchanged."""
    met = {s.step: s for s in starts if s.step is not None}
    waiting = dict(first_acks or {})  # partitions no pinned step has waited on a commit of
    out = []
    for index, step in enumerate(steps):
        start = met.get(index)
        same = start is not None and (start.fault, start.target) == (step.fault, step.target)
        condition = _state_met(start) if same and start and not step.heals else None
        if condition is None or start is None:
            out.append(step)
            continue
        p, began = start.partition, start.ts_us
        if p in waiting and began is not None and waiting[p] <= began:  # acknowledged before
            condition += f" and high_watermark({p}) >= 1"
            del waiting[p]
        if step.after is None:
            after = f"{condition} or after_s({_fallback_s(steps, index):g})"
        else:  # each of its own alternatives and the state
            own = parse_condition(step.after).alternatives
            after = " or ".join(
                " and ".join([*(c.text() for c in clauses), condition]) for clauses in own
            )
        # Validated again: the condition is parsed, as a file's would be.
        out.append(FaultStep.model_validate({**step.model_dump(by_alias=True), "after": after}))
    return tuple(out)


def _fallback_s(steps: Sequence[FaultStep], index: int) -> float:
    """after_s's seconds (counted from when the step before finished) that come PIN_GRACE_S
    past step `index`'s time: its gap from the step before, plus the grace."""
    here, before = steps[index].at_s, steps[index - 1].at_s if index else 0.0
    gap = here - before if here is not None and before is not None else 0.0
    return round(max(gap, 0.0) + PIN_GRACE_S, 3)
