"""A run's schedule pinned to the states its faults met.

The generic nemesis finds races: a fault that struck while the controller had just moved a
partition's leadership, within a gap drawn by chance. Replayed on the clock alone, the same
schedule meets that state only some of the time, and a shrinker cannot tell a needed step from
a lucky one. Pinned, each fault step aimed at a role of a partition waits (`after:`) until
that partition shows what the nemesis read just before injecting it in the run: as many ISR
members, and a leader or none. The race becomes a state the replay waits for.

A step is left as it was when the run holds no reading for it: a heal, a step on a node not
chosen by a partition role (a coordinator, the controller, every broker), a step that did
not act, or one whose reading the nemesis could not take (`partitions_error`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from harness.experiment.fields import PARTITION_TARGETS
from harness.experiment.model import FaultStep
from harness.rundir.events import FaultStart

__all__ = ["pin", "pinned", "state_met"]


def state_met(starts: Iterable[FaultStart]) -> dict[int, str]:
    """Step index → the condition that holds in the state its injection met: `isr_size(P) == n
    and has_leader(P)` (or `not has_leader(P)`), P the partition the step resolved. Only
    steps of a partition role with a reading of P (see the module's docstring)."""
    conditions: dict[int, str] = {}
    for start in starts:
        if start.step is None or start.partition is None or start.target not in PARTITION_TARGETS:
            continue
        if start.partitions_error is not None or start.partitions is None:
            continue
        roles = next((r for r in start.partitions if r.get("partition") == start.partition), None)
        if roles is None:
            continue
        p = start.partition
        led = "has_leader" if roles.get("leader") is not None else "not has_leader"
        conditions[start.step] = f"isr_size({p}) == {len(roles.get('isr') or ())} and {led}({p})"
    return conditions


def pinned(steps: Sequence[FaultStep], met: Mapping[int, str]) -> tuple[FaultStep, ...]:
    """`steps` with each step `met` names (by index) waiting for that state too, after its
    own condition if it had one; heals and the steps `met` does not name unchanged."""
    out = []
    for index, step in enumerate(steps):
        condition = met.get(index)
        if condition is None or step.heals:
            out.append(step)
            continue
        after = condition if step.after is None else f"{step.after} and {condition}"
        # Validated again: the condition is parsed, as a file's would be.
        out.append(FaultStep.model_validate({**step.model_dump(by_alias=True), "after": after}))
    return tuple(out)


def pin(steps: Sequence[FaultStep], starts: Iterable[FaultStart]) -> tuple[FaultStep, ...]:
    """`steps` (the run's schedule) pinned to the states its fault_start events met; an event
    whose fault or target is not its step's (a schedule of another run) pins nothing."""
    starts = [
        s
        for s in starts
        if s.step is not None
        and s.step < len(steps)
        and (s.fault, s.target) == (steps[s.step].fault, steps[s.step].target)
    ]
    return pinned(steps, state_met(starts))
