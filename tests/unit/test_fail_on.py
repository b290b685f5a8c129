"""--fail-on: which verdicts fail `run` and `report`, and the one exit-code table that help,
docs/cli.md and the code share; generated verdict lists against an oracle written here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from analysis.judge.outcomes import Verdict
from analysis.judge.verdicts import (
    DEFAULT_FAIL_ON,
    exit_code,
    exit_code_table,
    parse_fail_on,
)
from kafka_chaos.cli import build_parser, main
from tests.unit.reconcile_runs import in_order, write_run
from tests.unit.verdict_runs import cells_with

DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
FAILING_WITH = {  # the documentation's table, written again: a verdict's code when it fails
    Verdict.VIOLATION: 1,
    Verdict.KNOWN_BUG: 1,
    Verdict.EXPECTED_LOSS: 1,
    Verdict.NOT_PROVOKED: 1,
    Verdict.UNKNOWN: 2,
}


def oracle(verdicts: list[Verdict], failing: frozenset[Verdict]) -> int:
    """1 when a failing verdict whose code is 1 is there, else 2 when a failing UNKNOWN is (or
    nothing was judged), else 0."""
    codes = [FAILING_WITH[v] for v in verdicts if v in failing and v in FAILING_WITH]
    if 1 in codes:
        return 1
    return 2 if not verdicts or 2 in codes else 0


@given(
    st.lists(st.sampled_from(list(Verdict)), max_size=6),
    st.sets(st.sampled_from(list(FAILING_WITH)), min_size=1).map(frozenset),
)
def test_the_exit_code_is_the_worst_failing_verdicts(verdicts, failing) -> None:
    assert exit_code(cells_with(*verdicts), fail_on=failing) == oracle(verdicts, failing)


def test_by_default_a_violation_or_unknown_fails_and_a_known_bug_only_when_asked() -> None:
    assert {Verdict.VIOLATION, Verdict.UNKNOWN} == DEFAULT_FAIL_ON
    assert exit_code(cells_with(Verdict.KNOWN_BUG, Verdict.NOT_PROVOKED)) == 0
    assert exit_code(cells_with(Verdict.KNOWN_BUG), fail_on=parse_fail_on("known-bug")) == 1
    not_provoked = parse_fail_on("violation,unknown,not-provoked")
    assert exit_code(cells_with(Verdict.PASS, Verdict.NOT_PROVOKED), fail_on=not_provoked) == 1


@pytest.mark.parametrize(
    ("text", "verdicts"),
    [
        ("violation", {Verdict.VIOLATION}),
        (" Known_Bug , unknown,", {Verdict.KNOWN_BUG, Verdict.UNKNOWN}),
        ("expected-loss,NOT-PROVOKED", {Verdict.EXPECTED_LOSS, Verdict.NOT_PROVOKED}),
    ],
)
def test_fail_on_reads_any_spelling(text: str, verdicts: set[Verdict]) -> None:
    assert parse_fail_on(text) == verdicts


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("violation,meteor", "unknown verdict 'meteor'"),
        (",", "names no verdict"),
        ("pass", "choose from violation"),
    ],
)
def test_fail_on_refuses_what_is_no_failing_verdict(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_fail_on(text)


def test_the_table_is_the_same_in_help_docs_and_code() -> None:
    lines = exit_code_table()
    assert [line for line in lines if "when named" in line] == [
        f"{v.value}: {c} when named in --fail-on" + (" (default)" if v in DEFAULT_FAIL_ON else "")
        for v, c in FAILING_WITH.items()
    ]
    help_text = build_parser().format_help()
    docs = DOCS.read_text()
    for line in lines:
        assert line in help_text and f"- {line}" in docs, line
    run_help = build_parser()._subparsers._group_actions[0].choices["run"].format_help()
    assert "--fail-on VERDICTS" in run_help


def test_report_json_parses_and_fail_on_decides_the_exit(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Crafted runs carry no fault events: each is judged UNKNOWN, which fails by default.
    write_run(tmp_path, "cp", *in_order(3), repetition=0)
    write_run(tmp_path, "cp", *in_order(3), repetition=1)
    runs = str(tmp_path / "runs" / "exp" / "*" / "cp")
    out = tmp_path / "report"
    assert main(["report", runs, "--out", str(out), "--json"]) == 2
    printed = json.loads(capsys.readouterr().out)
    assert printed["exit_code"] == 2
    [cell] = printed["cells"]
    assert (cell["cell"], cell["verdict"], cell["repetitions"], cell["acked"]) == (
        "cp", "UNKNOWN", 2, 6
    )  # fmt: skip
    assert cell["loss"] == 0
    assert set(printed["files"]) == {"html", "markdown", "json", "junit", "dataset"}
    assert all(Path(path).exists() for path in printed["files"].values())
    # Named out of --fail-on, an UNKNOWN cell no longer fails the command.
    assert main(["report", runs, "--out", str(out), "--json", "--fail-on", "violation"]) == 0
    assert json.loads(capsys.readouterr().out)["exit_code"] == 0
    assert spark.range(1).count() == 1


def test_a_refused_fail_on_list_says_exactly_why() -> None:
    from analysis.judge.verdicts import parse_fail_on

    with pytest.raises(ValueError) as caught:
        parse_fail_on("violation, pass")
    assert str(caught.value) == (
        "unknown verdict 'pass' in --fail-on; choose from violation, known-bug, expected-loss, "
        "not-provoked, unknown"
    )
    with pytest.raises(ValueError) as caught:
        parse_fail_on(" , ,")
    assert str(caught.value) == "--fail-on names no verdict; give at least one, e.g. violation"


@pytest.mark.parametrize(
    ("flags", "code", "failures", "skipped"),
    [
        ([], 0, 0, 1),
        (["--fail-on", "violation,unknown,not-provoked"], 1, 1, 0),
        (["--fail-on-known-bug"], 0, 0, 1),
    ],
)
def test_every_written_report_says_the_exit_code_the_command_returns(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    code: int,
    failures: int,
    skipped: int,
) -> None:
    """One gate: --fail-on decides the exit code, the JUnit failures, report.json's exit code
    and the headline of report.md and report.html alike (a NOT-PROVOKED cell, no Spark)."""
    import xml.etree.ElementTree as ET

    from tests.unit.report_runs import (
        AP,
        _analyse_without_spark,
        healthy_events,
        judge_all,
        result,
        typed,
    )

    quiet = result("quiet", AP, 0)
    events = {quiet["run_dir"]: healthy_events()}
    cells = judge_all([quiet], events)
    assert [c.verdict for c in cells] == [Verdict.NOT_PROVOKED]
    runs = _analyse_without_spark(monkeypatch, (cells, [typed(quiet)], events), tmp_path)
    out = tmp_path / "report"
    assert main(["report", *runs, "--out", str(out), *flags]) == code
    capsys.readouterr()
    assert json.loads((out / "report.json").read_text())["exit_code"] == code
    assert f"Exit code {code}." in (out / "report.md").read_text()
    headline = "Failed (--fail-on" if code else "The documented guarantees held in all 1 cells"
    assert headline in (out / "report.html").read_text()
    suite = ET.parse(out / "junit.xml").getroot()
    assert (int(suite.get("failures", -1)), int(suite.get("skipped", -1))) == (failures, skipped)
