"""Command-line overrides are validated like the file's own values; `validate` estimates time."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.experiment.load import load_experiment, override
from harness.experiment.matrix import expand
from harness.experiment.plan import REPETITION_OVERHEAD_S, schedule_for, wall_time
from harness.experiment.problems import SpecError
from harness.settings import REPO_ROOT
from kafka_chaos.cli import main

DEFAULT = REPO_ROOT / "experiments" / "default.yaml"


@pytest.fixture
def no_engine(monkeypatch):
    """Fail the test if the command gets as far as looking for a Docker engine."""

    def refuse() -> None:
        raise AssertionError("an invalid override must be refused before Docker is touched")

    monkeypatch.setattr("harness.platform.engine.ensure_engine", refuse)


@pytest.mark.parametrize(
    ("flags", "fragments"),
    [
        (["--repetitions", "-1"], ("repetitions", "greater than or equal to 1", "--repetitions")),
        (["--repetitions", "0"], ("repetitions", "(set by --repetitions)")),
        (["--repetitions", "20000"], ("at most 10,000", "(set by --repetitions)")),
        (["--kafka-version", "banana"], ("kafka.version", "Kafka release", "--kafka-version")),
        (["--image", ""], ("kafka.image", "empty", "(set by --image)")),
        (["--duration-s", "0"], ("workload.duration_s", "(set by --duration-s)")),
        (["--seed", str(2**63)], ("seed", "(set by --seed)")),
    ],
)
def test_a_bad_override_exits_2_before_anything_starts(no_engine, capsys, flags, fragments):
    assert main(["run", str(DEFAULT), *flags]) == 2
    err = capsys.readouterr().err
    for fragment in fragments:
        assert fragment in err, f"{fragment!r} not in:\n{err}"


def test_an_override_is_applied_and_keeps_the_source():
    experiment = override(load_experiment(DEFAULT), "repetitions", 3, "--repetitions")
    assert experiment.repetitions == 3
    assert experiment._source == str(DEFAULT)
    assert len(expand(experiment)) == 6  # the matrix survives the round trip


def test_a_shorter_soak_keeps_its_repeated_faults_inside_the_new_duration():
    soak = REPO_ROOT / "experiments" / "soak.yaml"
    short = override(load_experiment(soak), "workload.duration_s", 600, "--duration-s")
    (cell, *_) = expand(short)
    assert cell.spec.workload.duration_s == 600
    steps = schedule_for(cell, short.seed)
    # kill at 60 and 360, cut-off at 135, pause at 210 and 510: every start before 600 s
    assert sorted((s.at_s, s.fault) for s in steps) == [
        (60, "kill"),
        (135, "partition"),
        (210, "pause"),
        (360, "kill"),
        (510, "pause"),
    ]


def test_a_new_seed_draws_a_new_random_schedule():
    jepsen = REPO_ROOT / "experiments" / "jepsen-2024-transactions.yaml"
    experiment = load_experiment(jepsen)
    reseeded = override(experiment, "seed", 7, "--seed")
    assert reseeded.seed == 7
    (cell, *_) = expand(experiment)
    (new_cell, *_) = expand(reseeded)
    assert schedule_for(cell, experiment.seed) != schedule_for(new_cell, reseeded.seed)


def test_an_override_names_its_origin():
    with pytest.raises(SpecError, match=r"repetitions: .* \(set by --repetitions\)"):
        override(load_experiment(DEFAULT), "repetitions", True, "--repetitions")


def test_validate_prints_the_estimated_wall_time_and_its_assumption(capsys):
    assert main(["validate", str(DEFAULT)]) == 0
    out = capsys.readouterr().out
    # 6 cells x 1 repetition x (35 s workload + 20 s per repetition) = 330 s
    assert "estimated wall time: 5 min 30 s for 6 repetitions" in out
    assert "~10 s to start a fresh cluster" in out and "read-back" in out


def test_wall_time_adds_each_cells_workload_and_the_overhead(tmp_path: Path):
    path = tmp_path / "two.yaml"
    path.write_text(
        "name: two\nworkload: {rate: 100, duration_s: 30}\nrepetitions: 3\n"
        "matrix: {workload.duration_s: [30, 90]}\n"
    )
    experiment = load_experiment(path)
    estimate = wall_time(expand(experiment), experiment.repetitions)
    assert estimate.repetitions == 6
    assert estimate.seconds == 3 * (30 + 90) + 6 * REPETITION_OVERHEAD_S
    assert estimate.unbounded_cells == ()


def test_a_workload_without_time_bound_is_named_not_guessed(tmp_path: Path, capsys):
    path = tmp_path / "count.yaml"
    path.write_text("name: count\nworkload: {rate: null, duration_s: null, count: 1000}\n")
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"estimated wall time: {REPETITION_OVERHEAD_S:.0f} s for 1 repetition" in out
    assert "not counted: the workload of 1 cells (count without rate" in out
