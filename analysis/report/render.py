"""Write the three renderings of judged cells: report.html, report.md and report.json.

The parts: charts (SVG figures), views (what is shown, typed, formatted once), html, markdown
and json_report; junit.py writes the JUnit XML beside them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from analysis.judge.verdicts import CellVerdict, Event
from analysis.report.html import render_html
from analysis.report.json_report import report_json
from analysis.report.markdown import render_markdown
from analysis.report.safe import PartFailure, safely
from analysis.report.views import provenance_views
from analysis.results import RunResult
from analysis.summary import CrossRunSummary
from harness.rundir.provenance import RunProvenance

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
    events_by_run: Mapping[str, Sequence[Event]],
    provenance: Sequence[RunProvenance],
    out_dir: Path,
    title: str,
    summary: CrossRunSummary | None = None,
) -> ReportPaths:
    """Write report.html, report.md and report.json into out_dir (created) and return paths;
    the cross-run summary, when given, goes into the HTML and report.json."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    results_by_run = {r.run_dir: r for r in results}
    views = provenance_views(provenance)
    paths = ReportPaths(out_dir / "report.html", out_dir / "report.md", out_dir / "report.json")
    failures = [
        _write(
            paths.html,
            lambda: render_html(cells, results_by_run, events_by_run, views, title, summary),
            lambda failure: f"<!doctype html><title>{title}</title>{failure.__html__()}\n",
        ),
        _write(
            paths.markdown,
            lambda: render_markdown(cells, views, title, results_by_run),
            lambda failure: f"# {title}\n\n{failure}\n",
        ),
        _write(
            paths.json,
            lambda: (
                json.dumps(
                    report_json(cells, provenance, views, title, results_by_run, summary), indent=2
                )
                + "\n"
            ),
            lambda failure: json.dumps({"title": title, "error": str(failure)}, indent=2) + "\n",
        ),
    ]
    return replace(paths, failures=tuple(f for f in failures if f is not None))


def _write(
    path: Path, render: Callable[[], str], stub: Callable[[PartFailure], str]
) -> PartFailure | None:
    """Write render() to path, or, when rendering raises, a stub naming the failure (returned);
    an error writing the file itself propagates."""
    text = safely(path.name, render)
    if isinstance(text, PartFailure):
        path.write_text(stub(text), "utf-8")
        return text
    path.write_text(text, "utf-8")
    return None
