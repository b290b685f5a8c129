"""Render HTML/Markdown/JSON/JUnit from crafted results and events; no Docker, no Spark."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from analysis import pipeline
from analysis.crossrun.summary import cross_run_summary
from analysis.judge import verdicts
from analysis.judge.outcomes import VERDICT_MEANING, CellVerdict, Verdict
from analysis.model.anomalies import ANOMALY_NAMES
from analysis.model.availability import Availability, Gap, HealRecovery, PartitionAvailability
from analysis.model.results import RunResult
from analysis.report import cells as cells_module
from analysis.report import html as html_module
from analysis.report import json_report as json_module
from analysis.report import junit as junit_module
from analysis.report import markdown as markdown_module
from analysis.report import render
from analysis.report.cells import MAX_TIMELINES_PER_CELL, cell_view
from analysis.report.json_report import SCHEMA_VERSION
from analysis.report.junit import repetition_seconds, write_junit
from analysis.report.marks import fault_windows, leader_changes
from analysis.report.render import ReportPaths, render_report
from analysis.report.safe import PartFailure
from harness.rundir import layout
from harness.rundir.provenance import (
    BrokerImageUsed,
    Provenance,
    RunProvenance,
    read_provenance,
)
from kafka_chaos import cli
from kafka_chaos.commands import report as report_command
from tests.unit.results_json import typed

T0_S = 1_700_000_000.0
CP = {
    "acks": "all",
    "min_insync_replicas": 2,
    "unclean_leader_election": False,
    "enable_idempotence": True,
    "max_in_flight": 5,
    "replication_factor": 3,
    "partitions": 2,
    "fault_class": "leader-kill",
    "kafka_version": "3.9.0",
}
AP = {
    **CP,
    "acks": "1",
    "min_insync_replicas": 1,
    "enable_idempotence": False,
    "fault_class": "leader-partition",
}
ZERO = dict.fromkeys(ANOMALY_NAMES, 0)


def timeline(seconds: int = 20) -> list[dict[str, Any]]:
    """A per-second timeline with a dip and a latency spike around t=8..11."""
    points = []
    for t in range(seconds):
        hurt = 8 <= t <= 11
        points.append(
            {
                "t_s": t,
                "epoch_s": T0_S + t,
                "sent": 100,
                "ok": 40 if hurt else 100,
                "failed": 10 if hurt else 0,
                "indeterminate": 50 if hurt else 0,
                "ack_latency_p50_ms": 900.0 if hurt else 4.0,
                "ack_latency_p99_ms": None if t == 9 else (4000.0 if hurt else 12.0),
            }
        )
    return points


def result(cell: str, config: dict[str, Any], rep: int, **counts: int) -> dict[str, Any]:
    """A complete repetition of 2000 sends with the given anomaly counts."""
    all_counts = {
        "sent": 2000,
        "acked": 1900,
        "failed": 40,
        "indeterminate": 60,
        "read": 1950,
        **ZERO,
        **counts,
    }
    examples = {}
    if counts.get("lost"):
        examples["lost"] = [
            {"msg_id": 1000 + i, "partition": 0, "offset": 500 + i} for i in range(counts["lost"])
        ]
    if counts.get("offset_divergent"):
        examples["offset_divergent"] = [
            {"msg_id": 77, "partition": 1, "offset": 300, "readback_msg_id_at_offset": 1234}
        ]
    return {
        "run_dir": f"runs/chaos/ts/{cell}/{rep}",
        "experiment": "chaos",
        "cell": cell,
        "repetition": rep,
        "status": "complete",
        "error": None,
        "axes": {},
        "config": config,
        "counts": all_counts,
        "loss": all_counts["lost"] + all_counts["unseen"],
        "loss_by_partition": {"0": counts["lost"]} if counts.get("lost") else {},
        "divergence_by_partition": {"1": 1} if counts.get("offset_divergent") else {},
        "contract": {
            "repeated_msg_ids": 0,
            "unknown_statuses": 0,
            "reported_ok": 1900,
            "reported_failed": 40,
            "reported_indeterminate": 60,
        },
        "examples": examples,
        "sensitivity": {"removed": 5, "found": 5, "passed": True},
        "attribution": attribution(all_counts["lost"] + all_counts["unseen"]),
        "timeline": timeline(),
    }


def attribution(loss: int) -> dict[str, Any]:
    """All but one missing message on no disk, the last one on a disk past the watermark."""
    on_disk = min(loss, 1)
    counts = {"on_no_disk": loss - on_disk, "on_disk_not_served": on_disk}
    counts |= {"segments_unavailable": 0, "not_examined": 0}
    note = "a truncated replica's message is on_no_disk"
    return {"counts": counts, "examples": [], "note": note, "beyond_served": on_disk}


def judge_all(results: list[dict[str, Any]], events: dict[str, Any]) -> list[CellVerdict]:
    """verdicts.judge_all of crafted results.json objects."""
    return verdicts.judge_all([typed(r) for r in results], events)


PROVENANCE = Provenance(
    experiment="chaos",
    git_revision="0123abcd" * 5,
    command_line=("kafka-chaos", "run", "experiments/chaos file.yaml", "--quiet"),
    seed=42,
    images=(
        BrokerImageUsed(
            tag="kafka-chaos/kafka:4.3.1-abc", image_id="sha256:feed", kafka_version="4.3.1"
        ),
    ),
    confluent_kafka_version="2.12.0",
    librdkafka_version="2.12.1",
    cores=2,
    memory_bytes=8 * 2**30,
    started_at_us=1,
)
RUNS = (
    RunProvenance("runs/chaos/ts", PROVENANCE),
    RunProvenance("runs/old/ts", None, "no provenance.json: the run was made by an older harness"),
)


def us(t_s: float) -> int:
    """Epoch microseconds of t_s seconds into the run."""
    return int((T0_S + t_s) * 1e6)


def healthy_events() -> list[dict[str, Any]]:
    """A complete read-back and a recorder tally agreeing with result()'s journal."""
    reports = {"ok": 1900, "failed": 40, "indeterminate": 60}
    return [
        {"type": "readback", "ts_us": us(30), "complete": True, "high_watermarks": {"0": 1}},
        {"type": "recorder_tally", "ts_us": us(29), "reports": reports, "journal_error": None},
    ]


def events_with_fault_and_leader_change() -> list[dict[str, Any]]:
    """A leader kill of node 1 from t=8 to t=12; partition 0 moves from leader 1 to 2."""

    def sample(t: float, leader0: int, isr0: list[int]) -> dict[str, Any]:
        return {
            "type": "sample",
            "ts_us": us(t),
            "controller": 3,
            "partitions": [
                {"partition": 0, "leader": leader0, "isr": isr0},
                {"partition": 1, "leader": 2, "isr": [1, 2, 3]},
            ],
        }

    return [
        *healthy_events(),
        {"type": "phase", "ts_us": us(0), "phase": "workload-start"},
        sample(1, 1, [1, 2, 3]),
        sample(7, 1, [1, 2, 3]),
        {
            "type": "fault_start",
            "ts_us": us(8),
            "fault_id": 1,
            "fault": "kill",
            "target": "leader",
            "nodes": [1],
            "detail": {},
        },
        sample(9, 2, [2, 3]),
        {"type": "fault_end", "ts_us": us(12), "fault_id": 1, "fault": "kill", "nodes": [1]},
        sample(13, 2, [2, 3, 1]),
    ]


@pytest.fixture
def crafted() -> tuple[list[CellVerdict], list[RunResult], dict[str, list[dict[str, Any]]]]:
    """Two cells: AP (2 reps, one lost data: EXPECTED-LOSS) and CP (diverged: VIOLATION)."""
    results = [
        result("ap-leader-partition", AP, 0),
        result("ap-leader-partition", AP, 1, lost=3),
        result("cp-leader-kill", CP, 0, offset_divergent=1, moved=1),
    ]
    events = {r["run_dir"]: events_with_fault_and_leader_change() for r in results}
    return judge_all(results, events), [typed(r) for r in results], events


@pytest.fixture
def rendered(crafted: Any, tmp_path: Path) -> ReportPaths:
    """The report of the crafted cells."""
    cells, results, events = crafted
    return render_report(cells, results, events, RUNS, tmp_path / "report", "Chaos report")


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
    assert "(a truncated replica&#39;s message is on_no_disk)" in html
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
    assert "| cell | configuration | sent | acked | loss | lost |" in md
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
    assert runs[0] == RunProvenance(str(recorded), PROVENANCE)
    assert runs[1].provenance is None and "provenance.json unreadable" in (runs[1].problem or "")
    assert runs[2].provenance is None and "no provenance.json" in (runs[2].problem or "")


def priced(result: RunResult, stall_s: float, failed: int, recovery_s: float | None) -> RunResult:
    """The result with availability figures: partition 0 stalls `stall_s` from t=8, the topic
    half as long, and every partition acks again `recovery_s` after the heal at t=12."""

    def gap(seconds: float) -> Gap:
        return Gap(us(8), us(8 + seconds), 8.0, 8.0 + seconds)

    availability = Availability(
        workload_start_us=us(0),
        workload_end_us=us(20),
        window_from_events=True,
        ok=1900,
        failed=failed,
        indeterminate=60,
        failed_without_partition=0,
        indeterminate_without_partition=60,
        longest_gap=gap(stall_s / 2),
        partitions=(
            PartitionAvailability(0, 900, failed, 0, gap(stall_s)),
            PartitionAvailability(1, 1000, 0, 0, gap(0.5)),
        ),
        heals=(
            HealRecovery(1, "kill", us(12), 12.0, True, 0.01, {0: recovery_s, 1: 0.01}),
            HealRecovery(2, "kill", us(25), 25.0, False, None, {0: None, 1: None}),
        ),
    )
    return replace(result, availability=availability)


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
    assert head.endswith("| verdict | partition stall (s) | topic stall (s) | failed sends | "
                         "first ack after heal (s) |")  # fmt: skip
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


# ---------------------------------------------------------------------------------------------
# Check-safe: a part that fails shows its error in place, and the rest is written


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


def _raising(message: str, only: str | None = None, at: int = 0) -> Any:
    """A stand-in that raises RuntimeError(message), for every call or only when `only` is in
    its argument number `at` (as text); other calls go to `real`, set on it before use."""

    def stand_in(*args: Any, **kwargs: Any) -> Any:
        if only is None or only in str(args[at]):
            raise RuntimeError(message)
        return stand_in.real(*args, **kwargs)  # type: ignore[attr-defined]

    return stand_in


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


def _analyse_without_spark(
    monkeypatch: pytest.MonkeyPatch, crafted: Any, tmp_path: Path
) -> list[str]:
    """Make `kafka-chaos report` analyse the crafted results without Java or Spark; return its
    argv's run pattern."""
    _, results, events = crafted
    monkeypatch.setattr(report_command, "require_java", lambda: True)
    monkeypatch.setattr(pipeline, "find_runs", lambda patterns: [Path(r.run_dir) for r in results])
    monkeypatch.setattr(pipeline, "reconcile_runs", lambda run_dirs, master: results)
    monkeypatch.setattr(pipeline, "write_results", lambda results: None)
    monkeypatch.setattr(pipeline, "read_evidence_by_run", lambda results: events)
    monkeypatch.setattr(pipeline, "read_provenance", lambda run_dirs: list(RUNS))
    return [str(tmp_path / "runs")]


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
    assert cli.main(["report", *runs, "--out", str(out)]) == 2
    assert f"error: no report file could be written under {out}" in capsys.readouterr().err
