"""report.html's header, styles and matrix head as rendered, with a fixed clock: the title
escaped, the generation time in UTC, the cells, repetitions and experiments counted, the
outcome's class, each verdict's colour, count and meaning."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any, ClassVar

import pytest

from analysis.crossrun.summary import CrossRunSummary, cross_run_summary
from analysis.judge.outcomes import VERDICT_MEANING, Verdict
from analysis.model.anomalies import ANOMALY_NAMES, COUNT_LABELS
from analysis.report import html as html_module
from analysis.report.html import render_html
from analysis.report.provenance import provenance_views
from analysis.report.safe import PartFailure
from tests.unit.report_runs import AP, CP, judge_all
from tests.unit.report_runs import result as drawn_result
from tests.unit.results_json import typed

COLOURS = {
    "v-pass": "#1a7f37",
    "v-violation": "#cf222e",
    "v-expected-loss": "#b35900",
    "v-known-bug": "#7d4e00",
    "v-not-provoked": "#57606a",
    "v-unknown": "#8250df",
}


def result(cell: str, config: dict[str, Any], rep: int, **counts: int) -> dict[str, Any]:
    """report_runs.result without its timeline: the page's text is the point, not the charts."""
    return {**drawn_result(cell, config, rep, **counts), "timeline": []}


class _Clock:
    """datetime with now() fixed at 2026-01-02 03:04:59 UTC, expressed in the zone asked for."""

    zones: ClassVar[list[Any]] = []

    @classmethod
    def now(cls, tz: Any = None) -> datetime:
        cls.zones.append(tz)
        fixed = datetime(2026, 1, 2, 3, 4, 59, tzinfo=UTC)
        # Without a zone, the machine's local time (here UTC+5), never the UTC the page says.
        local = timezone(timedelta(hours=5))
        return (
            fixed.astimezone(tz) if tz is not None else fixed.astimezone(local).replace(tzinfo=None)
        )


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> type[_Clock]:
    _Clock.zones = []
    monkeypatch.setattr(html_module, "datetime", _Clock)
    return _Clock


def _page(raws: list[dict[str, Any]], title: str = "T <b>&", **kwargs: Any) -> str:
    cells = judge_all(raws, {})
    results = {r["run_dir"]: typed(r) for r in raws}
    return render_html(cells, results, {}, provenance_views(()), title, **kwargs)


def test_the_header_counts_and_explains_the_verdicts(clock: type[_Clock]) -> None:
    page = _page([result("ap", AP, 0), {**result("cp", CP, 1), "experiment": "other"}])
    assert clock.zones == [UTC]
    assert "<title>T &lt;b&gt;&amp;</title>" in page
    root = page[page.index(":root {") : page.index("}", page.index(":root {")) + 1]
    assert root == (
        ":root {\n"
        "  --fg: #1f2328; --muted: #59636e; --line: #d1d9e0; --panel: #f6f8fa; --bg: #ffffff;\n"
        + "".join(f"  --{cls}: {colour};\n" for cls, colour in COLOURS.items())
        + "}"
    )
    for cls in COLOURS:
        assert f".outcome.{cls} {{ border-left-color: var(--{cls}); }}\n" in page
    header = page[page.index("<header>") : page.index("</header>") + len("</header>")]
    counts = {v.value: 0 for v in Verdict} | {"UNKNOWN": 2}
    spans = "".join(
        f'    <span class="{"zero" if n == 0 else ""}"><span class="n">{n}</span>'
        f'<span class="badge v-{verdict.lower()}">{verdict}</span></span>\n'
        for verdict, n in counts.items()
    )
    legend = "".join(
        f'      <dt><span class="badge v-{v.value.lower()}">{v.value}</span></dt>'
        f"<dd>{VERDICT_MEANING[v]}</dd>\n"
        for v in Verdict
    )
    assert header == (
        "<header>\n"
        "  <h1>T &lt;b&gt;&amp;</h1>\n"
        '  <p class="muted small">\n'
        "    Generated 2026-01-02 03:04 UTC · 2 cells · 2 repetitions\n"
        " · experiments: chaos, other  </p>\n"
        '  <div class="outcome v-unknown">Inconclusive: 2 of 2 cells could not be judged. No '
        "acknowledged message was lost.</div>\n"
        '  <div class="summary">\n'
        f"{spans}"
        "  </div>\n"
        '  <details class="legend-box" open>\n'
        "    <summary>What the verdicts mean</summary>\n"
        '    <dl class="legend">\n'
        f"{legend}"
        "    </dl>\n"
        "  </details>\n"
        "</header>"
    )


def test_one_experiment_is_named_in_the_singular(clock: type[_Clock]) -> None:
    page = _page([result("a", AP, 0), result("a", AP, 1), result("b", AP, 0)], title="One")
    assert (
        "Generated 2026-01-02 03:04 UTC · 2 cells · 3 repetitions\n · experiment: chaos  </p>"
        in (page)
    )


def test_the_outcome_class_follows_the_exit_code(clock: type[_Clock]) -> None:
    from tests.unit.report_runs import events_with_fault_and_leader_change

    raws = [result("cp", CP, 0, offset_divergent=1), result("ap", AP, 0)]
    events = {r["run_dir"]: events_with_fault_and_leader_change() for r in raws}
    cells = judge_all(raws, events)
    results = {r["run_dir"]: typed(r) for r in raws}
    violated = render_html(cells[:1], results, events, (), "V")
    assert (
        '<div class="outcome v-violation">Failed (--fail-on violation,unknown): 1 of 1 cells'
        in violated
    )
    gated = render_html(
        cells[1:], results, events, (), "G", fail_on=frozenset({Verdict.NOT_PROVOKED})
    )
    assert '<div class="outcome v-violation">Failed (--fail-on not-provoked): 1 of 1' in gated
    passed = render_html(cells[1:], results, events, (), "P")
    assert '<div class="outcome v-pass">The documented guarantees held in all 1 cells' in passed
    nothing = render_html([], {}, {}, (), "N")
    assert '<div class="outcome v-unknown">Inconclusive: no results to judge</div>' in nothing
    assert "Generated 2026-01-02 03:04 UTC · 0 cells · 0 repetitions\n  </p>" in nothing
    assert 'id="loss"' not in nothing  # no cell, no loss chart
    assert 'id="loss"' in passed


def test_the_matrix_head_has_every_count_with_its_meaning(clock: type[_Clock]) -> None:
    page = _page([result("ap", AP, 0, lost=1, moved=1)])
    head = page[page.index('<table class="matrix">') : page.index("</thead>")]

    def th(name: str) -> str:
        return f'<th title="{COUNT_LABELS[name][1]}">{COUNT_LABELS[name][0]}</th>'.replace(
            "'", "&#39;"
        )

    assert th("loss") + '\n      <th title="loss ÷ acked">loss rate</th>' in head
    assert "".join(th(n) for n in ("sent", "acked", "lost", "moved")) in head
    folded = [n for n in ANOMALY_NAMES if n not in ("lost", "moved")]
    assert all(f">{COUNT_LABELS[n][0]}</th>" not in head for n in folded)
    assert "Zero in every cell, so not shown: " + ", ".join(
        COUNT_LABELS[n][0] for n in folded
    ) in page.replace("&#39;", "'")
    assert (
        '<th class="price" title="longest time no partition acknowledged anything (max over '
        in (head)
    )
    assert (
        "Guarantees from docs/kafka-reliability.md, “Expected outcome per configuration and "
        in (page)
    )
    assert "a cell draws at most 5" not in page


def test_the_summary_section_and_its_chart(clock: type[_Clock]) -> None:
    raws = [result("ap", AP, 0, lost=2), result("ap", AP, 1)]
    cells = judge_all(raws, {})
    results = [typed(r) for r in raws]
    summary = cross_run_summary(results, cells)
    page = render_html(cells, {r.run_dir: r for r in results}, {}, (), "S", summary)
    assert '<h2 id="summary">Across runs</h2>' in page
    assert '<figure class="chart"><svg class="chart" role="img" aria-label="loss probability' in (
        page
    )
    empty = CrossRunSummary(groups=(), effects=(), decisive_settings=())
    page = render_html(cells, {r.run_dir: r for r in results}, {}, (), "S", empty)
    assert '<h2 id="summary">Across runs</h2>' in page
    assert 'aria-label="loss probability' not in page
    failure = PartFailure("the cross-run summary", "ValueError: v")
    page = render_html(cells, {r.run_dir: r for r in results}, {}, (), "S", failure)
    assert (
        '<h2 id="summary">Across runs</h2>\n<p class="part-failed">the cross-run summary failed: '
        "ValueError: v (the rest of the report stands)</p>"
    ) in page
    page = render_html(cells, {r.run_dir: r for r in results}, {}, (), "S")
    assert 'id="summary"' not in page


def test_a_summary_view_that_fails_is_shown_in_its_place(
    clock: type[_Clock], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(summary: Any) -> Any:
        raise ValueError("no view")

    monkeypatch.setattr(html_module, "summary_view", broken)
    raws = [result("ap", AP, 0)]
    cells = judge_all(raws, {})
    results = [typed(r) for r in raws]
    summary = cross_run_summary(results, cells)
    page = render_html(cells, {r.run_dir: r for r in results}, {}, (), "S", summary)
    assert "the cross-run summary failed: ValueError: no view (the rest of the report stands)" in (
        page
    )


def test_source_date_epoch_is_read_as_utc_whatever_the_machines_zone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SOURCE_DATE_EPOCH gives the same "... UTC" time on a machine set to another zone (here
    UTC+5:30, a POSIX TZ string needing no zone database), as the page says."""
    import os
    import time

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")  # 2023-11-14 22:13:20 UTC
    before = os.environ.get("TZ")
    os.environ["TZ"] = "IST-5:30"
    time.tzset()
    try:
        assert html_module.generated_at() == "2023-11-14 22:13 UTC"
    finally:
        if before is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = before
        time.tzset()
