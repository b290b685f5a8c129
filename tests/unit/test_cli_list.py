"""`kafka-chaos list`: every fault with every param, every target, every shipped experiment,
the releases; as text and as JSON, from the registries validation uses."""

from __future__ import annotations

import json

import pytest

from harness.chaos.faults import FAULT_TYPES
from harness.experiment.fields import TARGET_ROLES
from harness.settings import load_settings
from kafka_chaos.cli import main


def listed(capsys: pytest.CaptureFixture[str], what: str) -> dict:
    assert main(["list", what, "--json"]) == 0
    return json.loads(capsys.readouterr().out)[what]


def test_list_faults_names_every_fault_and_every_param_a_step_accepts(capsys) -> None:
    entries = {entry["name"]: entry for entry in listed(capsys, "faults")}
    assert list(entries) == list(FAULT_TYPES)
    for name, fault in FAULT_TYPES.items():
        names = {param["name"] for param in entries[name]["params"]}
        # The names a step writes: what the fault's params model accepts (aliases included).
        assert names == {i.alias or f for f, i in fault.Params.model_fields.items()}, name
        assert entries[name]["summary"], name
    delay = {param["name"]: param for param in entries["delay"]["params"]}
    assert delay["direction"]["default"] == "out" and "from" in delay
    FAULT_TYPES["delay"].parse_params({p: v["default"] for p, v in delay.items() if v["default"]})


def test_list_targets_gives_every_role_then_the_patterns(capsys) -> None:
    names = [entry["name"] for entry in listed(capsys, "targets")]
    assert names[: len(TARGET_ROLES)] == list(TARGET_ROLES)
    assert {"node:<id>", "@<name>"} <= set(names)


def test_list_experiments_gives_every_shipped_file(capsys) -> None:
    names = {entry["name"] for entry in listed(capsys, "experiments")}
    folder = load_settings().experiments_dir
    shipped = {p.relative_to(folder).with_suffix("").as_posix() for p in folder.rglob("*.yaml")}
    assert names == shipped and "default" in names and "known-bugs/kafka-fsync" in names


def test_the_text_lists_each_fault_with_its_params_indented(capsys) -> None:
    assert main(["list", "faults"]) == 0
    text = capsys.readouterr().out
    assert "\ndelay: " in text and "\n    direction (default out): " in text
    assert main(["list", "versions"]) == 0
    assert "releases: any Apache Kafka release from 0.10.2.2 on" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "debug"),
    [(["--debug", "validate", "x"], True), (["validate", "x", "--debug"], True),
     (["validate", "x"], False), (["list", "faults", "--debug"], True)],
)  # fmt: skip
def test_debug_is_taken_before_or_after_the_command(argv: list[str], debug: bool) -> None:
    from kafka_chaos.cli import build_parser

    assert build_parser().parse_args(argv).debug is debug


def test_plain_is_run_quiet_by_its_new_name() -> None:
    from kafka_chaos.cli import build_parser

    assert build_parser().parse_args(["run", "x", "--plain"]).quiet is True
    assert build_parser().parse_args(["run", "x", "--quiet"]).quiet is True


def test_every_target_is_described_in_words_of_its_own() -> None:
    """`list targets` says what each role names; no two roles share one placeholder sentence."""
    from kafka_chaos.commands.listing import targets

    summaries = [entry["summary"] for entry in targets()]
    assert all(summaries)
    assert len(set(summaries)) == len(summaries)
