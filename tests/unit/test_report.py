"""The report on crafted results: HTML, Markdown, report.json and JUnit, each rendering
read back; no Docker, no Spark."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from analysis.judge.outcomes import VERDICT_MEANING, Verdict
from analysis.report.cells import MAX_TIMELINES_PER_CELL, cell_view
from analysis.report.json_report import SCHEMA_VERSION
from analysis.report.junit import repetition_seconds, write_junit
from analysis.report.marks import fault_windows, leader_changes
from analysis.report.render import ReportPaths, render_report
from harness.rundir import layout
from harness.rundir.provenance import (
    ExperimentProvenance,
    read_provenance,
)
from tests.unit.report_runs import (
    AP,
    CP,
    PROVENANCE,
    RUNS,
    events_with_fault_and_leader_change,
    healthy_events,
    judge_all,
    priced,
    result,
    us,
)
from tests.unit.results_json import typed


def test_crafted_cells_have_the_expected_verdicts(crafted: Any) -> None:
    cells = crafted[0]
    assert [(c.cell, c.verdict) for c in cells] == [
        ("ap-leader-partition", Verdict.EXPECTED_LOSS),
        ("cp-leader-kill", Verdict.VIOLATION),
    ]


def test_events_give_fault_windows_and_leader_changes() -> None:
    events = events_with_fault_and_leader_change()
    [window] = fault_windows(events)
    assert (window.label, window.start_us, window.end_us) == ("kill leader (node 1)", us(8), us(12))
    [change] = leader_changes(events)
    assert (change.partition, change.old, change.new, change.label) == (0, 1, 2, "p0 1→2")


def test_html_has_matrix_verdicts_and_one_svg_per_timeline(rendered: ReportPaths) -> None:
    html = rendered.html.read_text()
    assert "<h1>Chaos report</h1>" in html
    assert "1 of 2 cells violate the documented guarantees" in html
    for cell in ("ap-leader-partition", "cp-leader-kill"):
        assert f'<a href="#cell-chaos-{cell}">{cell}</a>' in html
        assert f'id="cell-chaos-{cell}"' in html
    for verdict in Verdict:
        assert f">{verdict.value}</span>" in html  # the legend names every verdict
    matrix = html[html.index('<table class="matrix">') : html.index("</table>")]
    assert 'class="badge v-expected-loss">EXPECTED-LOSS' in matrix
    assert 'class="badge v-violation">VIOLATION' in matrix
    assert '1.5<span class="range">0–3</span>' in matrix  # lost over two reps: mean, min–max
    assert html.count("<svg") == 3 + 1  # one per repetition timeline, plus the loss chart
    assert "kill leader (node 1)" in html
    assert "p0 1→2" in html  # the leader change is labelled in the chart
    assert "zombie leader keeps acking" in html  # the citation
    assert "<td>1234</td>" in html  # read-back msg_id at the divergent offset
    header = matrix[: matrix.index("</tr>")]
    assert header.index(">verdict<") < header.index(">sent<")  # the first data column
    assert "sensitivity check passed: 5 of 5 acknowledged records" in html
    assert (
        "where the 3 missing acknowledged messages are: 2 on no broker&#39;s disk (Kafka lost "
        "them); 1 on a broker&#39;s disk, yet not read back; 1 of those on disk only at or past"
    ) in html
    assert "(a truncated replica&#39;s message counts as on no broker&#39;s disk)" in html
    assert html.count("missing acknowledged messages are:") == 1  # only the lossy repetition


def test_html_is_offline(rendered: ReportPaths) -> None:
    html = rendered.html.read_text()
    assert "<script" not in html
    assert "<link" not in html
    assert "@import" not in html
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", html)
    assert not re.search(r"url\(\s*['\"]?(https?:)?//", html)
    assert "<metadata>" not in html


def test_markdown_has_the_matrix_and_reasons(rendered: ReportPaths) -> None:
    md = rendered.markdown.read_text()
    assert "| sent | acked | lost | diverged | moved | configuration |" in md
    assert "Zero in every cell, so not shown: unseen, expired, dup," in md
    assert "| `ap-leader-partition` |" in md
    assert "**EXPECTED-LOSS** |" in md
    assert "**VIOLATION** |" in md
    assert "### cp-leader-kill: VIOLATION" in md
    assert "forbidden acknowledged offset rewritten" in md


def test_json_parses_with_verdicts(rendered: ReportPaths) -> None:
    data = json.loads(rendered.json.read_text())
    assert data["exit_code"] == 1
    assert {c["cell"]: c["verdict"] for c in data["cells"]} == {
        "ap-leader-partition": "EXPECTED-LOSS",
        "cp-leader-kill": "VIOLATION",
    }
    ap = data["cells"][0]
    assert ap["guarantee"]["loss"] == "allowed"
    assert ap["stats"]["counts"]["lost"] == {"mean": 1.5, "min": 0, "max": 3}
    assert ap["stats"]["loss_rate"] == pytest.approx(3 / 3800)
    assert [r["verdict"] for r in ap["repetitions"]] == ["PASS", "EXPECTED-LOSS"]
    assert data["verdict_counts"]["VIOLATION"] == 1


def test_report_without_timeline_or_events_still_renders(tmp_path: Path) -> None:
    bare = {**result("bare", CP, 0), "timeline": [], "status": "incomplete", "counts": None}
    cells = judge_all([bare], {})
    paths = render_report(cells, [typed(bare)], {}, (), tmp_path, "Bare")
    html = paths.html.read_text()
    assert "No timeline recorded" in html
    assert "Inconclusive" in html


def test_junit_counts_and_failures(crafted: Any, tmp_path: Path) -> None:
    cells, _, _ = crafted
    extra_results = [
        result("ap-not-provoked", AP, 0),
        result("ap-not-provoked", AP, 1),
        {
            **result("cp-unknown", CP, 0),
            "status": "error",
            "error": "cluster did not start",
            "counts": None,
        },
    ]
    events = {r["run_dir"]: healthy_events() for r in extra_results}
    extra = judge_all(extra_results, events)
    events |= {r.run_dir: events_with_fault_and_leader_change() for r in crafted[1]}
    path = write_junit([*cells, *extra], events, tmp_path / "junit" / "kafka-chaos.xml")
    root = ET.parse(path).getroot()
    [suite] = root.iter("testsuite")
    assert suite.get("name") == "kafka-chaos"
    attrs = {k: suite.get(k) for k in ("tests", "failures", "errors", "skipped")}
    assert attrs == {"tests": "6", "failures": "1", "errors": "1", "skipped": "2"}
    cases = {(c.get("classname"), c.get("name")): c for c in suite.iter("testcase")}
    assert set(cases) == {
        ("chaos.ap-leader-partition", "rep-0"),
        ("chaos.ap-leader-partition", "rep-1"),
        ("chaos.cp-leader-kill", "rep-0"),
        ("chaos.ap-not-provoked", "rep-0"),
        ("chaos.ap-not-provoked", "rep-1"),
        ("chaos.cp-unknown", "rep-0"),
    }
    failure = cases[("chaos.cp-leader-kill", "rep-0")].find("failure")
    assert failure is not None
    assert failure.get("message", "").startswith(
        "forbidden acknowledged offset rewritten: 1 acknowledged offsets rewritten"
    )
    assert "msg_id 77" in (failure.text or "")
    error = cases[("chaos.cp-unknown", "rep-0")].find("error")
    assert error is not None
    assert "cluster did not start" in error.get("message", "")
    skipped = cases[("chaos.ap-not-provoked", "rep-1")].find("skipped")
    assert skipped is not None
    assert skipped.get("message") == (
        "NOT-PROVOKED: loss is allowed but never happened: the faults were too weak"
    )
    # Each case lasts from its repetition's first event to its last: t=0 (workload start)
    # to t=30 (read-back) for the crafted cells, t=29 to t=30 for the extra ones.
    assert cases[("chaos.cp-leader-kill", "rep-0")].get("time") == "30.000"
    assert cases[("chaos.ap-not-provoked", "rep-0")].get("time") == "1.000"
    assert suite.get("time") == root.get("time") == f"{3 * 30 + 3 * 1:.3f}"
    assert cases[("chaos.ap-leader-partition", "rep-1")].find("failure") is None
    out = cases[("chaos.ap-leader-partition", "rep-1")].find("system-out")
    assert out is not None and "loss: 3 of 1900 acked (0.158 %)" in (out.text or "")


def test_a_repetition_lasts_from_its_first_to_its_last_event() -> None:
    # an event without a stamp, and one of a type this analysis does not know, are left out
    events = [
        {"type": "phase", "ts_us": us(2)},
        {"type": "sample"},
        {"type": "sample", "ts_us": us(9.5)},
        {"type": "from-a-newer-harness", "ts_us": us(20)},
    ]
    assert repetition_seconds(events) == pytest.approx(7.5)
    assert repetition_seconds([{"type": "x"}]) == repetition_seconds([]) == 0.0


def test_not_provoked_reads_the_same_in_every_rendering(tmp_path: Path) -> None:
    quiet = [result("ap-quiet", AP, 0), result("ap-quiet", AP, 1)]
    events = {r["run_dir"]: healthy_events() for r in quiet}
    cells = judge_all(quiet, events)
    assert [c.verdict for c in cells] == [Verdict.NOT_PROVOKED]
    paths = render_report(cells, [typed(r) for r in quiet], events, (), tmp_path, "Quiet")
    junit = ET.parse(write_junit(cells, events, tmp_path / "junit.xml")).getroot()
    word, meaning = Verdict.NOT_PROVOKED.value, VERDICT_MEANING[Verdict.NOT_PROVOKED]
    html, md = paths.html.read_text(), paths.markdown.read_text()
    data = json.loads(paths.json.read_text())
    assert f'class="badge v-not-provoked">{word}</span>' in html and meaning in html
    assert f"### ap-quiet: {word}" in md and f"**{word}** |" in md
    assert data["cells"][0]["verdict"] == word and data["verdict_meanings"][word] == meaning
    assert {s.get("message") for s in junit.iter("skipped")} == {f"{word}: {meaning}"}
    spellings = {"NOT_PROVOKED", "Not provoked", "not provoked", "NOT PROVOKED"}
    for text in (html, md, paths.json.read_text(), ET.tostring(junit, encoding="unicode")):
        assert not any(spelling in text for spelling in spellings)


def test_every_rendering_shows_the_provenance(rendered: ReportPaths) -> None:
    html, md = rendered.html.read_text(), rendered.markdown.read_text()
    data = json.loads(rendered.json.read_text())
    shown = {
        "git revision": "0123abcd" * 5,
        "command line": "kafka-chaos run 'experiments/chaos file.yaml' --quiet",
        "seed": "42 (repetition r runs with seed + r)",
        "image": "kafka-chaos/kafka:4.3.1-abc",
        "image id": "sha256:feed",
        "Kafka version": "4.3.1",
        "confluent-kafka": "2.12.0",
        "librdkafka": "2.12.1",
        "cores": "2",
        "memory": "8.0 GiB",
    }
    assert data["schema_version"] == SCHEMA_VERSION == 3
    [recorded, old] = data["provenance"]
    assert recorded["shown"] == shown and recorded["root"] == "runs/chaos/ts"
    assert recorded["recorded"]["command_line"] == list(PROVENANCE.command_line)
    assert recorded["recorded"]["images"][0]["image_id"] == "sha256:feed"
    assert old["recorded"] is None and "older harness" in old["problem"]
    for label, text in shown.items():
        assert f"| {label} | {text} |" in md
        assert f'<th class="name">{label}</th><td class="name"><code>{text}</code>' in html.replace(
            "&#39;", "'"
        )
    assert "| provenance | not recorded: no provenance.json: the run was made by an older" in md
    assert "Runs under `runs/old/ts`" in md and "<code>runs/old/ts</code>" in html


def test_provenance_is_read_from_each_experiment_run_root(tmp_path: Path) -> None:
    recorded = tmp_path / "runs" / "chaos" / "ts1"
    recorded.mkdir(parents=True)
    PROVENANCE.write(recorded)
    broken = tmp_path / "runs" / "chaos" / "ts2"
    broken.mkdir(parents=True)
    (broken / layout.PROVENANCE).write_text('{"experiment": "chaos"}')
    run_dirs = [
        recorded / "cell-a" / "0",
        recorded / "cell-b" / "1",
        broken / "cell-a" / "0",
        tmp_path / "runs" / "chaos" / "ts3" / "cell-a" / "0",
    ]
    runs = read_provenance(run_dirs)
    assert [r.root for r in runs] == [str(recorded), str(broken), str(run_dirs[3].parent.parent)]
    assert runs[0] == ExperimentProvenance(str(recorded), PROVENANCE)
    assert runs[1].provenance is None and "provenance.json unreadable" in (runs[1].problem or "")
    assert runs[2].provenance is None and "no provenance.json" in (runs[2].problem or "")


def test_every_rendering_shows_the_price_of_safety(crafted: Any, tmp_path: Path) -> None:
    cells, results, events = crafted
    ap0, ap1, cp = results
    results = [
        priced(ap0, 1.0, 0, 0.2),
        replace(ap1, availability_error="AvailabilityError: no acked.parquet in x"),
        priced(cp, 9.25, 40, None),
    ]
    paths = render_report(cells, results, events, RUNS, tmp_path, "Priced")
    html, md = paths.html.read_text(), paths.markdown.read_text()
    matrix = html[html.index('<table class="matrix">') : html.index("</table>")]
    for label in ("partition stall (s)", "topic stall (s)", "failed sends", "first ack after heal"):
        assert f">{label}" in matrix
    assert '<td class="num price ">1.0<span class="range">1 of 2 reps</span></td>' in matrix
    assert '<td class="num price ">9.2</td>' in matrix  # 9.25 s, one decimal
    assert '<td class="num price notable">40<span class="range">60 indeterminate</span>' in matrix
    assert '<td class="num price notable">never<span class="range">1 heal with no ack after' in (
        matrix
    )
    assert "price of safety: longest stall of one partition 9.2 s (partition 0, t=8.0–17.2 s)" in (
        html
    )
    assert "price of safety not measured: AvailabilityError: no acked.parquet in x" in html
    assert "longest stall, no partition acking" in html  # the timeline legend
    assert "p0 stall 9.2 s" in html  # the longest one-partition stall on the timeline
    head = next(line for line in md.splitlines() if line.startswith("| cell |"))
    assert head.startswith(
        "| cell | verdict | loss | loss rate | partition stall (s) | topic stall (s) | "
        "failed sends | first ack after heal (s) | sent |"
    )
    assert "| 9.2 | 4.6 | 40 (60 indeterminate) | never (1 heal with no ack after) |" in md
    data = json.loads(paths.json.read_text())
    assert data["schema_version"] == SCHEMA_VERSION
    ap, cp_cell = data["cells"]
    assert ap["price_of_safety"]["measured"] == 1
    assert ap["price_of_safety"]["unmeasured"] == [
        "repetition 1: AvailabilityError: no acked.parquet in x"
    ]
    assert ap["repetitions"][0]["availability"]["partitions"]["0"]["longest_gap_s"] == 1.0
    assert ap["repetitions"][1]["availability"] is None
    price = cp_cell["price_of_safety"]
    assert (price["longest_partition_gap_s"], price["failed"], price["heals_without_ack"]) == (
        9.25,
        40,
        1,
    )


def test_a_cell_draws_its_worst_repetitions_and_links_the_rest(tmp_path: Path) -> None:
    reps = [result("many", AP, rep, lost=3 if rep == 7 else 0) for rep in range(9)]
    cells = judge_all(reps, {})
    (view,) = [cell_view(cell, {r.run_dir: r for r in map(typed, reps)}, {}) for cell in cells]
    drawn = [rep.repetition for rep in view.repetitions if rep.timeline is not None]
    assert MAX_TIMELINES_PER_CELL == 5
    assert drawn == [0, 1, 2, 3, 7]  # the one with a loss, whatever its number, then the first
    assert [r.repetition for r in view.repetitions if r.timeline_skipped] == [4, 5, 6, 8]
    html = render_report(cells, [typed(r) for r in reps], {}, (), tmp_path, "Many").html
    assert html.read_text().count("Timeline not drawn: a cell draws at most 5") == 4


def test_a_group_run_draws_its_lag_on_a_right_hand_axis(tmp_path: Path) -> None:
    grouped = result("grouped", CP, 0)
    grouped["timeline"] = [
        {**second, "processed": 90, "group_lag": 400 - 20 * second["t_s"]}
        for second in grouped["timeline"]
    ]
    plain = result("plain", CP, 0)
    cells = judge_all([grouped, plain], {})
    html = render_report(cells, [typed(grouped), typed(plain)], {}, (), tmp_path, "Lag").html
    text = html.read_text()
    assert text.count("group lag (records)") == 1  # the axis, on the grouped run's timeline only
    assert text.count("group lag (right axis)") == 1  # and its legend entry
