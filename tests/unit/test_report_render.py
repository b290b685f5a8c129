"""render_report's stubs, written out whole: the page, report.md and report.json that say a
rendering failed and why, each still naming the report; and a stub that cannot be written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from analysis.report import render
from analysis.report.json_report import SCHEMA_VERSION
from analysis.report.render import ReportPaths, render_report


def _broken(message: str) -> Any:
    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError(message)

    return broken


def test_every_rendering_that_fails_is_a_stub_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(render, "render_html", _broken("page <broke>"))
    monkeypatch.setattr(render, "render_markdown", _broken("md broke"))
    monkeypatch.setattr(render, "report_json", _broken("json broke"))
    paths = render_report([], [], {}, [], tmp_path / "new" / "out", "A <b>&</b> title")
    out = tmp_path / "new" / "out"
    assert (paths.html, paths.markdown, paths.json) == (
        out / "report.html",
        out / "report.md",
        out / "report.json",
    )
    assert [(f.part, f.error, f.unwritten) for f in paths.failures] == [
        ("report.html", "RuntimeError: page <broke>", None),
        ("report.md", "RuntimeError: md broke", None),
        ("report.json", "RuntimeError: json broke", None),
    ]
    assert paths.html.read_text("utf-8") == (
        "<!doctype html>\n<title>A &lt;b&gt;&amp;&lt;/b&gt; title</title>\n"
        "<h1>A &lt;b&gt;&amp;&lt;/b&gt; title</h1>\n"
        '<p class="part-failed">report.html failed: RuntimeError: page &lt;broke&gt; (the rest '
        "of the report stands)</p>\n"
    )
    assert paths.markdown.read_text("utf-8") == (
        "# A <b>&</b> title\n\nreport.md failed: RuntimeError: md broke (the rest of the report "
        "stands)\n"
    )
    text = paths.json.read_text("utf-8")
    assert text.endswith("}\n") and text.startswith('{\n  "schema_version": ')
    assert json.loads(text) == {
        "schema_version": SCHEMA_VERSION,
        "title": "A <b>&</b> title",
        "error": "report.json failed: RuntimeError: json broke (the rest of the report stands)",
    }


def test_a_report_that_renders_is_written_as_rendered(tmp_path: Path) -> None:
    paths = render_report([], [], {}, [], tmp_path, "Empty")
    assert paths == ReportPaths(
        tmp_path / "report.html", tmp_path / "report.md", tmp_path / "report.json"
    )
    data = paths.json.read_text("utf-8")
    assert data == json.dumps(json.loads(data), indent=2) + "\n"
    assert json.loads(data)["title"] == "Empty"
    assert paths.markdown.read_text("utf-8").startswith("# Empty\n\n**Inconclusive: no results")


def test_a_stub_that_cannot_be_written_names_both_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(render, "render_markdown", _broken("md broke"))
    (tmp_path / "file").write_text("")
    paths = render_report([], [], {}, [], tmp_path / "file", "T")
    by_part = {f.part: f for f in paths.failures}
    assert by_part["report.md"].unwritten == tmp_path / "file" / "report.md"
    assert by_part["report.md"].error.startswith("RuntimeError: md broke; then FileExistsError: ")
    assert by_part["report.html"].error.startswith("FileExistsError: ")
    assert "; then" not in by_part["report.html"].error


def test_the_report_files_are_utf8_whatever_the_locale(tmp_path: Path) -> None:
    """Under an ASCII locale (LC_CTYPE=C, as a bare container or cron job may run) the files are
    still written, in UTF-8: the title, dashes and dots of the report are not ASCII."""
    import locale

    before = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        assert locale.getpreferredencoding(False) != "UTF-8"  # the files' encoding must be named
        paths = render_report([], [], {}, [], tmp_path, "Chaos — Zürich")
    finally:
        locale.setlocale(locale.LC_CTYPE, before)
    assert paths.failures == ()
    markdown = paths.markdown.read_bytes().decode("utf-8")
    assert markdown.startswith("# Chaos — Zürich\n\n")
    assert "mean (min–max)" in markdown
    assert "<title>Chaos — Zürich</title>" in paths.html.read_bytes().decode("utf-8")
    assert json.loads(paths.json.read_bytes().decode("utf-8"))["title"] == "Chaos — Zürich"
