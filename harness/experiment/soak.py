"""Soak schedules: a step that repeats (`every_s`), and a generator held to a duty cycle.

A repeated step stands for all its repetitions: injected at at_s, at_s + every_s, ... while
that is before the workload's end, each healed duration_s later (the last may be cut short
by the end of the workload, when the nemesis heals whatever is active). It is expanded into
plain steps where a cell's schedule is resolved (plan.schedule_for), so the nemesis, spec.json
and the analysis see plain steps only, as they do a generated schedule. rules.py runs the
rules below with its own.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

from harness.experiment.model import Experiment, FaultGenerator, FaultStep, workload_duration_s
from harness.experiment.problems import Problem

__all__ = [
    "MAX_SCHEDULED_FAULTS",
    "duty_problems",
    "expand_repeats",
    "repeat_problems",
    "repetition_starts",
]

MAX_SCHEDULED_FAULTS = 100_000
WHY_SCHEDULED = (
    "spec.json lists every fault step and the nemesis acts on each (a fault a minute for the "
    "7-day maximum is about 10,000)"
)
_NO_BOUND = (
    "needs a time bound to repeat until: set workload.duration_s, or workload.rate together "
    "with workload.count"
)


def _repetition_count(step: FaultStep, horizon_s: float) -> int:
    """About how many repetitions a repeated step has before horizon_s (for the limit)."""
    if step.at_s is None or step.every_s is None or step.at_s >= horizon_s:
        return 0
    return math.ceil((horizon_s - step.at_s) / step.every_s)


def repetition_starts(step: FaultStep, horizon_s: float) -> list[float]:
    """When a repeated step's repetitions start: at_s + k * every_s for k = 0, 1, ... while
    that is before horizon_s, each rounded to the millisecond as generated steps are.
    ValueError for a step that does not repeat or would pass MAX_SCHEDULED_FAULTS."""
    if step.at_s is None or step.every_s is None:
        raise ValueError("only a step with at_s and every_s repeats")
    if _repetition_count(step, horizon_s) > MAX_SCHEDULED_FAULTS:
        raise ValueError(f"more than {MAX_SCHEDULED_FAULTS:,} repetitions: {WHY_SCHEDULED}")
    starts: list[float] = []
    # k * every_s, not a running sum: no rounding error piles up over an hour of repetitions.
    while (start := round(step.at_s + len(starts) * step.every_s, 3)) < horizon_s:
        starts.append(start)
    return starts


def expand_repeats(schedule: Sequence[FaultStep], horizon_s: float) -> list[FaultStep]:
    """`schedule` with each repeated step replaced by its repetitions (plain steps, each with
    its own at_s), merged with the other steps by start time; equal starts keep file order.

    The other steps keep their file order: each with at_s starts a run of steps that the
    steps without at_s after it join (they act as soon as the step before them is done, so
    they stay behind it); a run at the top without at_s starts at 0."""
    runs: list[tuple[float, int, list[FaultStep]]] = []
    run: list[FaultStep] | None = None
    for index, step in enumerate(schedule):
        if step.repeats:
            plain = step.model_copy(update={"every_s": None})
            runs += [
                (start, index, [plain.model_copy(update={"at_s": start})])
                for start in repetition_starts(step, horizon_s)
            ]
        elif step.at_s is None and run is not None:
            run.append(step)
        else:
            run = [step]
            runs.append((step.at_s or 0.0, index, run))
    runs.sort(key=lambda entry: entry[:2])
    return [step for _, _, steps in runs for step in steps]


def _repeat_rules(step: FaultStep, where: str, horizon_s: float | None) -> Iterator[Problem]:
    """What a repeated step may not be, and what it needs."""
    if step.heals:
        reason = (
            "a heal step cannot repeat: it ends the one fault bound to its @name, once; put "
            "every_s on the fault's own step, with a duration_s, instead"
        )
        yield f"{where}.every_s", reason
        return
    if step.as_ is not None:
        reason = (
            "a repeated step binds no name: `as` names the nodes of one fault and a name is "
            "bound once, but every repetition would bind it again; drop `as` or every_s"
        )
        yield f"{where}.as", reason
    if step.after is not None:
        reason = (
            "a repeated step runs on the clock (at_s + k * every_s), but `after` holds a step "
            "until the cluster is ready, so its repetitions would no longer keep time; drop "
            "`after` or every_s"
        )
        yield f"{where}.after", reason
    if step.bound_target is not None or step.partition_binding is not None:
        reason = (
            "repetitions are placed by start time, not in file order, so an @name may not be "
            "bound yet when one acts; target a role (leader, follower, node:<id>, ...) and a "
            "partition number"
        )
        yield f"{where}.target", reason
    if step.at_s is None:
        yield f"{where}.at_s", "every_s needs at_s, when the first repetition starts (e.g. 0)"
    if step.duration_s is None:
        reason = (
            "every_s needs duration_s: each repetition is healed after it, before the next (a "
            "fault without one waits for a heal step, which cannot name a repetition)"
        )
        yield f"{where}.duration_s", reason
    elif step.every_s is not None and step.duration_s >= step.every_s:
        reason = (
            f"{step.duration_s:g} s is not shorter than every_s ({step.every_s:g} s): each "
            "repetition must be healed before the next starts; shorten duration_s or raise "
            "every_s"
        )
        yield f"{where}.duration_s", reason
    if horizon_s is None:
        yield f"{where}.every_s", f"a repeated step {_NO_BOUND}"


def repeat_problems(spec: Experiment) -> Iterator[Problem]:
    """The rules of every repeated step, and the limit on the repetitions of all of them."""
    horizon_s = workload_duration_s(spec.workload)
    counts: dict[int, int] = {}
    for index, step in enumerate(spec.faults.schedule):
        if step.repeats:
            yield from _repeat_rules(step, f"faults.schedule[{index}]", horizon_s)
            counts[index] = 0 if horizon_s is None else _repetition_count(step, horizon_s)
    total = sum(counts.values())
    if total > MAX_SCHEDULED_FAULTS:
        most = max(counts, key=counts.__getitem__)
        share = f" (this step {counts[most]:,})" if len(counts) > 1 else ""
        reason = (
            f"the repeated steps make {total:,} fault steps in the {horizon_s:g} s workload"
            f"{share}; at most {MAX_SCHEDULED_FAULTS:,}: {WHY_SCHEDULED}; raise every_s"
        )
        yield f"faults.schedule[{most}].every_s", reason


def duty_problems(plan: FaultGenerator, horizon_s: float | None) -> Iterator[Problem]:
    """The generator's gaps: mean_interval_s or duty_cycle, one of them, and a schedule that
    lists at most MAX_SCHEDULED_FAULTS faults on average."""
    where = "faults.generate"
    if plan.mean_interval_s is not None and plan.duty_cycle is not None:
        reason = (
            "give mean_interval_s or duty_cycle, not both: duty_cycle sets the mean interval "
            "(mean duration x (1 - duty_cycle) / duty_cycle); remove one of them"
        )
        yield f"{where}.duty_cycle", reason
        return
    if plan.mean_interval_s is None and plan.duty_cycle is None:
        reason = (
            "required: give mean_interval_s (the mean gap in s between a heal and the next "
            "fault) or duty_cycle (the fraction of the workload's time a fault is in force)"
        )
        yield f"{where}.mean_interval_s", reason
        return
    if horizon_s is None or plan.duration_s is None:
        return  # rules.py says that a generated schedule needs a time bound, and durations
    low, high = plan.duration_s
    expected = horizon_s / (plan.mean_gap_s + (low + high) / 2)
    if expected > MAX_SCHEDULED_FAULTS:
        field = "duty_cycle" if plan.duty_cycle is not None else "mean_interval_s"
        reason = (
            f"about {expected:,.0f} faults fit in the {horizon_s:g} s workload; at most "
            f"{MAX_SCHEDULED_FAULTS:,}: {WHY_SCHEDULED}; lengthen the faults' gaps or durations"
        )
        yield f"{where}.{field}", reason
