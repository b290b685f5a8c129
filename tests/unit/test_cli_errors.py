"""Errors a user easily causes in init, validate, run and report: each exits 2 with one line on
stderr naming the problem and the fix, no traceback, and before Java, Spark or Docker is
touched; a reader that leaves early (`| head`) ends the command quietly."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.settings import REPO_ROOT
from kafka_chaos.cli import EXIT_STDOUT_CLOSED, main
from kafka_chaos.commands.preflight import is_spark_master

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


@pytest.mark.parametrize("command", ["report", "reconcile"])
def test_a_mistyped_master_is_named_with_the_accepted_forms(
    nothing_starts, tmp_path, capsys, command
):
    (tmp_path / "runs" / "x" / "spec.json").parent.mkdir(parents=True)
    (tmp_path / "runs" / "x" / "spec.json").write_text("{}")
    (tmp_path / "runs" / "x" / "acked.parquet").write_text("")
    args = [command, str(tmp_path / "runs"), "--master", "lokal[1]", "--out", str(tmp_path / "r")]
    assert main(args) == 2
    err = one_line(capsys)
    assert "--master lokal[1] is not a Spark master URL; did you mean local[1]?" in err
    assert "local[*]" in err and "spark://HOST:PORT" in err and "Java" not in err


def test_a_mistyped_master_fails_run_before_docker(nothing_starts, capsys):
    assert main(["run", QUICK, "--master", "spark:/host:7077"]) == 2
    assert "not a Spark master URL" in one_line(capsys)


def test_a_master_from_the_environment_is_named_as_such(nothing_starts, monkeypatch, capsys):
    monkeypatch.setenv("KCHAOS_SPARK_MASTER", "local[0]")
    assert main(["report", "runs"]) == 2
    assert "KCHAOS_SPARK_MASTER=local[0] is not a Spark master URL" in one_line(capsys)


def test_report_out_naming_a_file_fails_before_spark(nothing_starts, tmp_path, capsys):
    existing = tmp_path / "report.html"
    existing.write_text("mine")
    assert main(["report", str(tmp_path), "--out", str(existing)]) == 2
    assert f"--out {existing} is a file, not a folder: name a folder" in one_line(capsys)
    assert existing.read_text() == "mine"
    assert main(["report", str(tmp_path), "--out", str(existing / "sub")]) == 2
    assert "is a file, so no folder can be made in it" in one_line(capsys)


def test_report_junit_naming_a_folder_fails_before_spark(nothing_starts, tmp_path, capsys):
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "r"), "--junit", "."]) == 2
    assert "--junit . is a folder; name the file to write, e.g. junit.xml" in one_line(capsys)


@pytest.mark.parametrize("flag", ["--out", "--runs-dir"])
def test_run_with_a_file_where_a_folder_goes_fails_before_docker(
    nothing_starts, tmp_path, capsys, flag
):
    existing = tmp_path / "taken"
    existing.write_text("")
    assert main(["run", QUICK, flag, str(existing)]) == 2
    assert f"{flag} {existing} is a file, not a folder" in one_line(capsys)


def test_init_into_a_missing_folder_says_to_create_it(tmp_path, capsys):
    target = tmp_path / "sub" / "dir" / "x.yaml"
    assert main(["init", str(target)]) == 2
    assert f"the folder {target.parent} does not exist: create it first (mkdir -p" in one_line(
        capsys
    )
    assert not target.parent.exists()


def test_init_that_cannot_write_names_the_file_and_the_fix(tmp_path, monkeypatch, capsys):
    from pathlib import Path

    def denied(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "write_text", denied)  # as a folder of someone else's would
    assert main(["init", str(tmp_path / "x.yaml")]) == 2
    err = one_line(capsys)
    assert f"cannot write {tmp_path / 'x.yaml'}: Permission denied; give a file in a folder" in err


@pytest.mark.parametrize("command", ["validate", "run"])
def test_an_unknown_set_path_names_the_nearest_field(nothing_starts, capsys, command):
    assert main([command, QUICK, "--set", "workload.rat=500"]) == 2
    err = one_line(capsys)
    assert "'workload.rat' does not exist" in err and "did you mean 'workload.rate'?" in err
    assert "(set by --set" in err


def test_validate_json_names_an_unknown_set_path_as_its_problem(capsys):
    import json

    assert main(["validate", QUICK, "--set", "workload.rat=500", "--json"]) == 2
    document = json.loads(capsys.readouterr().out)
    assert document["valid"] is False and len(document["problems"]) == 1
    assert document["problems"][0].startswith("workload.rat: 'workload.rat' does not exist")


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


def test_a_closed_stdout_ends_quietly_with_sigpipes_status():
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has left before the first line: every write fails
    try:
        done = subprocess.run(
            [sys.executable, "-m", "kafka_chaos", "validate", QUICK],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (EXIT_STDOUT_CLOSED, "")
    assert EXIT_STDOUT_CLOSED == 141


# The oracle: Spark's master forms, read without regular expressions.
DIGITS = set("0123456789")


def _number(text: str) -> bool:
    return bool(text) and set(text) <= DIGITS


def _local(inner: str) -> bool:
    threads, comma, failures = inner.partition(",")
    threads_ok = threads.rstrip() == "*" or (_number(threads.rstrip()) and int(threads) > 0)
    if not comma:
        return threads == "*" or (_number(threads) and int(threads) > 0)
    return (
        threads_ok and threads.rstrip() == threads.rstrip().lstrip() and _number(failures.lstrip())
    )


def _address(text: str) -> bool:
    host, colon, port = text.rpartition(":")
    if not colon or not _number(port) or len(port) > 5 or not 0 < int(port) < 65536:
        return False
    if host.startswith("["):
        return (
            len(host) > 2
            and host.endswith("]")
            and set(host[1:-1]) <= set("0123456789abcdefABCDEF:.")
        )
    return bool(host) and not any(c.isspace() or c in ":/,[]" for c in host)


def oracle(master: str) -> bool:
    if master in ("local", "yarn"):
        return True
    if master.startswith("k8s://"):
        return bool(master[6:]) and not any(c.isspace() for c in master[6:])
    if master.startswith("spark://"):
        return all(_address(part) for part in master[8:].split(","))
    if master.startswith("local-cluster[") and master.endswith("]"):
        parts = master[14:-1].split(",")
        return len(parts) == 3 and all(_number(part.strip()) for part in parts)
    if master.startswith("local[") and master.endswith("]"):
        return _local(master[6:-1])
    return False


PIECES = ["local", "local-cluster", "[", "]", "*", "0", "1", "16", ",", " ", "spark://", "h",
          ":", "7077", "70000", "yarn", "k8s://", "[::1]", "lokal", "x", "\t"]  # fmt: skip


@given(st.lists(st.sampled_from(PIECES), max_size=8).map("".join))
def test_the_master_check_agrees_with_the_oracle(master: str) -> None:
    assert is_spark_master(master) == oracle(master)


@pytest.mark.parametrize(
    ("master", "accepted"),
    [
        ("local", True),
        ("local[*]", True),
        ("local[4]", True),
        ("local[4, 2]", True),
        ("local[*,3]", True),
        ("local-cluster[2, 1, 1024]", True),
        ("spark://127.0.0.1:7077", True),
        ("spark://a:7077,b:7077", True),
        ("spark://[::1]:7077", True),
        ("yarn", True),
        ("k8s://https://example:6443", True),
        ("lokal[1]", False),
        ("local[0]", False),
        ("local[ 4]", False),
        ("LOCAL", False),
        ("spark://host", False),
        ("spark://host:0", False),
        ("yarn-client", False),
        ("k8s://", False),
        ("", False),
    ],
)
def test_the_master_forms_spark_accepts(master: str, accepted: bool) -> None:
    assert is_spark_master(master) is accepted
