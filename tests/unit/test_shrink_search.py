"""The shrinker's search (harness/experiment/shrink.py) against planted oracles: ddmin finds the
planted minimal failing subset, or a 1-minimal one among several; it never spends more than
the budget; k_of_n answers what running all n trials would; durations halve to the shortest
that still reproduces."""

from __future__ import annotations

import itertools
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.experiment.model import FaultStep
from harness.experiment.shrink import (
    MIN_DURATION_S,
    Budget,
    ddmin,
    fault_units,
    halve_durations,
    k_of_n,
    shrink_schedule,
)

Items = tuple[int, ...]


@st.composite
def planted(draw: st.DrawFn) -> tuple[list[int], frozenset[int]]:
    items = list(range(draw(st.integers(0, 24))))
    subset = draw(st.sets(st.sampled_from(items), max_size=5)) if items else set()
    return items, frozenset(subset)


@given(planted())
def test_ddmin_finds_the_planted_minimal_subset(case: tuple[list[int], frozenset[int]]) -> None:
    items, subset = case
    shrunk = ddmin(items, lambda candidate: subset <= set(candidate))
    assert shrunk.finished
    assert shrunk.items == tuple(i for i in items if i in subset)


@given(
    st.integers(1, 20), st.lists(st.sets(st.integers(0, 19), max_size=4), min_size=1, max_size=4)
)
def test_ddmin_ends_1_minimal_among_several_failing_subsets(
    size: int, plants: list[set[int]]
) -> None:
    items = list(range(size))
    plants = [p & set(items) for p in plants]

    def reproduces(candidate: Items) -> bool:
        return any(p <= set(candidate) for p in plants)

    shrunk = ddmin(items, reproduces)
    assert shrunk.finished and reproduces(shrunk.items)
    for index in range(len(shrunk.items)):  # 1-minimal: no single removal still reproduces
        assert not reproduces(shrunk.items[:index] + shrunk.items[index + 1 :])
    assert list(shrunk.items) == sorted(shrunk.items)  # a subsequence, in the original order


def test_ddmin_asks_complements_first_so_a_fault_pair_costs_fewer_questions() -> None:
    """A bug found by stacking faults needs several of them: removing one chunk at a time
    keeps them together more often than keeping one chunk does. Over every pair of five
    faults, ddmin asks 7.5 questions on average (more with the chunks asked first)."""
    questions = []
    for pair in itertools.combinations(range(5), 2):
        asked: list[Items] = []

        def reproduces(
            candidate: Items, pair: tuple[int, ...] = pair, asked: list[Items] = asked
        ) -> bool:
            asked.append(candidate)
            return set(pair) <= set(candidate)

        assert ddmin(range(5), reproduces).items == pair
        questions.append(len(asked))
    assert sum(questions) / len(questions) <= 7.5


def budgeted(
    reproduces: Callable[[Items], bool], budget: Budget, calls: list[Items]
) -> Callable[[Items], bool | None]:
    def ask(candidate: Items) -> bool | None:
        if not budget.take():
            return None
        calls.append(candidate)
        return reproduces(candidate)

    return ask


@given(planted(), st.integers(0, 30))
def test_ddmin_never_spends_more_than_its_budget(
    case: tuple[list[int], frozenset[int]], limit: int
) -> None:
    items, subset = case

    def reproduces(candidate: Items) -> bool:
        return subset <= set(candidate)

    budget, calls = Budget(limit), []
    shrunk = ddmin(items, budgeted(reproduces, budget, calls))
    assert len(calls) <= limit and budget.spent == len(calls)
    assert reproduces(shrunk.items)  # the smallest found so far always reproduces
    assert len(calls) == len(set(calls))  # no subset asked twice
    if shrunk.finished:
        assert shrunk.items == tuple(i for i in items if i in subset)


@given(st.lists(st.booleans(), min_size=1, max_size=9), st.data(), st.integers(0, 12))
def test_k_of_n_answers_what_all_n_trials_would(
    outcomes: list[bool], data: st.DataObject, limit: int
) -> None:
    n = len(outcomes)
    k = data.draw(st.integers(1, n))
    script = iter(outcomes)
    ran = []

    def trial() -> bool:
        ran.append(1)
        return next(script)

    budget = Budget(limit)
    answer = k_of_n(trial, k, n, budget)
    assert len(ran) <= min(n, limit) and budget.spent == len(ran)
    if answer is not None:
        assert answer == (sum(outcomes) >= k)  # the oracle: every trial run
    else:
        assert len(ran) == limit < n


def step(at_s: float, duration_s: float) -> FaultStep:
    return FaultStep(at_s=at_s, fault="kill", target="leader", duration_s=duration_s)


@settings(max_examples=50)
@given(
    st.lists(st.tuples(st.floats(1, 60), st.floats(0, 70)), min_size=1, max_size=4),
)
def test_durations_halve_to_the_shortest_that_still_reproduces(
    plan: list[tuple[float, float]],
) -> None:
    durations = [round(d, 3) for d, _ in plan]
    needs = [min(need, d) for (_, need), d in zip(plan, durations, strict=True)]
    steps = tuple(step(10 * i, d) for i, d in enumerate(durations))

    def reproduces(candidate: tuple[FaultStep, ...]) -> bool:
        return all((s.duration_s or 0) >= need for s, need in zip(candidate, needs, strict=True))

    shrunk = halve_durations(steps, reproduces)
    assert shrunk.finished
    for got, start, need in zip(shrunk.items, durations, needs, strict=True):
        expected = start  # the oracle: halve while the half still reproduces and is long enough
        while expected / 2 >= MIN_DURATION_S and round(expected / 2, 3) >= need:
            expected = round(expected / 2, 3)
        assert got.duration_s == expected


def test_shrink_drops_steps_first_then_halves_what_is_left() -> None:
    steps = tuple(step(10 * i, 8) for i in range(5))

    def reproduces(candidate: tuple[FaultStep, ...]) -> bool:
        kept = [s for s in candidate if s.at_s == 20]
        return len(kept) == 1 and (kept[0].duration_s or 0) >= 2

    shrunk = shrink_schedule(steps, reproduces)
    assert shrunk.finished
    assert [(s.at_s, s.duration_s) for s in shrunk.items] == [(20, 2)]


def test_a_failure_without_faults_shrinks_to_none_in_one_question() -> None:
    steps = tuple(step(10 * i, 8) for i in range(5))
    asked: list[int] = []

    def reproduces(candidate: tuple[FaultStep, ...]) -> bool:
        asked.append(len(candidate))
        return True

    shrunk = shrink_schedule(steps, reproduces)
    assert shrunk.finished and shrunk.items == () and asked == [0]


def test_a_budget_spent_on_the_first_question_keeps_the_whole_schedule() -> None:
    steps = tuple(step(10 * i, 8) for i in range(3))
    shrunk = shrink_schedule(steps, lambda candidate: None)
    assert not shrunk.finished and shrunk.items == steps


@st.composite
def bound_schedules(draw: st.DrawFn) -> list[FaultStep]:
    """Schedules of plain faults, bound faults and heals or aimed steps reading earlier names."""
    steps: list[FaultStep] = []
    names: list[str] = []
    for index in range(draw(st.integers(0, 10))):
        kind = draw(st.sampled_from(["plain", "bound", "reader"] if names else ["plain", "bound"]))
        if kind == "plain":
            steps.append(step(index, 1))
        elif kind == "bound":
            names.append(f"n{index}")
            steps.append(FaultStep(at_s=index, fault="kill", target="leader", as_=names[-1]))
        else:
            name = draw(st.sampled_from(names))
            heal = draw(st.booleans())
            steps.append(
                FaultStep(at_s=index, fault="heal", target=f"@{name}")
                if heal
                else FaultStep(at_s=index, fault="kill", target="successor", partition=f"@{name}")
            )
    return steps


@given(bound_schedules(), st.data())
def test_fault_units_keep_every_name_with_its_binder(
    steps: list[FaultStep], data: st.DataObject
) -> None:
    units = fault_units(steps)
    assert sorted(i for unit in units for i in unit) == list(range(len(steps)))
    assert [unit[0] for unit in units] == sorted(unit[0] for unit in units)
    # The oracle: any choice of units leaves every name read bound by an earlier kept step.
    chosen = data.draw(st.lists(st.sampled_from(units), unique=True) if units else st.just([]))
    kept = [steps[i] for i in sorted(i for unit in chosen for i in unit)]
    bound: set[str] = set()
    for kept_step in kept:
        reads = {kept_step.bound_target, kept_step.partition_binding} - {None}
        assert reads <= bound
        if kept_step.as_:
            bound.add(kept_step.as_)


@settings(max_examples=50)
@given(st.lists(st.tuples(st.floats(0, 30), st.floats(1, 60), st.floats(0, 70)), max_size=4))
def test_bound_faults_are_held_half_as_long_while_they_still_reproduce(
    plan: list[tuple[float, float, float]],
) -> None:
    """Overlapping faults as the generic nemesis writes them (`as: g<i>` and a heal step at
    the planned end): each heal moves earlier while the time held still reproduces."""
    starts = [round(s, 3) for s, _, _ in plan]
    ends = [round(s + held, 3) for s, (_, held, _) in zip(starts, plan, strict=True)]
    spans = zip(plan, starts, ends, strict=True)
    needs = {f"g{i}": min(need, end - start) for i, ((_, _, need), start, end) in enumerate(spans)}
    timed = [(start, 1, FaultStep(at_s=start, fault="kill", target="leader", as_=f"g{i}"))
             for i, start in enumerate(starts)]  # fmt: skip
    timed += [(end, 0, FaultStep(at_s=end, fault="heal", target=f"@g{i}"))
              for i, end in enumerate(ends)]  # fmt: skip
    steps = tuple(s for _, _, s in sorted(timed, key=lambda t: t[:2]))

    def held(candidate: tuple[FaultStep, ...]) -> dict[str, float]:
        opened = {s.as_: s.at_s or 0.0 for s in candidate if s.as_}
        return {s.bound_target or "": (s.at_s or 0.0) - opened[s.bound_target or ""]
                for s in candidate if s.fault == "heal"}  # fmt: skip

    def reproduces(candidate: tuple[FaultStep, ...]) -> bool:
        return all(time >= needs[name] for name, time in held(candidate).items())

    shrunk = halve_durations(steps, reproduces)
    assert shrunk.finished
    times = [s.at_s or 0.0 for s in shrunk.items]
    assert times == sorted(times)  # back in time order
    for i, (start, end) in enumerate(zip(starts, ends, strict=True)):
        expected = end  # the oracle: move the heal to the half while that still reproduces
        while (expected - start) / 2 >= MIN_DURATION_S and (
            round(start + (expected - start) / 2, 3) - start >= needs[f"g{i}"]
        ):
            expected = round(start + (expected - start) / 2, 3)
        assert held(shrunk.items)[f"g{i}"] == expected - start
