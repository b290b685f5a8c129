"""Where the report goes: `run --out DIR` and `--junit FILE` (a copy of junit.xml where CI
collects it) through the CLI's argument parsing and the analysis of crafted results (no Docker,
no Spark); and the two kinds of shard told apart: `--shard i/n` (cells across CI jobs) and
`--spark-chunk-rows` (rows inside Spark), whose old name `--shard-rows` still works."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from analysis.checks.messages.facts import CHUNK_ROWS
from kafka_chaos import cli
from kafka_chaos.commands import run as run_command
from tests.unit.report_runs import _analyse_without_spark

EXPERIMENT = "experiments/default.yaml"


def test_run_takes_out_and_junit(tmp_path: Path) -> None:
    args = cli.build_parser().parse_args(
        ["run", EXPERIMENT, "--out", str(tmp_path / "r"), "--junit", "ci/junit.xml"]
    )
    assert (args.out, args.junit) == (str(tmp_path / "r"), Path("ci/junit.xml"))
    plain = cli.build_parser().parse_args(["run", EXPERIMENT])
    assert (plain.out, plain.junit) == (None, None)


def _report_of_run(argv: list[str], root: Path) -> int:
    """run's analysis step (report_runs) as `kafka-chaos run ARGV` calls it after the cells."""
    args = cli.build_parser().parse_args(["run", EXPERIMENT, *argv])
    return run_command.report_runs(args, root, "Chaos report", "local[1]")


def test_run_writes_its_report_into_out_and_a_junit_copy(
    crafted: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    _analyse_without_spark(monkeypatch, crafted, tmp_path)
    root, out, copy = tmp_path / "runs", tmp_path / "site" / "report", tmp_path / "ci" / "t.xml"
    code = _report_of_run(["--out", str(out), "--junit", str(copy)], root)
    assert code == 1  # the crafted VIOLATION
    assert {p.name for p in out.iterdir()} >= {"report.html", "report.md", "junit.xml"}
    assert not (root / "report").exists()
    assert copy.read_bytes() == (out / "junit.xml").read_bytes()
    assert ET.parse(copy).getroot().get("tests") == "3"
    printed = capsys.readouterr().out
    assert f"HTML report: {out / 'report.html'}" in printed
    assert f"JUnit copy:  {copy}" in printed


def test_run_without_out_reports_into_the_experiment_run(
    crafted: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _analyse_without_spark(monkeypatch, crafted, tmp_path)
    root = tmp_path / "runs"
    assert _report_of_run([], root) == 1
    assert (root / "report" / "report.html").is_file()
    assert (root / "report" / "junit.xml").is_file()


def test_run_json_names_the_junit_copy(
    crafted: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    _analyse_without_spark(monkeypatch, crafted, tmp_path)
    root, copy = tmp_path / "runs", tmp_path / "junit.xml"
    assert _report_of_run(["--json", "--junit", str(copy)], root) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["runs"] == str(root)
    assert document["files"]["junit"] == str(root / "report" / "junit.xml")
    assert document["files"]["junit_copy"] == str(copy)
    assert copy.is_file()


def test_report_keeps_junit_in_out_and_copies_it(
    crafted: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = _analyse_without_spark(monkeypatch, crafted, tmp_path)
    out, copy = tmp_path / "out", tmp_path / "test-results" / "kafka-chaos.xml"
    assert cli.main(["report", *runs, "--out", str(out), "--junit", str(copy)]) == 1
    assert copy.read_bytes() == (out / "junit.xml").read_bytes()
    # The copy may be the report's own file (chaos.yml's --out report --junit report/junit.xml).
    assert cli.main(["report", *runs, "--out", str(out), "--junit", str(out / "junit.xml")]) == 1


def test_a_junit_copy_that_cannot_be_written_exits_2_naming_it(
    crafted: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    import shutil

    runs = _analyse_without_spark(monkeypatch, crafted, tmp_path)
    (tmp_path / "a-file").write_text("")
    under_a_file = tmp_path / "a-file" / "junit.xml"  # refused before the analysis starts
    argv = ["report", *runs, "--out", str(tmp_path / "out"), "--junit"]
    assert cli.main([*argv, str(under_a_file)]) == 2
    assert "a-file is a file, so no folder can be made in it" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()

    def refused(source: Any, target: Any) -> None:
        raise PermissionError(13, "Permission denied", str(target))

    monkeypatch.setattr(shutil, "copyfile", refused)  # fails only once the report is written
    copy = tmp_path / "results" / "junit.xml"
    assert cli.main([*argv, str(copy)]) == 2
    assert f"error: junit.xml could not be copied to {copy}" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["report", "runs"], ["reconcile", "runs"]])
def test_spark_chunk_rows_is_the_spark_flag_and_chunk_rows_its_deprecated_alias(
    command: list[str], capsys: Any
) -> None:
    parser = cli.build_parser()
    assert parser.parse_args(command).spark_chunk_rows == CHUNK_ROWS
    assert parser.parse_args([*command, "--spark-chunk-rows", "1_000"]).spark_chunk_rows == 1000
    assert capsys.readouterr().err == ""
    assert parser.parse_args([*command, "--shard-rows", "7"]).spark_chunk_rows == 7
    assert capsys.readouterr().err == (
        "--shard-rows is deprecated: use --spark-chunk-rows (same meaning)\n"
    )
    with pytest.raises(SystemExit):
        parser.parse_args([*command, "--shard-rows", "0"])
    assert "is not a whole number of rows above 0" in capsys.readouterr().err


def test_help_names_the_spark_flag_only_and_tells_the_two_shards_apart(capsys: Any) -> None:
    with pytest.raises(SystemExit):
        cli.main(["report", "--help"])
    text = capsys.readouterr().out
    assert "--spark-chunk-rows N" in text and "--shard-rows" not in text
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--shard I/N run only shard I of N of the cells: one CI job of N" in text
    assert "--shard-rows" not in text


def test_kafka_chaos_run_out_and_junit_end_to_end_without_docker(
    crafted: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """The whole `kafka-chaos run` command with --out and --junit: the cells' runner and the
    Spark analysis replaced (crafted results), everything between them as it runs."""
    from harness.run import runner

    _analyse_without_spark(monkeypatch, crafted, tmp_path)
    monkeypatch.setattr(run_command, "require_java", lambda: True)
    monkeypatch.setattr("harness.platform.engine.ensure_engine", lambda: None)
    monkeypatch.setattr(run_command, "_images_for", lambda args, settings, cells: {})
    monkeypatch.setattr(run_command, "_prepare_faults", lambda args, settings, cells: None)
    monkeypatch.setattr(run_command, "_build_clients", lambda settings, cells: None)
    monkeypatch.setattr(run_command, "log_to", lambda path: None)
    monkeypatch.setattr(runner, "run_experiment", lambda *args, **kwargs: [])
    out, copy = tmp_path / "public" / "chaos", tmp_path / "test-results" / "chaos.xml"
    runs = tmp_path / "runs"
    argv = ["run", "experiments/quick.yaml", "--runs-dir", str(runs), "--plain"]
    assert cli.main([*argv, "--out", str(out), "--junit", str(copy)]) == 1  # the VIOLATION
    assert (out / "report.html").is_file() and copy.read_bytes() == (out / "junit.xml").read_bytes()
    assert not list(runs.glob("*/*/report"))  # not in the experiment run's folder
    printed = capsys.readouterr().out
    assert f"JUnit copy:  {copy}" in printed and f"HTML report: {out / 'report.html'}" in printed
