"""Check-safe: a part of the report that fails shows its error in place, and the rest is
written; the report command exits on the verdicts unless nothing could be written."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from analysis.crossrun.summary import cross_run_summary
from analysis.report import cells as cells_module
from analysis.report import html as html_module
from analysis.report import json_report as json_module
from analysis.report import junit as junit_module
from analysis.report import markdown as markdown_module
from analysis.report import render
from analysis.report.junit import write_junit
from analysis.report.render import render_report
from analysis.report.safe import PartFailure
from kafka_chaos import cli
from kafka_chaos.commands import report as report_command
from tests.unit.report_runs import (
    RUNS,
    _analyse_without_spark,
    _raising,
)


def test_a_chart_that_fails_shows_its_error_in_place_and_the_rest_is_written(
    crafted: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_args: Any, **_kwargs: Any) -> None:
        raise ValueError("'xerr' must not contain negative values")

    monkeypatch.setattr(html_module, "loss_probability_svg", broken)
    cells, results, events = crafted
    summary = cross_run_summary(results, cells)
    paths = render_report(cells, results, events, RUNS, tmp_path, "Chaos report", summary)
    html = paths.html.read_text()
    assert "the loss probability chart failed: ValueError: &#39;xerr&#39; must not" in html
    assert 'id="summary"' in html and html.count('<section class="cell') == 2  # the rest stands
    assert html.count('aria-label="timeline of') == 3 and 'aria-label="loss by' in html
    assert paths.failures == ()  # the page itself rendered
    assert len(json.loads(paths.json.read_text())["cells"]) == 2


def test_a_rendering_that_fails_is_written_as_a_stub_naming_the_error(
    crafted: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_args: Any, **_kwargs: Any) -> None:
        raise RuntimeError("markdown broke")

    monkeypatch.setattr(render, "render_markdown", broken)
    cells, results, events = crafted
    paths = render_report(cells, results, events, RUNS, tmp_path, "Chaos report")
    assert [f.part for f in paths.failures] == ["report.md"]
    assert "RuntimeError: markdown broke" in paths.markdown.read_text()
    assert paths.html.read_text().count('<section class="cell') == 2
    assert len(json.loads(paths.json.read_text())["cells"]) == 2


def test_a_timeline_that_fails_shows_its_error_in_its_repetition(
    crafted: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = _raising("no such axis", only="rep-1", at=2)  # timeline_svg(result, events, salt)
    broken.real = cells_module.timeline_svg
    monkeypatch.setattr(cells_module, "timeline_svg", broken)
    cells, results, events = crafted
    html = render_report(cells, results, events, RUNS, tmp_path, "Chaos report").html.read_text()
    assert html.count('class="part-failed"') == 1
    assert "the timeline of chaos/ap-leader-partition/rep-1 failed: RuntimeError: no such" in html
    assert html.count('aria-label="timeline of') == 2  # the other repetitions' timelines


def test_a_cell_that_fails_keeps_its_name_and_error_in_every_file(
    crafted: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for module, name in [
        (html_module, "cell_view"),
        (markdown_module, "_markdown_cell"),
        (json_module, "_cell_json"),
        (junit_module, "_testcase"),
    ]:
        broken = _raising("bad cell", only="cp-leader-kill")
        broken.real = getattr(module, name)
        monkeypatch.setattr(module, name, broken)
    cells, results, events = crafted
    paths = render_report(cells, results, events, RUNS, tmp_path, "Chaos report")
    assert paths.failures == ()
    html = paths.html.read_text()
    assert "cell cp-leader-kill failed: RuntimeError: bad cell" in html
    assert 'id="cell-chaos-ap-leader-partition"' in html  # the other cell, in full
    markdown = paths.markdown.read_text()
    assert "### cp-leader-kill\n\ncell cp-leader-kill failed: RuntimeError: bad cell" in markdown
    assert "### ap-leader-partition: EXPECTED-LOSS" in markdown
    ap, cp_cell = json.loads(paths.json.read_text())["cells"]
    assert (cp_cell["verdict"], cp_cell["error"]) == (
        "VIOLATION",
        "cell cp-leader-kill failed: RuntimeError: bad cell (the rest of the report stands)",
    )
    assert ap["repetitions"] and "error" not in ap
    suite = ET.parse(write_junit(cells, events, tmp_path / "junit.xml")).getroot()
    assert (suite.get("tests"), suite.get("errors"), suite.get("failures")) == ("3", "1", "0")
    (error,) = suite.iter("error")
    assert error.get("type") == "report" and "bad cell" in (error.get("message") or "")


def test_a_summary_that_failed_is_shown_in_its_place(crafted: Any, tmp_path: Path) -> None:
    cells, results, events = crafted
    failure = PartFailure("the cross-run summary", "ZeroDivisionError: division by zero")
    paths = render_report(cells, results, events, RUNS, tmp_path, "Chaos report", failure)
    html = paths.html.read_text()
    assert 'id="summary"' in html
    assert "the cross-run summary failed: ZeroDivisionError: division by zero" in html
    assert json.loads(paths.json.read_text())["summary"] == {"error": str(failure)}


def test_a_report_folder_that_cannot_be_made_is_a_failure_per_file_not_a_crash(
    crafted: Any, tmp_path: Path
) -> None:
    (tmp_path / "a-file").write_text("")
    out = tmp_path / "a-file" / "report"
    cells, results, events = crafted
    paths = render_report(cells, results, events, RUNS, out, "Chaos report")
    assert [(f.part, f.unwritten) for f in paths.failures] == [
        ("report.html", out / "report.html"),
        ("report.md", out / "report.md"),
        ("report.json", out / "report.json"),
    ]
    assert all("NotADirectoryError" in f.error for f in paths.failures)


def test_report_exits_on_the_verdicts_when_a_rendering_fails(
    crafted: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    runs = _analyse_without_spark(monkeypatch, crafted, tmp_path)
    monkeypatch.setattr(render, "render_html", _raising("template broke"))
    out = tmp_path / "out"
    assert cli.main(["report", *runs, "--out", str(out)]) == 1  # the crafted VIOLATION
    assert "report.html failed: RuntimeError: template broke" in capsys.readouterr().err
    assert "template broke" in (out / "report.html").read_text()
    assert (out / "report.md").read_text().count("\n### ") == 2
    assert len(json.loads((out / "report.json").read_text())["cells"]) == 2
    assert ET.parse(out / "junit.xml").getroot().get("tests") == "3"


def test_report_exits_2_only_when_nothing_can_be_written(
    crafted: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    runs = _analyse_without_spark(monkeypatch, crafted, tmp_path)
    (tmp_path / "a-file").write_text("")
    out = tmp_path / "a-file" / "out"
    # The early check refuses this --out before Spark (test_cli_errors); here the writing
    # itself fails, as when the folder goes away or fills up during the analysis.
    monkeypatch.setattr(report_command, "analysis_problem", lambda *args: None)
    assert cli.main(["report", *runs, "--out", str(out)]) == 2
    assert f"error: no report file could be written under {out}" in capsys.readouterr().err


def test_a_matrix_row_or_loss_chart_that_fails_is_named_in_the_page(
    crafted: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page names the cell whose matrix row failed, and the loss chart when it fails, each
    with its error where it would have been."""
    row = _raising("no figures", only="cp-leader-kill")  # matrix_row(cell, results_by_run)
    row.real = html_module.matrix_row
    monkeypatch.setattr(html_module, "matrix_row", row)
    monkeypatch.setattr(html_module, "loss_chart_svg", _raising("no axis"))
    cells, results, events = crafted
    results_by_run = {r.run_dir: r for r in results}
    html = html_module.render_html(cells, results_by_run, events, (), "Chaos report")
    stands = "(the rest of the report stands)"
    failed_row = f"the matrix row of cp-leader-kill failed: RuntimeError: no figures {stands}"
    failed_chart = f"the loss chart failed: RuntimeError: no axis {stands}"
    assert f'<tr><td colspan="99"><p class="part-failed">{failed_row}</p></td></tr>' in html
    assert f'<p class="part-failed">{failed_chart}</p>' in html
    assert html.count('class="part-failed"') == 2  # the other row, and every cell, stand


def test_a_markdown_matrix_row_or_cell_that_fails_keeps_its_name_and_error(
    crafted: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """report.md keeps a failed matrix row as the cell's name beside the error, and a failed
    cell section as its heading, the error and the blank line before the next section."""
    for name in ("_matrix_row", "_markdown_cell"):
        broken = _raising("bad cell", only="cp-leader-kill")
        broken.real = getattr(markdown_module, name)
        monkeypatch.setattr(markdown_module, name, broken)
    cells, _, _ = crafted
    text = markdown_module.render_markdown(cells, (), "Chaos report")
    failed = "failed: RuntimeError: bad cell (the rest of the report stands)"
    row = f"| `cp-leader-kill` | the matrix row of cp-leader-kill {failed} |"
    assert row in text.splitlines()
    section = f"### cp-leader-kill\n\ncell cp-leader-kill {failed}\n\n"
    assert text.endswith(section + "## Provenance\n\n")
