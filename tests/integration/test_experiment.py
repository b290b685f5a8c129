"""The experiment pipeline end to end through the real CLI: brokers, faults, Spark, reports."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from harness.rundir.layout import JOURNAL
from harness.rundir.segments import read_records
from tests.integration.support import (
    CLI,
    HERE,
    acks_after,
    first_event_us,
    labelled_leftovers,
    run_cli,
    run_experiment,
    wait_for_event,
    wait_until,
)

pytestmark = pytest.mark.integration


def test_two_cell_experiment_cp_loses_nothing_ap_loses(tmp_path: Path):
    root, done = run_experiment("two-cells", tmp_path)
    results = {p.parent.parent.name: json.loads(p.read_text()) for p in root.rglob("results.json")}
    cp, ap = results["config=cp"], results["config=ap"]
    assert cp["counts"]["acked"] > 0
    assert cp["counts"]["lost"] == 0 and cp["counts"]["offset_divergent"] == 0
    assert ap["counts"]["lost"] + ap["counts"]["offset_divergent"] > 0, ap
    for result in (cp, ap):  # the one loss figure, a passed sensitivity check, a trusted journal
        assert result["loss"] == result["counts"]["lost"] + result["counts"]["unseen"]
        assert result["sensitivity"]["passed"] is True and result["sensitivity"]["removed"] >= 3
        events = (Path(result["run_dir"]) / "events.jsonl").read_text().splitlines()
        [tally] = [json.loads(e) for e in events if '"recorder_tally"' in e]
        journalled = {s: result["contract"][f"reported_{s}"] for s in tally["reports"]}
        assert tally["reports"] == journalled and tally["journal_error"] is None
    check_attribution(cp, ap)
    for cell in ("config=ap", "config=cp"):
        run_dir = root / cell / "0"
        for name in ("spec.json", "acked.parquet", "readback.parquet", "events.jsonl"):
            assert (run_dir / name).exists(), name
        assert len(list((run_dir / "broker-logs").glob("kafka-*.log"))) == 3

    report = root / "report"
    html = (report / "report.html").read_text()
    assert "EXPECTED-LOSS" in html and "PASS" in html
    assert html.count("<svg") >= 3  # the loss chart and one timeline per cell
    verdicts = {
        c["cell"]: c["verdict"] for c in json.loads((report / "report.json").read_text())["cells"]
    }
    assert verdicts == {"config=ap": "EXPECTED-LOSS", "config=cp": "PASS"}
    reps = {
        c["cell"]: c["repetitions"][0]
        for c in json.loads((report / "report.json").read_text())["cells"]
    }
    assert reps["config=ap"]["loss"] == ap["loss"] > 0
    assert reps["config=ap"]["loss_rate"] == ap["loss"] / ap["counts"]["acked"]
    suite = ET.parse(report / "junit.xml").getroot()
    assert len(suite.findall(".//testcase")) == 2
    assert suite.findall(".//failure") == []
    assert str(report / "report.html") in done.stdout
    assert labelled_leftovers(done.pid) == []


def check_attribution(cp: dict, ap: dict) -> None:
    """Every missing message has a place; AP's (acks=1 writes the cut-off leader took and then
    truncated) are on no broker's disk; segments are kept only where messages are missing."""
    for result in (cp, ap):
        assert sum(result["attribution"]["counts"].values()) == result["loss"], result
    [cp_kept] = [e for e in events_of(cp) if e["type"] == "segments"]
    assert cp_kept["kept"] is False and not (Path(cp["run_dir"]) / "segments").exists()
    if ap["loss"] == 0:  # the cell may lose by rewriting offsets only: nothing to place
        return
    [kept] = [e for e in events_of(ap) if e["type"] == "segments"]
    assert kept["kept"] is True and kept["error"] is None, kept
    assert all(b["skipped"] is None and b["files"] > 0 for b in kept["brokers"].values()), kept
    places = ap["attribution"]["counts"]
    assert places["segments_unavailable"] == places["not_examined"] == 0, ap["attribution"]
    assert places["on_no_disk"] >= 0.9 * ap["loss"], ap["attribution"]
    print(f"AP attribution: {places} (kept {kept['brokers']}, {kept['seconds']} s)")
    # The record parser on real segments: together they hold every record read back.
    run_dir = Path(ap["run_dir"])
    held = set()
    for path in (run_dir / "segments").glob("broker-*/chaos-*/*.log"):
        found = read_records(path.read_bytes(), int(path.parent.name.rsplit("-", 1)[1]))
        assert found.complete and found.records_read > 0, path
        held |= {(r.partition, r.offset, r.msg_id) for r in found.records}
    served = pq.read_table(run_dir / "readback.parquet", columns=["partition", "offset", "msg_id"])
    assert set(zip(*served.to_pydict().values(), strict=True)) <= held


def events_of(result: dict) -> list[dict]:
    """The events of a result's run directory."""
    lines = (Path(result["run_dir"]) / "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def start_one_kill(runs_dir: Path, output) -> subprocess.Popen:
    """Start `kafka-chaos run` of the long one-cell experiment in the background."""
    argv = [
        *CLI,
        "run",
        str(HERE / "experiments" / "one-kill.yaml"),
        "--runs-dir",
        str(runs_dir),
        "--quiet",
        "--no-report",
    ]
    return subprocess.Popen(argv, stdout=output, stderr=subprocess.STDOUT, text=True)


def test_crashed_harness_leaves_an_analysable_journal(tmp_path: Path):
    harness = start_one_kill(tmp_path, subprocess.DEVNULL)
    try:
        run_dir = wait_for_event(tmp_path, "fault_start", 120)
        fault_us = first_event_us(run_dir, "fault_start")
        # The journal must hold reports from both sides of the fault before the crash.
        wait_until(lambda: acks_after(run_dir, JOURNAL, fault_us), 60, "an ack after the fault")
        os.kill(harness.pid, signal.SIGKILL)
        harness.wait(30)
    finally:
        harness.kill()
    assert not (run_dir / "acked.parquet").exists()
    # A SIGKILL runs no cleanup: the next run (or `clean`) must do it.
    assert labelled_leftovers(harness.pid) != []
    cleaned = run_cli("clean")
    assert cleaned.returncode == 0 and labelled_leftovers(harness.pid) == []

    reported = run_cli(
        "report", str(run_dir.parent.parent), "--out", str(tmp_path / "rep"), "--master", "local[2]"
    )
    assert reported.returncode == 2, reported.stdout + reported.stderr  # incomplete → UNKNOWN
    acked = pq.read_table(run_dir / "acked.parquet")
    assert acked.num_rows > 300  # >= 1 s of sends at 300/s survived the crash
    result = json.loads((run_dir / "results.json").read_text())
    assert result["status"] == "incomplete"
