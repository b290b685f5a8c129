"""Errors a user easily causes in init, validate, run and report: each exits 2 with one line on
stderr naming the problem and the fix, no traceback, and before Java, Spark or Docker is
touched."""

from __future__ import annotations

import pytest

from harness.settings import REPO_ROOT
from kafka_chaos.cli import main

QUICK = str(REPO_ROOT / "experiments" / "quick.yaml")


@pytest.fixture
def nothing_starts(monkeypatch):
    """Fail the test if the command gets as far as Java, Spark or a Docker engine."""

    def refuse(*args, **kwargs):
        raise AssertionError("the input must be refused before Java, Spark or Docker")

    monkeypatch.setattr("kafka_chaos.commands.report.require_java", refuse)
    monkeypatch.setattr("kafka_chaos.commands.run.require_java", refuse)
    monkeypatch.setattr("kafka_chaos.commands.reconcile.require_java", refuse)
    monkeypatch.setattr("harness.platform.engine.ensure_engine", refuse)


def one_line(capsys) -> str:
    """The command's stderr, asserted to be one line with no traceback."""
    err = capsys.readouterr().err
    assert "Traceback" not in err and "details:" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    return err


def test_init_into_a_missing_folder_says_to_create_it(tmp_path, capsys):
    target = tmp_path / "sub" / "dir" / "x.yaml"
    assert main(["init", str(target)]) == 2
    assert f"the folder {target.parent} does not exist: create it first (mkdir -p" in one_line(
        capsys
    )
    assert not target.parent.exists()


@pytest.mark.parametrize("command", ["validate", "run"])
def test_an_unknown_set_path_names_the_nearest_field(nothing_starts, capsys, command):
    assert main([command, QUICK, "--set", "workload.rat=500"]) == 2
    err = one_line(capsys)
    assert "'workload.rat' does not exist" in err and "did you mean 'workload.rate'?" in err
    assert "(set by --set" in err


def test_a_set_value_that_is_not_yaml_says_to_quote_it(capsys):
    assert main(["validate", QUICK, "--set", "producer.config.x=[a"]) == 2
    assert "the value is not YAML" in (err := one_line(capsys)) and "quote it as text" in err


def test_the_name_and_matrix_cannot_be_set(capsys):
    assert main(["validate", QUICK, "--set", "name=other"]) == 2
    assert "'name' cannot be overridden (by the matrix or --set): edit the file" in one_line(capsys)


@pytest.mark.parametrize("given", ["known-bugs/bit-flip", "experiments/known-bugs/bit-flip.yaml"])
def test_a_known_bug_experiment_is_named_like_the_others(tmp_path, monkeypatch, capsys, given):
    monkeypatch.chdir(tmp_path)
    assert main(["validate", given]) == 0
    assert "known-bugs/bit-flip.yaml: valid" in capsys.readouterr().out
    assert main(["init", "mine.yaml", "--from", given]) == 0
    assert "from known-bugs/bit-flip.yaml" in capsys.readouterr().out


def test_init_suggests_the_nearest_shipped_experiment_known_bugs_included(tmp_path, capsys):
    assert main(["init", str(tmp_path / "x.yaml"), "--from", "bitflip"]) == 2
    err = one_line(capsys)
    assert "did you mean 'known-bugs/bit-flip'?" in err and "known-bugs/kafka-fsync" in err
