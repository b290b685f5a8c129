"""Shrinking a failing schedule: delta debugging over its faults, then halving the time each
is in force (its duration, or its distance to the heal step aimed at it). A race that a
replay of the whole schedule meets too rarely is asked differently: each fault alone, made to
repeat over the workload (`repeated`), so that one replay meets its moment several times.

Pure search over an abstract predicate "does this schedule still reproduce?", which the caller
implements by replaying the cell (kafka_chaos/commands/shrink.py over harness/run/replay.py).
A predicate answer costs repetitions: `k_of_n` asks for k successes in up to n trials and stops
as soon as the answer is known; the `Budget` caps the trials of the whole search, and a
predicate that finds the budget spent answers None, which ends the search with the smallest
schedule found so far.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from harness.experiment.generic import bound_faults, draw_of
from harness.experiment.model import FaultStep

__all__ = [
    "Budget",
    "Shrunk",
    "ddmin",
    "drawn_units",
    "fault_units",
    "halve_durations",
    "k_of_n",
    "repeated",
    "repeated_draw",
    "shrink_schedule",
    "unbound",
]

T = TypeVar("T")
Reproduces = Callable[[tuple[T, ...]], bool | None]  # None: the budget ran out
MIN_DURATION_S = 0.5  # a fault is not halved below this: shorter ones barely act
REPEATS = 3  # how many times `repeated` makes a fault act over the workload
REST_S = 10.0  # between a repetition's heal and the next start: the cluster settles


@dataclass
class Budget:
    """Trials (repetitions) the search may still spend."""

    limit: int
    spent: int = 0

    def take(self) -> bool:
        """Spend one trial; False (nothing spent) when none is left."""
        if self.spent >= self.limit:
            return False
        self.spent += 1
        return True


def k_of_n(trial: Callable[[], bool], k: int, n: int, budget: Budget) -> bool | None:
    """Whether at least `k` of `n` trials succeed, running only as many as it takes to know;
    None when the budget runs out before the answer is known."""
    hits = misses = 0
    while hits < k and misses <= n - k:
        if not budget.take():
            return None
        if trial():
            hits += 1
        else:
            misses += 1
    return hits >= k


@dataclass(frozen=True)
class Shrunk(Generic[T]):
    """The smallest input found to reproduce, and whether the search ran to its end (1-minimal
    and shortest) or stopped when the budget ran out."""

    items: tuple[T, ...]
    finished: bool


def _chunks(items: tuple[T, ...], n: int) -> list[tuple[T, ...]]:
    """`items` in `n` contiguous chunks of near-equal size (none empty)."""
    size, extra = divmod(len(items), n)
    chunks, start = [], 0
    for index in range(n):
        end = start + size + (index < extra)
        chunks.append(items[start:end])
        start = end
    return chunks


def ddmin(items: Sequence[T], reproduces: Reproduces[T]) -> Shrunk[T]:
    """Zeller's ddmin: a subsequence of `items` (which reproduce) that still reproduces and is
    1-minimal (removing any one item stops it reproducing), the empty one included; each
    subset asked once (subsets are kept as positions: items need not be hashable).

    At each granularity the complements (all but one chunk) are asked before the chunks: a
    failure the nemesis found by stacking faults needs several of them, which one removal
    keeps together more often than one kept chunk does (over every pair of 5 faults, 7.5
    questions on average; tests/unit/test_shrink_search.py fails with the chunks first)."""
    everything = tuple(items)
    asked: dict[tuple[int, ...], bool | None] = {}

    def test(subset: tuple[int, ...]) -> bool | None:
        if subset not in asked:
            asked[subset] = reproduces(tuple(everything[i] for i in subset))
        return asked[subset]

    def found(positions: tuple[int, ...], finished: bool) -> Shrunk[T]:
        return Shrunk(tuple(everything[i] for i in positions), finished)

    current, n = tuple(range(len(everything))), 2
    while current:
        n = min(n, len(current))
        chunks = _chunks(current, n)
        complements = [
            tuple(x for j, chunk in enumerate(chunks) if j != i for x in chunk)
            for i in range(len(chunks))
        ]
        candidates = complements + (chunks if n > 2 else [])
        for candidate in candidates:
            answer = test(candidate)
            if answer is None:
                return found(current, False)
            if answer:
                shrank_to_chunk = n > 1 and candidate in chunks
                current, n = candidate, 2 if shrank_to_chunk else max(n - 1, 2)
                break
        else:
            if n >= len(current):
                return found(current, True)
            n = min(len(current), 2 * n)
    return found(current, True)


def halve_durations(
    steps: Sequence[FaultStep], reproduces: Reproduces[FaultStep]
) -> Shrunk[FaultStep]:
    """Each fault's time in force halved, fault by fault, for as long as the schedule still
    reproduces and the half is at least MIN_DURATION_S: a step's `duration_s`, or for a bound
    fault (`as`) the time to the heal step aimed at it, whose `at_s` moves earlier (the
    schedule is then put back in time order)."""
    current = tuple(steps)
    for step in steps:  # by identity: a moved heal changes positions, not steps
        while (half := _halved(current, step)) is not None:
            answer = reproduces(half[0])
            if answer is None:
                return Shrunk(current, False)
            if not answer:
                break
            current, step = half
    return Shrunk(current, True)


def _halved(
    steps: tuple[FaultStep, ...], step: FaultStep
) -> tuple[tuple[FaultStep, ...], FaultStep] | None:
    """`steps` with `step`'s time in force halved, and the step that now stands for it; None
    when that time is unknown or its half would be below MIN_DURATION_S."""
    index = next((i for i, s in enumerate(steps) if s is step), None)
    if index is None:
        return None
    if (duration := step.duration_s) is not None:
        if duration / 2 < MIN_DURATION_S:
            return None
        half = step.model_copy(update={"duration_s": round(duration / 2, 3)})
        return (*steps[:index], half, *steps[index + 1 :]), half
    heal = _heal_of(steps, index)
    # Steps without `at_s` run right after the one before them: no time order to restore.
    if heal is None or step.at_s is None or any(s.at_s is None for s in steps):
        return None
    held = (steps[heal].at_s or 0.0) - step.at_s
    if held / 2 < MIN_DURATION_S:
        return None
    earlier = steps[heal].model_copy(update={"at_s": round(step.at_s + held / 2, 3)})
    moved = [*steps[:heal], earlier, *steps[heal + 1 :]]
    # A stable sort: steps at one time keep their file order (a heal before a start).
    return tuple(sorted(moved, key=lambda s: s.at_s or 0.0)), step


def _heal_of(steps: tuple[FaultStep, ...], index: int) -> int | None:
    """The position of the timed heal step aimed at the fault `steps[index]` binds (`as`);
    None when it binds none, or no later heal with an `at_s` and no condition ends it."""
    name = steps[index].as_
    if name is None:
        return None
    return next(
        (
            j for j in range(index + 1, len(steps))
            if steps[j].fault == "heal" and steps[j].bound_target == name
            and steps[j].at_s is not None and steps[j].condition is None
        ),
        None,
    )  # fmt: skip


def _names_used(step: FaultStep) -> set[str]:
    """The `as` names a step reads: its @name target, @name partition and condition."""
    used = {step.bound_target, step.partition_binding} - {None}
    used |= set(step.condition.names) if step.condition else set()
    return used  # type: ignore[return-value]


def fault_units(steps: Sequence[FaultStep]) -> list[tuple[int, ...]]:
    """The positions of `steps` grouped into faults that stand or fall together: a step that
    binds a name (`as`) with every later step that reads it (its heal, a step aimed at the node
    it resolved), transitively; any other step alone. Units in the order of their first step,
    positions ascending: removing a unit never leaves a step reading a name nobody binds."""
    parent = list(range(len(steps)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    binder: dict[str, int] = {}
    for index, step in enumerate(steps):
        for name in _names_used(step):
            if name in binder:
                parent[root(index)] = root(binder[name])
        if step.as_:
            binder[step.as_] = index
    units: dict[int, list[int]] = {}
    for index in range(len(steps)):
        units.setdefault(root(index), []).append(index)
    return sorted((tuple(unit) for unit in units.values()), key=lambda unit: unit[0])


def drawn_units(steps: Sequence[FaultStep]) -> list[tuple[int, ...]]:
    """The positions of `steps` grouped by the nemesis draw that made them: a cascade's faults
    (generic.draw_of) with their heal steps together, every other fault unit (fault_units)
    alone. In the order of their first step, positions ascending."""
    groups: dict[str, list[int]] = {}
    for unit in fault_units(steps):
        draw = next((d for i in unit if (d := draw_of(steps[i].as_))), None)
        groups.setdefault(draw or f"unit {unit[0]}", []).extend(unit)
    return sorted((tuple(sorted(group)) for group in groups.values()), key=lambda g: g[0])


def shrink_schedule(
    steps: Sequence[FaultStep], reproduces: Reproduces[FaultStep]
) -> Shrunk[FaultStep]:
    """The smallest, shortest schedule found that reproduces: first no fault at all (a failure
    the workload alone makes needs none, and says so in one question), then ddmin over the
    faults (fault_units: a bound fault goes with its heal), then their durations halved."""
    steps = tuple(steps)
    if steps:
        alone = reproduces(())
        if alone is None or alone:
            return Shrunk((), bool(alone)) if alone else Shrunk(steps, False)
    units = fault_units(steps)

    def units_reproduce(chosen: tuple[tuple[int, ...], ...]) -> bool | None:
        return reproduces(tuple(steps[i] for i in sorted(i for unit in chosen for i in unit)))

    fewer = ddmin(units, units_reproduce)
    kept = tuple(steps[i] for i in sorted(i for unit in fewer.items for i in unit))
    if not fewer.finished:
        return Shrunk(kept, False)
    return halve_durations(kept, reproduces)


def unbound(steps: Sequence[FaultStep]) -> list[FaultStep]:
    """`steps` with each fault bound to a name that only its own timed heal reads (as the
    nemesis writes faults that overlap) written as one timed step, its duration_s up to that
    heal, the heal left out; every other step as it is. In the order of `steps`."""
    steps = tuple(steps)
    made: list[tuple[int, FaultStep]] = []
    for unit in fault_units(steps):
        first = steps[unit[0]]
        if len(unit) == 2 and first.duration_s is None and _heal_of(steps, unit[0]) == unit[1]:
            held = round((steps[unit[1]].at_s or 0.0) - (first.at_s or 0.0), 3)
            made.append((unit[0], first.model_copy(update={"as_": None, "duration_s": held})))
        else:
            made.extend((i, steps[i]) for i in unit)
    return [step for _, step in sorted(made, key=lambda item: item[0])]


def repeated(steps: Sequence[FaultStep], horizon_s: float, times: int = REPEATS) -> list[FaultStep]:
    """Each fault of `steps` that is a unit of its own (fault_units) repeated alone
    (`repeated_draw`), those that cannot repeat left out. In the order of `steps`."""
    singles = (steps[i] for (i,) in (u for u in fault_units(steps) if len(u) == 1))
    return [made for step in singles for made in repeated_draw((step,), horizon_s, times)]


def repeated_draw(
    draw: Sequence[FaultStep], horizon_s: float, times: int = REPEATS
) -> list[FaultStep]:
    """The faults of `draw` (timed steps: one with a role target, at_s and duration_s, binding
    and awaiting nothing) acting together `times` times over a workload of `horizon_s`, in
    rounds the workload's share apart (rounded up to the ms so that exactly `times` rounds
    start before its end): each at its own distance from the draw's first, the first round at
    the draw's own time or earlier, so that the last is healed by the end, each duration cut to
    leave REST_S before the next round. One fault: one step repeating (every_s). Several: the
    rounds written out, each a cascade of faults in force at once (bound_faults: `c<round>_<j>`
    and their heal steps), since the schedule runs a timed step to its end before the next.
    [] when a step cannot repeat, or its duration would fall below MIN_DURATION_S."""
    every = math.ceil(horizon_s / times * 1000) / 1000
    if not draw or not all(_repeatable(step) for step in draw):
        return []
    first = min(step.at_s or 0.0 for step in draw)
    offsets = [(step.at_s or 0.0) - first for step in draw]
    room = [every - REST_S - o for o in offsets]  # what each may last before the next round
    held = [min(step.duration_s or 0.0, r) for step, r in zip(draw, room, strict=True)]
    if min(held) < MIN_DURATION_S:
        return []
    start = max(0.0, min(first, every - max(o + h for o, h in zip(offsets, held, strict=True))))
    moved = [
        step.model_copy(update={"at_s": round(start + o, 3), "duration_s": round(h, 3)})
        for step, o, h in zip(draw, offsets, held, strict=True)
    ]
    if len(moved) == 1:
        return [moved[0].model_copy(update={"every_s": every})]
    rounds = [
        [
            step.model_copy(update={"at_s": round((step.at_s or 0.0) + k * every, 3)})
            for step in moved
        ]
        for k in range(times)
    ]
    return bound_faults(rounds)


def first_round(schedule: Sequence[FaultStep]) -> tuple[FaultStep, ...] | None:
    """The first round of a repeated draw (`repeated_draw`'s schedule), alone: a repeating
    step once (every_s dropped), or the first cascade's faults with their heal steps; None
    when `schedule` holds no more than one round."""
    if len(schedule) == 1 and schedule[0].repeats:
        return (schedule[0].model_copy(update={"every_s": None}),)
    units = drawn_units(schedule)
    return tuple(schedule[i] for i in units[0]) if len(units) > 1 else None


def _repeatable(step: FaultStep) -> bool:
    """A fault step that can repeat: timed, on a role, binding and awaiting nothing."""
    return not (
        step.heals
        or step.as_
        or step.after
        or step.repeats
        or step.at_s is None
        or step.duration_s is None
        or step.bound_target
        or step.partition_binding
    )
