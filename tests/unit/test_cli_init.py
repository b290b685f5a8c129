"""`kafka-chaos init`: a starter file that validates as written, from any shipped experiment,
named after its file; refused without writing anything where it would overwrite or mislead."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.experiment.load import load_experiment
from harness.settings import load_settings
from kafka_chaos.cli import main
from kafka_chaos.commands.init import experiment_name

ROOT = load_settings().experiments_dir
# As `kafka-chaos list experiments` names them: known-bugs/... too.
SHIPPED = sorted(p.relative_to(ROOT).with_suffix("").as_posix() for p in ROOT.rglob("*.yaml"))


@pytest.mark.parametrize("source", SHIPPED)
def test_init_from_every_shipped_experiment_validates(tmp_path: Path, source: str) -> None:
    target = tmp_path / "My Trial.yaml"
    assert main(["init", str(target), "--from", source]) == 0
    experiment = load_experiment(target)
    assert experiment.name == "my-trial"
    assert "#" in target.read_text()  # the shipped file's comments come along
    assert main(["validate", str(target)]) == 0


def test_init_never_overwrites_and_names_the_fix(tmp_path: Path, capsys) -> None:
    target = tmp_path / "mine.yaml"
    target.write_text("my own notes\n")
    assert main(["init", str(target)]) == 2
    assert target.read_text() == "my own notes\n"
    assert "exists: give another file name" in capsys.readouterr().err


def test_an_unknown_source_lists_the_shipped_ones_and_writes_nothing(tmp_path, capsys) -> None:
    target = tmp_path / "x.yaml"
    assert main(["init", str(target), "--from", "nope"]) == 2
    assert not target.exists()
    assert "choose from" in capsys.readouterr().err and "default" in SHIPPED


@pytest.mark.parametrize(
    ("stem", "name"),
    [("Trial 1", "trial-1"), ("a.b.c", "a-b-c"), ("__x__", "__x__"), ("!!", "experiment")],
)
def test_the_name_comes_from_the_file_name(stem: str, name: str) -> None:
    assert experiment_name(Path(f"{stem}.yaml")) == name


def test_validate_json_says_valid_with_the_cells_or_the_problems(tmp_path: Path, capsys) -> None:
    import json

    good = tmp_path / "good.yaml"
    assert main(["init", str(good)]) == 0
    capsys.readouterr()
    assert main(["validate", str(good), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["valid"] is True and document["name"] == "good"
    assert len(document["cells"]) == 6 and document["estimated_seconds"] > 0
    bad = tmp_path / "bad.yaml"
    bad.write_text(good.read_text().replace("  rate: ", "  rate: -", 1))
    assert main(["validate", str(bad), "--json"]) == 2
    document = json.loads(capsys.readouterr().out)
    assert document["valid"] is False
    assert [p.split(":")[0] for p in document["problems"]] == ["workload.rate"]
