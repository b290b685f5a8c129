"""Write the three renderings of judged cells: report.html, report.md and report.json.

The parts: charts (SVG figures), views (what is shown, typed, formatted once), html, markdown
and json_report; junit.py writes the JUnit XML beside them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from markupsafe import escape

from analysis.crossrun.summary import CrossRunSummary
from analysis.judge.outcomes import CellVerdict, Events, Verdict
from analysis.judge.verdicts import DEFAULT_FAIL_ON
from analysis.model.results import RunResult
from analysis.report.html import render_html
from analysis.report.json_report import SCHEMA_VERSION, report_json
from analysis.report.markdown import render_markdown
from analysis.report.provenance import provenance_views
from analysis.report.safe import PartFailure, safely
from harness.rundir.provenance import ExperimentProvenance

__all__ = ["ReportPaths", "render_report"]


@dataclass(frozen=True)
class ReportPaths:
    """Where render_report wrote the three renderings, and the renderings that failed (each
    file is still written, saying what failed)."""

    html: Path
    markdown: Path
    json: Path
    failures: tuple[PartFailure, ...] = ()


def render_report(
    cells: Sequence[CellVerdict],
    results: Sequence[RunResult],
    events_by_run: Mapping[str, Events],
    provenance: Sequence[ExperimentProvenance],
    out_dir: Path,
    title: str,
    summary: CrossRunSummary | PartFailure | None = None,
    *,
    fail_on: frozenset[Verdict] = DEFAULT_FAIL_ON,
) -> ReportPaths:
    """Write report.html, report.md and report.json into out_dir (created) and return paths;
    the cross-run summary, when given, goes into the HTML and report.json (a PartFailure: the
    error that kept it out, shown in its place). A rendering that raises is written as a stub
    naming the error; a file that cannot be written is a failure with `unwritten` set, and the
    others are still written. Every rendering's exit code and headline follow `fail_on`."""
    out_dir = Path(out_dir)
    results_by_run = {r.run_dir: r for r in results}
    views = provenance_views(provenance)
    paths = ReportPaths(out_dir / "report.html", out_dir / "report.md", out_dir / "report.json")

    def html() -> str:
        return render_html(
            cells, results_by_run, events_by_run, views, title, summary, fail_on=fail_on
        )

    def markdown() -> str:
        return render_markdown(cells, views, title, results_by_run, fail_on=fail_on)

    def document() -> str:
        data = report_json(
            cells, provenance, views, title, results_by_run, summary, fail_on=fail_on
        )
        return json.dumps(data, indent=2) + "\n"

    failures = [
        _write(paths.html, html, lambda failure: _html_stub(title, failure)),
        _write(paths.markdown, markdown, lambda failure: f"# {title}\n\n{failure}\n"),
        _write(paths.json, document, lambda failure: _json_stub(title, failure)),
    ]
    return replace(paths, failures=tuple(f for f in failures if f is not None))


def _write(
    path: Path, render: Callable[[], str], stub: Callable[[PartFailure], str]
) -> PartFailure | None:
    """Write render() to path (its folder created), or, when rendering raises, a stub naming
    the failure; return the failure, with `unwritten` set when the file could not be written."""
    text = safely(path.name, render)
    failure = text if isinstance(text, PartFailure) else None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(stub(failure) if failure else str(text), "utf-8")
    except OSError as exc:  # a full disk or a read-only folder: the other files may still fit
        why = f"{failure.error}; then " if failure else ""
        return PartFailure(path.name, f"{why}{type(exc).__name__}: {exc}", unwritten=path)
    return failure


def _html_stub(title: str, failure: PartFailure) -> str:
    """A page that only says the report could not be rendered, and why."""
    name = escape(title)
    return f"<!doctype html>\n<title>{name}</title>\n<h1>{name}</h1>\n{failure.__html__()}\n"


def _json_stub(title: str, failure: PartFailure) -> str:
    """report.json when it could not be built: its schema version, the title and the error."""
    stub = {"schema_version": SCHEMA_VERSION, "title": title, "error": str(failure)}
    return json.dumps(stub, indent=2) + "\n"
