"""Soak schedules: steps that repeat (`every_s`) and a generator held to a duty cycle; their
rules, their expansion against an oracle, and how the nemesis runs the repetitions."""

from __future__ import annotations

import itertools
import json
import statistics
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.experiment.load import load_experiment
from harness.experiment.matrix import expand
from harness.experiment.model import FaultStep
from harness.experiment.plan import cell_config, fault_class, schedule_for
from harness.experiment.soak import MAX_SCHEDULED_FAULTS, repetition_starts
from harness.platform.image import BrokerImage
from harness.run.repetition import Repetition
from harness.run.resolved import resolve, write_spec
from harness.rundir import layout
from harness.rundir.events import EventType
from tests.unit.spec_documents import EXPERIMENTS, doc, one_cell, rejects
from tests.unit.test_schedule import FakeCluster, run


def repeated(**fields: Any) -> dict[str, Any]:
    """A step killing the leader for 20 s every 300 s from 60 s, with `fields` changed."""
    return {"at_s": 60, "every_s": 300, "fault": "kill", "target": "leader", "duration_s": 20,
            **fields}  # fmt: skip


def soak(schedule: list[dict[str, Any]], **workload: Any) -> dict[str, Any]:
    return doc(workload={"duration_s": 3600, **workload}, faults={"schedule": schedule})


def generated(**generator: Any) -> dict[str, Any]:
    plan = {"faults": ["kill"], "targets": ["leader"], "duration_s": [2, 8], **generator}
    return doc(workload={"duration_s": 3600}, faults={"generate": plan})


# --- repeated steps: the rules ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("step", "fragments"),
    [
        (repeated(at_s=None), ("faults.schedule[0].at_s", "every_s needs at_s")),
        (repeated(duration_s=None), ("faults.schedule[0].duration_s", "every_s needs duration_s")),
        (
            repeated(duration_s=300),
            ("faults.schedule[0].duration_s", "not shorter than every_s", "shorten duration_s"),
        ),
        (repeated(duration_s=400), ("faults.schedule[0].duration_s", "healed before the next")),
        (repeated(**{"as": "x"}), ("faults.schedule[0].as", "bound once", "drop `as` or every_s")),
        (
            repeated(after="has_leader(0)"),
            ("faults.schedule[0].after", "runs on the clock", "drop `after` or every_s"),
        ),
        (
            {"at_s": 5, "every_s": 60, "fault": "heal", "target": "@x"},
            ("faults.schedule[0].every_s", "a heal step cannot repeat"),
        ),
        (repeated(every_s=0), ("faults.schedule[0].every_s", "greater than 0")),
        (repeated(every_s=-5), ("faults.schedule[0].every_s", "greater than 0")),
        (repeated(every_s=True), ("faults.schedule[0].every_s", "must be a number")),
        (repeated(every_s=10**9), ("faults.schedule[0].every_s", "at most 604,800 s")),
        (
            repeated(at_s=3590),
            ("faults.schedule[0]", "ends at 3610 s", "not before the workload ends"),
        ),
        (
            repeated(every_s=0.02, duration_s=0.01),
            ("faults.schedule[0].every_s", "177,000 fault steps", f"{MAX_SCHEDULED_FAULTS:,}"),
        ),
    ],
)
def test_a_misused_repeated_step_is_refused_naming_the_field_and_the_fix(step, fragments):
    rejects(soak([step]), *fragments)


def test_a_repeated_step_needs_a_bounded_workload():
    data = soak([repeated()], duration_s=None, count=10**6, rate=None)
    rejects(data, "faults.schedule[0].every_s", "needs a time bound", "workload.duration_s")


def test_a_repeated_step_may_not_use_a_name_bound_elsewhere():
    bind = {"at_s": 10, "fault": "kill", "target": "node:1", "as": "x"}
    rejects(soak([bind, repeated(target="@x")]), "faults.schedule[1].target", "not in file order")
    rejects(soak([bind, repeated(partition="@x")]), "faults.schedule[1].target", "partition")


def test_repeated_lines_stand_outside_the_file_order_of_start_times():
    lines = [repeated(at_s=200), repeated(at_s=10, fault="pause", duration_s=5)]
    assert [s.at_s for s in schedule_for(one_cell(soak(lines)), 0)][:3] == [10, 200, 310]
    plain = [repeated(at_s=200, every_s=None), repeated(at_s=10, every_s=None)]
    rejects(soak(plain), "faults.schedule[1].at_s", "steps run in file order")


# --- repeated steps: the expansion --------------------------------------------------------------

KINDS = [("kill", "leader"), ("pause", "follower"), ("partition", "leader"), ("stop", "node:2")]


@st.composite
def soak_lines(draw) -> tuple[int, list[tuple[int, int, int]]]:
    """A workload length and 1..3 repeated lines (at, every, duration), all in milliseconds:
    the resolution the harness keeps times at (generated steps, spec.json). The first
    repetition of each ends before the workload does, which the rules ask of every step."""
    horizon_ms = draw(st.integers(1_000, 3_600_000))
    lines = []
    for _ in range(draw(st.integers(1, 3))):
        every_ms = draw(st.integers(max(2, horizon_ms // 300), horizon_ms))
        duration_ms = draw(st.integers(1, min(every_ms, horizon_ms) - 1))
        at_ms = draw(st.integers(0, horizon_ms - duration_ms - 1))
        lines.append((at_ms, every_ms, duration_ms))
    return horizon_ms, lines


def oracle(horizon_ms: int, lines: list[tuple[int, int, int]]) -> list[tuple[int, int]]:
    """(start in ms, line) of every repetition: each line from at every `every` while before
    the horizon, in integers (no rounding to trust), by start time and then line."""
    return sorted(
        (start, line)
        for line, (at_ms, every_ms, _) in enumerate(lines)
        for start in range(at_ms, horizon_ms, every_ms)
    )


@pytest.mark.property
@given(soak_lines())
def test_repeated_lines_expand_to_exactly_the_oracles_repetitions(case):
    horizon_ms, lines = case
    schedule = [
        {"at_s": at / 1000, "every_s": every / 1000, "duration_s": duration / 1000,
         "fault": KINDS[line][0], "target": KINDS[line][1]}
        for line, (at, every, duration) in enumerate(lines)
    ]  # fmt: skip
    steps = schedule_for(one_cell(soak(schedule, duration_s=horizon_ms / 1000)), 0)
    expected = [
        (start / 1000, *KINDS[line], lines[line][2] / 1000)
        for start, line in oracle(horizon_ms, lines)
    ]
    assert [(s.at_s, s.fault, s.target, s.duration_s) for s in steps] == expected
    assert all(s.at_s < horizon_ms / 1000 and not s.repeats for s in steps)
    for kind in KINDS[: len(lines)]:
        own = [s for s in steps if (s.fault, s.target) == kind]
        for before, after in itertools.pairwise(own):
            assert after.at_s - before.at_s >= before.duration_s  # healed before it repeats


@pytest.mark.property
@given(
    st.integers(0, 10_000), st.integers(10, 100_000), st.integers(1, 200_000), st.integers(0, 99)
)
def test_repetition_starts_are_at_plus_multiples_of_every_before_the_horizon(
    at_ms, every_ms, horizon_ms, spare_ms
):
    step = FaultStep(at_s=at_ms / 1000, every_s=every_ms / 1000, fault="kill", target="leader")
    starts = repetition_starts(step, (horizon_ms + spare_ms / 100) / 1000)
    # A horizon between two milliseconds: a start below it counts, one at or past it not.
    bound = horizon_ms + (1 if spare_ms else 0)
    assert starts == [ms / 1000 for ms in range(at_ms, bound, every_ms)]


def test_plain_steps_keep_their_file_order_between_the_repetitions():
    schedule = [
        {"at_s": 100, "fault": "kill", "target": "followers", "as": "stale"},
        {"fault": "heal", "target": "@stale", "after": "after_s(5)"},  # joins the step above
        repeated(at_s=0, every_s=150, duration_s=10, fault="pause"),
        {"at_s": 200, "fault": "stop", "target": "node:3", "duration_s": 30},
    ]
    steps = schedule_for(one_cell(soak(schedule, duration_s=400)), 0)
    assert [(s.at_s, s.fault) for s in steps] == [
        (0, "pause"),
        (100, "kill"),
        (None, "heal"),
        (150, "pause"),
        (200, "stop"),
        (300, "pause"),
    ]


def test_the_expansion_is_what_spec_json_and_the_fault_class_read():
    steps = schedule_for(one_cell(soak([repeated(every_s=600)])), 0)
    assert [s.at_s for s in steps] == [60, 660, 1260, 1860, 2460, 3060]
    dumped = [s.model_dump(by_alias=True, exclude_none=True) for s in steps]
    assert all("every_s" not in d and d["duration_s"] == 20 for d in dumped)  # plain steps
    assert fault_class(steps) == "leader-kill"


def test_the_last_repetition_only_has_to_start_before_the_workload_ends():
    steps = schedule_for(one_cell(soak([repeated(at_s=0, every_s=100)], duration_s=290)), 0)
    assert [s.at_s for s in steps] == [0, 100, 200]  # the one at 200 is cut short at 290
    count = {"duration_s": None, "count": 29_000, "rate": 100}  # 290 s as count / rate
    assert schedule_for(one_cell(soak([repeated(at_s=0, every_s=100)], **count)), 0) == steps


def test_overlapping_repetitions_of_two_lines_run_one_after_the_other(tmp_path):
    """As for overlapping explicit steps: the nemesis runs steps in turn, so a repetition due
    while another line's is in force starts once that one is healed, and is healed on its
    own planned clock (cut short)."""
    schedule = [
        repeated(at_s=0, every_s=1, duration_s=0.4, target="node:1"),
        repeated(at_s=0.2, every_s=1, duration_s=0.4, target="node:2"),
    ]
    steps = schedule_for(one_cell(soak(schedule, duration_s=2)), 0)
    assert [(s.at_s, s.target) for s in steps] == [
        (0, "node:1"), (0.2, "node:2"), (1, "node:1"), (1.2, "node:2"),
    ]  # fmt: skip
    cluster = FakeCluster()
    nemesis, events = run(cluster, steps, tmp_path)
    assert nemesis.errors == []
    faults = [(e["type"], e["nodes"]) for e in events if "nodes" in e]
    start, end = EventType.FAULT_START, EventType.FAULT_END
    assert faults == [(start, [1]), (end, [1]), (start, [2]), (end, [2])] * 2
    assert [n.actions for n in cluster.nodes[:2]] == [["kill", "start"] * 2] * 2


# --- the generator's duty cycle -----------------------------------------------------------------


def test_without_a_duty_cycle_a_seed_gives_the_schedule_it_always_gave():
    (cell,) = expand(load_experiment(EXPERIMENTS / "nemesis-random.yaml"))
    steps = schedule_for(cell, 7)
    assert [(s.at_s, s.fault, s.target, s.duration_s) for s in steps] == [
        (4.696, "partition", "random", 9.207),
        (14.805, "lose-unsynced", "leader", 6.926),
        (22.448, "lose-unsynced", "follower", 4.3),
        (33.57, "pause", "follower", 4.726),
        (44.927, "torn-write", "leader", 11.58),
        (68.458, "torn-write", "leader", 8.617),
        (83.139, "loss", "leader", 8.453),
        (93.307, "reorder", "follower", 8.325),
        (111.785, "lose-unsynced", "follower", 4.824),
    ]


@pytest.mark.parametrize(
    ("generator", "fragments"),
    [
        ({"duty_cycle": 0}, ("faults.generate.duty_cycle", "greater than 0")),
        ({"duty_cycle": 1.5}, ("faults.generate.duty_cycle", "at most 1", "fraction")),
        ({"duty_cycle": "0.5"}, ("faults.generate.duty_cycle", "must be a number")),
        (
            {"duty_cycle": 0.5, "mean_interval_s": 10},
            ("faults.generate.duty_cycle", "not both", "sets the mean interval", "remove one"),
        ),
        ({}, ("faults.generate.mean_interval_s", "required", "or duty_cycle")),
        (
            {"duty_cycle": 1, "duration_s": [0.01, 0.01]},
            ("faults.generate.duty_cycle", "360,000 faults", "at most 100,000"),
        ),
        (
            {"mean_interval_s": 0.001, "duration_s": [0.01, 0.01]},
            ("faults.generate.mean_interval_s", "faults fit", "at most 100,000"),
        ),
    ],
)
def test_a_misused_duty_cycle_is_refused_naming_the_field_and_the_fix(generator, fragments):
    rejects(generated(**generator), *fragments)


@pytest.mark.parametrize("duty_cycle", [0.1, 0.3, 0.6, 0.9, 1.0])
def test_a_duty_cycle_keeps_a_fault_in_force_that_fraction_of_the_time(duty_cycle: float):
    """Over a fixed set of seeds, so it never flakes: 30 one-hour schedules of faults of
    2..8 s. The fraction of one run strays by about 0.01 (its count of faults varies), the
    mean of 30 by about 0.002, and the end of the workload cuts at most one fault."""
    cell = one_cell(generated(duty_cycle=duty_cycle))
    fractions = []
    for seed in range(30):
        steps = schedule_for(cell, seed)
        for before, after in itertools.pairwise(steps):
            assert after.at_s >= before.end_s - 1e-9  # one at a time: the durations add up
        fractions.append(sum(s.duration_s for s in steps) / 3600)
    assert abs(statistics.mean(fractions) - duty_cycle) < 0.02
    assert all(abs(fraction - duty_cycle) < 0.1 for fraction in fractions)


def test_a_full_duty_cycle_puts_the_faults_back_to_back():
    steps = schedule_for(one_cell(generated(duty_cycle=1.0)), 3)
    assert steps[0].at_s == 0
    assert all(abs(after.at_s - before.end_s) < 1e-9 for before, after in itertools.pairwise(steps))


# --- experiments/soak.yaml ----------------------------------------------------------------------


def test_the_soak_experiment_repeats_its_faults_for_an_hour_in_cp_and_ap():
    cells = expand(load_experiment(EXPERIMENTS / "soak.yaml"))
    assert [cell.name for cell in cells] == ["config=cp", "config=ap"]
    for cell in cells:
        assert cell.spec.workload.duration_s == 3600
        steps = schedule_for(cell, 0)
        assert all(s.end_s is not None and s.at_s < 3600 for s in steps)
        kinds = {s.fault for s in steps}
        assert kinds == {"kill", "pause", "partition"} and len(steps) == 12 + 12 + 6
        for before, after in itertools.pairwise(steps):
            assert after.at_s >= before.end_s  # the lines never overlap: each fault in full
    cp, ap = (cell_config(cell, schedule_for(cell, 0)) for cell in cells)
    assert (cp.acks, cp.min_insync_replicas, cp.unclean_leader_election) == ("all", 2, False)
    assert cp.enable_idempotence and cp.fault_class == "mixed"
    assert (ap.acks, ap.unclean_leader_election, ap.enable_idempotence) == ("1", True, False)


def test_spec_json_lists_the_repetitions_as_plain_steps(tmp_path):
    cp = expand(load_experiment(EXPERIMENTS / "soak.yaml"))[0]
    image = BrokerImage("kafka-chaos:4.3.1", "sha256:0", "4.3.1", "cached", 0.0)
    write_spec(resolve(Repetition(cp, 0, 42, tmp_path), image), {"started_at_us": 0})
    schedule = json.loads((tmp_path / layout.SPEC).read_text())["schedule"]
    assert len(schedule) == 30 and not any("every_s" in step for step in schedule)
    assert [(s["at_s"], s["fault"], s["target"], s["duration_s"]) for s in schedule[:4]] == [
        (60, "kill", "leader", 20),
        (135, "partition", "leader", 20),
        (210, "pause", "follower", 15),
        (360, "kill", "leader", 20),
    ]
