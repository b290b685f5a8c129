"""A race the whole schedule's replays meet too rarely: each fault alone, repeated over the
workload (harness/experiment/shrink.py `repeated`), and the command that asks them when the
whole does not reproduce (kafka_chaos/commands/shrink.py)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from harness.experiment.load import parse_experiment
from harness.experiment.model import FaultStep
from harness.experiment.shrink import MIN_DURATION_S, REST_S, repeated, unbound
from harness.experiment.soak import expand_repeats
from kafka_chaos.cli import main
from kafka_chaos.commands import shrink
from tests.unit.test_shrink_command import judged, run_spec

seconds = st.floats(0, 600, allow_nan=False).map(lambda s: round(s, 3))


@given(
    st.lists(st.tuples(seconds, st.floats(0.1, 300).map(lambda s: round(s, 3))), max_size=5),
    st.floats(10, 900).map(lambda s: round(s, 3)),
    st.integers(2, 5),
)
def test_each_fault_repeats_the_times_asked_within_the_workload(
    faults: list[tuple[float, float]], horizon_s: float, times: int
) -> None:
    """Oracle: a fault is made to repeat when its share of the workload leaves it at least
    MIN_DURATION_S after REST_S; its repetitions are then exactly `times`, the first no later
    than the fault was, each held at most as long, healed REST_S before the next, the last
    healed by the workload's end (to the ms); other faults are left out, order kept."""
    timed = sorted(faults)  # each fault told apart by its partition
    steps = [FaultStep(at_s=a, fault="kill", target="leader", duration_s=d, partition=i)
             for i, (a, d) in enumerate(timed)]  # fmt: skip
    share = horizon_s / times
    kept = [s for s in steps if min(s.duration_s or 0, share - REST_S) >= MIN_DURATION_S + 1e-3]
    made = repeated(steps, horizon_s, times)
    fit = [s for s in steps if share + 1e-3 - REST_S >= MIN_DURATION_S]
    assert len(kept) <= len(made) <= len(fit)
    assert [one.partition for one in made] == sorted(one.partition for one in made)
    for one in made:
        original = steps[int(one.partition)]
        assert (one.at_s or 0) <= (original.at_s or 0)
        assert one.duration_s is not None and one.duration_s <= (original.duration_s or 0)
        plain = expand_repeats([one], horizon_s)
        assert len(plain) == times
        assert one.duration_s >= MIN_DURATION_S
        for before, after in itertools.pairwise(plain):
            assert (before.at_s or 0) + one.duration_s + REST_S <= (after.at_s or 0) + 1e-3
        assert (plain[-1].at_s or 0) + one.duration_s <= horizon_s + times * 1e-3
        assert original.fault == one.fault and not one.after and one.as_ is None


def test_a_fault_that_cannot_repeat_is_left_out() -> None:
    """Bound to a name, waiting for a state, a heal, without a duration, or too long for its
    share: none repeats; a plain timed fault does, from its own time or earlier."""
    steps = [
        FaultStep(at_s=1, fault="kill", target="leader", as_="x"),
        FaultStep(at_s=2, fault="heal", target="@x"),
        FaultStep(at_s=3, fault="pause", target="leader", duration_s=5, after="isr_size(0) == 1"),
        FaultStep(at_s=4, fault="kill", target="follower"),
        FaultStep(at_s=80, fault="slow-disk", target="random", duration_s=51),
    ]
    (one,) = repeated(steps, 150, 3)
    assert (one.fault, one.at_s, one.every_s, one.duration_s) == ("slow-disk", 10, 50, 40)
    (short,) = repeated(steps, 60, 3)  # 20 s shares leave the fault 10 s, the rest 10 s
    assert (short.at_s, short.every_s, short.duration_s) == (10, 20, 10)
    assert repeated(steps, 30, 3) == []  # 10 s shares leave nothing after the rest


@given(
    st.lists(
        st.tuples(seconds, st.floats(0.5, 120).map(lambda s: round(s, 3)), st.booleans()),
        max_size=6,
    )
)
def test_a_fault_bound_only_to_its_heal_is_written_timed(faults: list) -> None:
    """Oracle: a fault drawn to overlap (bound to g<i>, healed by a timed step aimed at @g<i>)
    becomes one step of duration_s heal - start, without name or heal; one a later step also
    reads (a kill aimed at @g<i>) stays as it was, with its heal and that reader."""
    steps: list[FaultStep] = []
    for i, (at, held, read) in enumerate(faults):
        steps.append(FaultStep(at_s=at, fault="pause", target="leader", partition=i, as_=f"g{i}"))
        if read:
            steps.append(FaultStep(at_s=at, fault="kill", target=f"@g{i}", duration_s=1))
        steps.append(FaultStep(at_s=round(at + held, 3), fault="heal", target=f"@g{i}"))
    made = unbound(steps)
    for i, (at, held, read) in enumerate(faults):
        mine = [
            s for s in made if (s.partition == i and s.fault == "pause") or s.target == f"@g{i}"
        ]
        if read:
            assert [s.fault for s in mine] == ["pause", "kill", "heal"] and mine[0].as_ == f"g{i}"
        else:
            assert mine == [FaultStep(at_s=at, fault="pause", target="leader", partition=i,
                                      duration_s=round(round(at + held, 3) - at, 3))]  # fmt: skip
    assert len(made) == len(steps) - sum(1 for _, _, read in faults if not read)


def test_a_drawn_overlapping_fault_is_asked_repeated() -> None:
    """A bound fault and its heal, as an overlapping schedule writes them, repeat as one."""
    steps = [
        FaultStep(at_s=61.5, fault="delay", target="txn-coordinator", as_="g3",
                  params={"delay_ms": 2194, "requests": ["EndTxn"], "direction": "in",
                          "from": ["clients"]}),
        FaultStep(at_s=82.9, fault="heal", target="@g3"),
    ]  # fmt: skip
    assert repeated(steps, 150, 3) == []
    (one,) = repeated(unbound(steps), 150, 3)
    assert (one.fault, one.at_s, one.every_s, one.duration_s, one.as_) == (
        "delay", 28.6, 50, 21.4, None)  # fmt: skip


def test_the_repeated_fault_validates_as_a_schedule_step() -> None:
    """The step written to the shrunk file passes the experiment rules for repeated steps."""
    step = FaultStep(at_s=81.5, fault="slow-disk", target="random", duration_s=51)
    (one,) = repeated([step], 150, 3)
    document = {
        "name": "x",
        "workload": {"rate": 10, "duration_s": 150},
        "faults": {"schedule": [one.model_dump(by_alias=True, exclude_none=True)]},
    }
    assert parse_experiment(document).faults.schedule == [one]


def test_a_race_the_whole_schedule_misses_is_written_as_its_fault_repeated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole schedule and the empty one do not reproduce; each fault is then asked alone,
    repeated, in order, and the first that reproduces is the file: one step with every_s."""
    from harness.experiment.load import load_experiment
    from harness.experiment.matrix import expand
    from harness.settings import REPO_ROOT

    cell = expand(load_experiment(REPO_ROOT / "experiments" / "nemesis-generic.yaml"))[0]
    spec = run_spec(cell, 3)
    spec.write(tmp_path)
    monkeypatch.setattr(shrink, "judge_run", lambda run_dir: judged("VIOLATION", loss=3, lost=3))
    monkeypatch.setattr(shrink, "_image", lambda *a: object())
    asked: list[tuple[FaultStep, ...]] = []

    def trial(self: object, schedule: tuple[FaultStep, ...]) -> bool:
        asked.append(schedule)  # only the second fault asked alone, repeated, fails
        alone = [s[0] for s in asked if len(s) == 1 and s[0].repeats]
        return bool(alone) and schedule == (alone[-1],) and alone[-1] != alone[0]

    monkeypatch.setattr(shrink._Replays, "trial", trial)
    out = tmp_path / "shrunk.yaml"
    assert main(["shrink", str(tmp_path), "--out", str(out), "--budget", "40"]) == 0

    assert asked[:4] == [(), (), asked[2], asked[2]] and len(asked[2]) > 1  # empty, whole
    firsts = [s[0] for s in asked[4:]]
    assert all(len(s) == 1 and s[0].repeats for s in asked[4:])
    assert firsts == [firsts[0]] * 2 + [firsts[-1]] * 2  # two misses, then two hits
    written = yaml.safe_load(out.read_text())
    (step,) = written["faults"]["schedule"]
    assert step["every_s"] == firsts[-1].every_s and "after" not in step
    assert "repeated every" in out.read_text().splitlines()[1]


def test_repeat_1_asks_no_fault_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.experiment.load import load_experiment
    from harness.experiment.matrix import expand
    from harness.settings import REPO_ROOT

    cell = expand(load_experiment(REPO_ROOT / "experiments" / "nemesis-generic.yaml"))[0]
    run_spec(cell, 3).write(tmp_path)
    monkeypatch.setattr(shrink, "judge_run", lambda run_dir: judged("VIOLATION", loss=3, lost=3))
    monkeypatch.setattr(shrink, "_image", lambda *a: object())
    asked: list[tuple[FaultStep, ...]] = []

    def trial(self: object, schedule: tuple[FaultStep, ...]) -> bool:
        asked.append(schedule)
        return False

    monkeypatch.setattr(shrink._Replays, "trial", trial)
    assert main(["shrink", str(tmp_path), "--repeat", "1"]) == 2
    assert len(asked) == 4 and not any(step.repeats for s in asked for step in s)


def test_a_fault_the_budget_ran_out_on_after_it_reproduced_is_written_as_a_lead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The budget ends while a fault repeated alone has reproduced once of the two needed: the
    command still fails (exit 2), but writes that fault, with its 1 of 1, where it says."""
    from harness.experiment.load import load_experiment
    from harness.experiment.matrix import expand
    from harness.settings import REPO_ROOT

    cell = expand(load_experiment(REPO_ROOT / "experiments" / "nemesis-generic.yaml"))[0]
    run_spec(cell, 3).write(tmp_path)
    monkeypatch.setattr(shrink, "judge_run", lambda run_dir: judged("VIOLATION", loss=3, lost=3))
    monkeypatch.setattr(shrink, "_image", lambda *a: object())

    def trial(self: object, schedule: tuple[FaultStep, ...]) -> bool:
        return len(schedule) == 1 and schedule[0].repeats  # every fault alone, repeated, hits

    monkeypatch.setattr(shrink._Replays, "trial", trial)
    # 2 empty, 2 whole, then 1 of the first fault's replays: the budget ends at 5.
    assert main(["shrink", str(tmp_path), "--budget", "5"]) == 2
    lead = tmp_path / "lead.yaml"
    assert f"written to {lead}" in capsys.readouterr().err
    assert "reproduced in 1 of 1 replays (needed 2 of 3)" in lead.read_text()
    (step,) = yaml.safe_load(lead.read_text())["faults"]["schedule"]
    assert step["every_s"] > 0


def _generic_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[FaultStep, ...]:
    """A generic nemesis' run judged VIOLATION in tmp_path, the replays' image stubbed; its
    schedule."""
    from harness.experiment.from_run import steps_of_run
    from harness.experiment.load import load_experiment
    from harness.experiment.matrix import expand
    from harness.rundir.spec import RunSpec
    from harness.settings import REPO_ROOT

    cell = expand(load_experiment(REPO_ROOT / "experiments" / "nemesis-generic.yaml"))[0]
    run_spec(cell, 3).write(tmp_path)
    monkeypatch.setattr(shrink, "judge_run", lambda run_dir: judged("VIOLATION", loss=3, lost=3))
    monkeypatch.setattr(shrink, "_image", lambda *a: object())
    return tuple(steps_of_run(RunSpec.read(tmp_path)))


def test_alone_asks_faults_repeated_straight_after_the_empty_schedule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--alone: the empty schedule, then the faults alone, repeated; never the whole schedule
    nor a subset of it, even though the whole would reproduce."""
    _generic_run(tmp_path, monkeypatch)
    asked: list[tuple[FaultStep, ...]] = []

    def trial(self: object, schedule: tuple[FaultStep, ...]) -> bool:
        asked.append(schedule)
        return len(schedule) > 1 or (len(asked) > 4 and bool(schedule))

    monkeypatch.setattr(shrink._Replays, "trial", trial)
    out = tmp_path / "shrunk.yaml"
    assert main(["shrink", str(tmp_path), "--alone", "--out", str(out)]) == 0
    assert asked[:2] == [(), ()]
    assert all(len(s) == 1 and s[0].repeats for s in asked[2:])
    (step,) = yaml.safe_load(out.read_text())["faults"]["schedule"]
    assert step["every_s"] > 0


def _asked_never_reproducing(monkeypatch: pytest.MonkeyPatch) -> list[tuple[FaultStep, ...]]:
    """Replays stubbed to never reproduce; the schedules they were asked, in order."""
    asked: list[tuple[FaultStep, ...]] = []

    def trial(self: object, schedule: tuple[FaultStep, ...]) -> bool:
        asked.append(schedule)
        return False

    monkeypatch.setattr(shrink._Replays, "trial", trial)
    return asked


def test_only_asks_the_faults_its_glob_matches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--only GLOB asks alone, repeated, only the faults whose FAULT@TARGET matches, in order;
    a glob matching none is refused with the run's faults named, before any replay."""
    steps = _generic_run(tmp_path, monkeypatch)
    asked = _asked_never_reproducing(monkeypatch)
    first = next(s for s in steps if not s.heals and repeated([s], 150, 3))
    glob = f"{first.fault}@*"
    assert main(["shrink", str(tmp_path), "--only", glob, "--budget", "40"]) == 2
    horizon = shrink_horizon(tmp_path)
    matching = [s for s in repeated(unbound(steps), horizon, 3) if s.fault == first.fault]
    alone = [s[0] for s in asked[2:]]
    assert asked[:2] == [(), ()] and alone == [one for one in matching for _ in range(2)]
    assert f"any fault of it matching {glob} alone" in capsys.readouterr().err

    asked.clear()
    monkeypatch.setattr(shrink, "_image", lambda *a: pytest.fail("built before the refusal"))
    assert main(["shrink", str(tmp_path), "--only", "no-such-fault@*"]) == 2
    assert asked == [] and "its faults: " in capsys.readouterr().err


def shrink_horizon(run_dir: Path) -> float:
    """The workload's length of the run in `run_dir`, as the command computes it."""
    from harness.experiment.from_run import cell_of_run
    from harness.experiment.model import workload_duration_s
    from harness.rundir.spec import RunSpec

    return workload_duration_s(cell_of_run(RunSpec.read(run_dir)).spec.workload) or 0.0


@pytest.mark.parametrize("flag", [["--alone"], ["--only", "kill@*"]])
def test_alone_without_repeats_is_refused(tmp_path: Path, flag: list[str]) -> None:
    assert main(["shrink", str(tmp_path), *flag, "--repeat", "1"]) == 2
