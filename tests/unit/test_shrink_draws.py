"""`kafka-chaos shrink --draws`: each of the generic nemesis' draws asked alone, repeated as a
whole over the workload (harness/experiment/shrink.py `repeated_draw`, `first_round`), and the
command that asks them (kafka_chaos/commands/shrink.py)."""

from __future__ import annotations

import fnmatch
import math
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from harness.experiment.model import FaultStep
from harness.experiment.shrink import MIN_DURATION_S, REST_S, repeated_draw, unbound
from harness.experiment.soak import expand_repeats
from kafka_chaos.cli import main
from kafka_chaos.commands import shrink
from tests.unit.test_generic_nemesis import SLOW, cells, schedule_of
from tests.unit.test_shrink_command import judged, run_spec
from tests.unit.test_shrink_repeated import _asked_never_reproducing, seconds, shrink_horizon


def _cascade_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[FaultStep, ...]:
    """A generic nemesis' run with a cascade and other faults, judged VIOLATION in tmp_path,
    the replays' image stubbed; its schedule."""
    from harness.experiment.from_run import steps_of_run
    from harness.experiment.load import parse_experiment
    from harness.experiment.matrix import expand
    from harness.rundir.spec import RunSpec
    from tests.unit.test_generic_nemesis import generic_doc

    (cell,) = expand(parse_experiment(generic_doc(150, 4, ["cascade", "process"])))
    for seed in range(50):
        spec = run_spec(cell, seed)
        steps = tuple(steps_of_run(spec))
        named = {s.as_ or "" for s in steps}
        if any(n.startswith("c") for n in named) and any(n.startswith("g") for n in named):
            break
    spec.write(tmp_path)
    monkeypatch.setattr(shrink, "judge_run", lambda run_dir: judged("VIOLATION", loss=3, lost=3))
    monkeypatch.setattr(shrink, "_image", lambda *a: object())
    return tuple(steps_of_run(RunSpec.read(tmp_path)))


def draws_oracle(steps: tuple[FaultStep, ...]) -> list[tuple[FaultStep, ...]]:
    """Each draw's steps in schedule order: a cascade's members (`c<draw>_<j>`) and their heals
    together, any other bound fault (`g<draw>`) with its heal, an unbound step alone."""
    key = {}
    for i, step in enumerate(steps):
        name = step.as_ or (step.target[1:] if step.heals and step.target.startswith("@") else "")
        key[i] = name.split("_")[0] if name.startswith("c") else name or f"step {i}"
    order = list(dict.fromkeys(key[i] for i in range(len(steps))))
    return [tuple(s for i, s in enumerate(steps) if key[i] == k) for k in order]


def test_draws_asks_each_draw_alone_and_writes_the_cascade_that_reproduces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--draws --repeat 1: the empty schedule, then each draw alone at its own times, once (a
    cascade's members and heals together), in order; the first that reproduces is the file,
    its steps as they ran; the whole schedule and its subsets are never asked."""
    steps = _cascade_run(tmp_path, monkeypatch)
    draws = draws_oracle(steps)
    cascade = next(d for d in draws if (d[0].as_ or "").startswith("c"))
    asked: list[tuple[FaultStep, ...]] = []

    def trial(self: object, schedule: tuple[FaultStep, ...]) -> bool:
        asked.append(schedule)
        return schedule == cascade

    monkeypatch.setattr(shrink._Replays, "trial", trial)
    out = tmp_path / "shrunk.yaml"
    args = ["shrink", str(tmp_path), "--draws", "--repeat", "1", "--out", str(out)]
    assert main([*args, "--budget", "60"]) == 0
    assert "(the first draw that reproduced alone)" in capsys.readouterr().out
    before = draws[: draws.index(cascade)]
    assert asked == [(), ()] + [d for d in before for _ in range(2)] + [cascade] * 2
    written = yaml.safe_load(out.read_text())["faults"]["schedule"]
    assert [FaultStep.model_validate(s) for s in written] == list(cascade)
    assert not any(s.repeats for s in cascade) and len(cascade) >= 4  # 2+ faults, 2+ heals


def test_draws_with_only_asks_the_draws_with_a_matching_fault(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--draws --only GLOB (--repeat 1) asks only the draws one of whose faults matches; none
    reproducing, it names what it asked and exits 2. --draws with --alone is refused."""
    steps = _cascade_run(tmp_path, monkeypatch)
    asked = _asked_never_reproducing(monkeypatch)
    cascade = next(d for d in draws_oracle(steps) if (d[0].as_ or "").startswith("c"))
    glob = f"{cascade[-1].fault}@{cascade[-1].target}" if not cascade[-1].heals else "*@leader"
    matching = [
        d for d in draws_oracle(steps)
        if any(fnmatch.fnmatchcase(f"{s.fault}@{s.target}", glob) for s in d if not s.heals)
    ]  # fmt: skip
    args = ["shrink", str(tmp_path), "--draws", "--repeat", "1", "--only", glob, "--budget", "60"]
    assert main(args) == 2
    assert asked == [(), ()] + [d for d in matching for _ in range(2)]
    err = capsys.readouterr().err
    assert f"any draw of it with a fault matching {glob} alone" in err
    assert main(["shrink", str(tmp_path), "--draws", "--alone"]) == 2
    assert "give one" in capsys.readouterr().err


@SLOW
@given(cells(), st.integers(0, 2**32))
def test_drawn_units_are_the_nemesis_draws(doc: dict, seed: int) -> None:
    """On generated cells and seeds: drawn_units groups a schedule's steps as the oracle reads
    its draws from the names the nemesis bound them to, every position once."""
    from harness.experiment.shrink import drawn_units

    steps = tuple(schedule_of(doc, seed))
    groups = [tuple(steps[i] for i in unit) for unit in drawn_units(steps)]
    assert groups == draws_oracle(steps)
    assert sorted(i for unit in drawn_units(steps) for i in unit) == list(range(len(steps)))


def test_draws_are_asked_repeated_with_their_faults_distances_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--draws (--repeat 3 by default): after the empty schedule, each draw that can repeat,
    timed (`unbound`) and repeated as a whole (`repeated_draw`), in order; a race a cascade
    sets off gets three chances in one replay, its faults in force at once in each."""
    steps = _cascade_run(tmp_path, monkeypatch)
    asked = _asked_never_reproducing(monkeypatch)
    horizon = shrink_horizon(tmp_path)
    made = [tuple(repeated_draw(unbound(d), horizon, 3)) for d in draws_oracle(steps)]
    expected = [d for d in made if d]
    cascades = [d for d in expected if any(s.heals for s in d)]
    assert cascades  # a cascade's members, bound in each round and healed by name
    assert main(["shrink", str(tmp_path), "--draws", "--budget", "90"]) == 2
    assert asked == [(), ()] + [d for d in expected for _ in range(2)]
    for d in cascades:
        assert not any(s.repeats for s in d)
        assert {s.as_[: s.as_.index("_")] for s in d if s.as_} == {"c0", "c1", "c2"}


def rounds_oracle(
    faults: list[tuple[float, float]], horizon_s: float, times: int
) -> list[tuple[int, float, float]] | None:
    """(fault index, start, duration) of every round of a draw of faults (at, duration) in
    time order, or None when it cannot repeat: every fault cut to what is left of its round
    after its distance from the draw's first and REST_S, at least MIN_DURATION_S; rounds
    the workload's share apart (to the ms), the first no later than the draw, its end no later
    than the share."""
    every = math.ceil(horizon_s / times * 1000) / 1000
    first = min(a for a, _ in faults)
    held = [min(d, every - REST_S - (a - first)) for a, d in faults]
    if min(held) < MIN_DURATION_S:
        return None
    start = max(
        0.0, min(first, every - max(a - first + h for (a, _), h in zip(faults, held, strict=True)))
    )
    made = [
        (i, round(round(start + a - first, 3) + k * every, 3), round(h, 3))
        for k in range(times)
        for i, ((a, _), h) in enumerate(zip(faults, held, strict=True))
    ]
    return sorted(made, key=lambda m: (m[1], m[0]))


# A draw of 1 to 3 faults (at, duration), and a workload's length, for the properties below.
DRAWN = st.lists(st.tuples(seconds, st.floats(0.1, 120).map(lambda s: round(s, 3))), min_size=1,
                 max_size=3).map(sorted)  # fmt: skip
HORIZONS = st.floats(10, 900).map(lambda s: round(s, 3))


def kill_draw(faults: list[tuple[float, float]]) -> list[FaultStep]:
    """A draw of kills at `faults`' times and durations, the i-th on partition i."""
    return [FaultStep(at_s=a, fault="kill", target="leader", duration_s=d, partition=i)
            for i, (a, d) in enumerate(faults)]  # fmt: skip


@given(DRAWN, HORIZONS, st.integers(2, 5))
def test_a_draw_repeats_as_a_whole_with_its_distances_kept(
    faults: list[tuple[float, float]], horizon_s: float, times: int
) -> None:
    """Against rounds_oracle: one fault repeats as one step (every_s); several are written out
    round by round, each bound to a name and healed by a heal step, which read back (unbound)
    are the oracle's rounds; each round healed before the next starts, the last by the end."""
    draw = kill_draw(faults)
    expected = rounds_oracle(faults, horizon_s, times)
    made = repeated_draw(draw, horizon_s, times)
    if expected is None:
        assert made == []
        return
    if len(draw) == 1:
        (one,) = made
        (plain,) = expand_repeats([one], horizon_s)[:1]
        assert [(0, plain.at_s, one.duration_s)] == expected[:1]
        assert len(expand_repeats([one], horizon_s)) == times
        return
    assert not any(s.repeats for s in made)
    timed = unbound(made)
    got = sorted(
        ((int(s.partition), s.at_s, s.duration_s) for s in timed), key=lambda m: (m[1], m[0])
    )
    assert got == expected
    ends = [a + d for _, a, d in got]
    assert max(ends) <= horizon_s + times * 1e-3
    expand_repeats(made, horizon_s)  # a valid schedule as written


@given(DRAWN, HORIZONS, st.integers(1, 5))
def test_the_first_round_of_a_repeated_draw_is_the_oracles_first(
    faults: list[tuple[float, float]], horizon_s: float, times: int
) -> None:
    """Against rounds_oracle: first_round of a draw repeated `times` times holds the draw's
    faults once, at the oracle's first round's times and durations (a repeating step once, no
    every_s); None for a schedule of one round (times 1, or one cascade at its own times)."""
    from harness.experiment.shrink import first_round

    draw = kill_draw(faults)
    expected = rounds_oracle(faults, horizon_s, times)
    made = repeated_draw(draw, horizon_s, times)
    if expected is None:
        return
    once = first_round(made)
    if times == 1 and len(draw) > 1:
        assert once is None
        return
    assert once is not None and not any(s.repeats for s in once)
    got = sorted(((int(s.partition), s.at_s, s.duration_s) for s in unbound(once)),
                 key=lambda m: (m[1], m[0]))  # fmt: skip
    assert got == sorted(expected[: len(draw)], key=lambda m: (m[1], m[0]))
    assert first_round(once) is None


def test_a_repeated_draw_that_reproduces_is_asked_once_and_its_round_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--draws: the first repeated cascade that reproduces is asked again as its first round
    alone; that round reproducing, the file holds its faults once; not reproducing, the
    repeated draw is the file."""
    from harness.experiment.shrink import first_round

    steps = _cascade_run(tmp_path, monkeypatch)
    horizon = shrink_horizon(tmp_path)
    made = [tuple(repeated_draw(unbound(d), horizon, 3)) for d in draws_oracle(steps)]
    cascade = next(d for d in made if any(s.heals for s in d))
    once = first_round(cascade)
    assert once is not None and len(once) == len(cascade) // 3
    out = tmp_path / "shrunk.yaml"
    asked: list[tuple[FaultStep, ...]] = []
    for round_reproduces, written in ((True, once), (False, cascade)):
        asked.clear()

        def trial(self: object, schedule: tuple[FaultStep, ...], hit=round_reproduces) -> bool:
            asked.append(schedule)
            return schedule == cascade or (hit and schedule == once)

        monkeypatch.setattr(shrink._Replays, "trial", trial)
        assert main(["shrink", str(tmp_path), "--draws", "--budget", "90", "--out", str(out)]) == 0
        assert asked[-2:] == [once, once] and cascade in asked
        schedule = yaml.safe_load(out.read_text())["faults"]["schedule"]
        assert [FaultStep.model_validate(s) for s in schedule] == list(written)
        assert "asking its first round alone" in capsys.readouterr().err
