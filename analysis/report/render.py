"""Write the three renderings of judged cells: report.html, report.md and report.json.

The parts: charts (SVG figures), views (what is shown, typed, formatted once), html, markdown
and json_report; junit.py writes the JUnit XML beside them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from analysis.judge.verdicts import CellVerdict, Event
from analysis.report.html import render_html
from analysis.report.json_report import report_json
from analysis.report.markdown import render_markdown
from analysis.report.views import provenance_views
from analysis.results import RunResult
from analysis.summary import CrossRunSummary
from harness.rundir.provenance import RunProvenance

__all__ = ["ReportPaths", "render_report"]


@dataclass(frozen=True)
class ReportPaths:
    """Where render_report wrote the three renderings."""

    html: Path
    markdown: Path
    json: Path


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
    html = render_html(cells, results_by_run, events_by_run, views, title, summary)
    paths.html.write_text(html, "utf-8")
    paths.markdown.write_text(render_markdown(cells, views, title, results_by_run), "utf-8")
    document = report_json(cells, provenance, views, title, results_by_run, summary)
    paths.json.write_text(json.dumps(document, indent=2) + "\n", "utf-8")
    return paths
