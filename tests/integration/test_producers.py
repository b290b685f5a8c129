"""workload.producers end to end through the CLI: three producer processes under a fault."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from harness.rundir.layout import producer_journal
from harness.rundir.records import PRODUCER_ID_STRIDE
from tests.integration.support import (
    CLI,
    HERE,
    acks_after,
    first_event_us,
    labelled_leftovers,
    only_dir,
    run_cli,
    run_experiment,
    wait_for_event,
    wait_until,
)
from tests.integration.test_interrupts import (
    CTRL_C,
    assert_clean_interrupt,
    has_type,
    start_run,
    wait_for,
)

PRODUCERS = 3


def events_in(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]


def alive(pid: int) -> bool:
    """True when `pid` runs and is no zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != "Z"


def producer_pids(run_dir: Path) -> list[int]:
    [ready] = [e for e in events_in(run_dir) if e.get("phase") == "producers-ready"]
    return ready["pids"]


def repetition_verdict(root: Path) -> dict:
    """The one repetition of report.json: its verdict and reasons."""
    [cell] = json.loads((root / "report" / "report.json").read_text())["cells"]
    [repetition] = cell["repetitions"]
    return repetition


def check_journals_and_acked(run_dir: Path) -> dict:
    """Each producer's journal is there; acked.parquet holds each producer's msg_ids, once."""
    for producer in range(PRODUCERS):
        for part in ("meta.json", "sends.arrows", "acks.arrows"):
            assert (run_dir / f"journal-p{producer}-{part}").is_file(), (producer, part)
    assert not (run_dir / "journal-meta.json").exists()
    acked = pq.read_table(run_dir / "acked.parquet").to_pydict()
    ids = acked["msg_id"]
    assert None not in ids and len(set(ids)) == len(ids)
    assert {i // PRODUCER_ID_STRIDE for i in ids} == set(range(PRODUCERS))
    assert acked["producer"] == [i // PRODUCER_ID_STRIDE for i in ids]
    assert all(k.startswith(f"p{p}-") for k, p in zip(acked["key"], acked["producer"], strict=True))
    return acked


@pytest.mark.integration
def test_three_producers_under_a_leader_kill(tmp_path: Path):
    root, done = run_experiment("producers", tmp_path)
    [run_dir] = [p.parent for p in root.rglob("results.json")]
    acked = check_journals_and_acked(run_dir)
    ok = [s for s in acked["status"] if s == "ok"]
    assert len(ok) > 0.5 * 600 * 20, len(ok)  # most of 20 s at 600/s were acknowledged
    sends = len(acked["msg_id"])
    for producer in range(PRODUCERS):  # each sent its share: a third of the messages
        sent = sum(1 for p in acked["producer"] if p == producer)
        assert abs(sent - sends / PRODUCERS) <= 0.05 * sends, (producer, sent, sends)
    result = json.loads((run_dir / "results.json").read_text())
    assert result["counts"]["acked"] == len(ok)
    assert result["contract"]["repeated_msg_ids"] == 0
    verdict = repetition_verdict(root)
    assert verdict["verdict"] == "PASS", verdict["reasons"]
    events = events_in(run_dir)
    [tally] = [e for e in events if e["type"] == "recorder_tally"]
    assert tally["journal_error"] is None and len(tally["producers"]) == PRODUCERS
    assert tally["reports"] == {s: result["contract"][f"reported_{s}"] for s in tally["reports"]}
    # each producer's part, in the shape every client's fleet writes, adding up to the whole
    assert [p["producer"] for p in tally["producers"]] == list(range(PRODUCERS))
    assert not any(p["journal_error"] or p["problem"] for p in tally["producers"])
    summed = {s: sum(p["reports"][s] for p in tally["producers"]) for s in tally["reports"]}
    assert summed == tally["reports"]
    assert not [e for e in events if e["type"] in ("producer_crashed", "harness_error")]
    read = pq.read_table(run_dir / "readback.parquet", columns=["key"]).to_pydict()["key"]
    assert {k.split("-")[0] for k in read} == {f"p{p}" for p in range(PRODUCERS)}
    assert not any(alive(pid) for pid in producer_pids(run_dir))
    assert labelled_leftovers(done.pid) == []


@pytest.mark.chaos
def test_a_killed_producer_is_reported_and_its_journal_kept(tmp_path: Path):
    argv = [*CLI, "run", str(HERE / "experiments" / "producers.yaml"), "--runs-dir"]
    harness = subprocess.Popen(
        [*argv, str(tmp_path), "--quiet", "--master", "local[2]"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        run_dir = wait_for_event(tmp_path, "fault_start", 180)
        victim = producer_pids(run_dir)[1]
        fault_us = first_event_us(run_dir, "fault_start")
        wait_until(  # its journal holds sends from before the fault and after
            lambda: acks_after(run_dir, producer_journal(1), fault_us), 60, "an ack after the fault"
        )
        os.kill(victim, signal.SIGKILL)
        output, _ = harness.communicate(timeout=300)
    finally:
        harness.kill()
    assert harness.returncode != 0, output
    [crash] = [e for e in events_in(run_dir) if e["type"] == "producer_crashed"]
    assert (crash["producer"], crash["pid"], crash["exitcode"]) == (1, victim, -signal.SIGKILL)
    [error] = [e["error"] for e in events_in(run_dir) if e["type"] == "harness_error"]
    assert "producer 1: exited with code -9" in error
    check_journals_and_acked(run_dir)  # the killed producer's sends are in acked.parquet
    root = only_dir(tmp_path / "producers")
    verdict = repetition_verdict(root)
    assert verdict["verdict"] == "UNKNOWN", verdict
    assert any("producer 1: exited" in reason for reason in verdict["reasons"]), verdict
    wait_until(lambda: not any(alive(p) for p in producer_pids(run_dir)), 10, "no producer left")
    assert labelled_leftovers(harness.pid) == []


@pytest.mark.chaos
def test_a_crashed_harness_leaves_every_producers_journal_analysable(tmp_path: Path):
    argv = [*CLI, "run", str(HERE / "experiments" / "producers.yaml"), "--runs-dir"]
    harness = subprocess.Popen(
        [*argv, str(tmp_path), "--quiet", "--no-report"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        run_dir = wait_for_event(tmp_path, "fault_start", 180)
        fault_us = first_event_us(run_dir, "fault_start")
        for producer in range(PRODUCERS):  # every journal holds reports from both sides
            wait_until(
                lambda p=producer: acks_after(run_dir, producer_journal(p), fault_us),
                60,
                f"producer {producer} to journal an ack after the fault",
            )
        pids = producer_pids(run_dir)
        os.kill(harness.pid, signal.SIGKILL)  # no cleanup runs, no journal is closed
        harness.wait(30)
    finally:
        harness.kill()
    # The producers see their harness gone and stop by themselves.
    wait_until(lambda: not any(alive(p) for p in pids), 30, "every producer to stop")
    assert not (run_dir / "acked.parquet").exists()
    cleaned = run_cli("clean")
    assert cleaned.returncode == 0 and labelled_leftovers(harness.pid) == []

    out = str(tmp_path / "rep")
    reported = run_cli("report", str(run_dir.parent.parent), "--out", out, "--master", "local[2]")
    assert reported.returncode == 2, reported.stdout + reported.stderr  # incomplete → UNKNOWN
    acked = check_journals_and_acked(run_dir)  # every producer's journal, merged
    after = {p for p, ts in zip(acked["producer"], acked["ack_ts_us"], strict=True)
             if ts is not None and ts > fault_us}  # fmt: skip
    assert after == set(range(PRODUCERS))  # each one's acks from after the fault survived
    result = json.loads((run_dir / "results.json").read_text())
    assert result["status"] == "incomplete"


@pytest.mark.chaos
def test_ctrl_c_stops_every_producer_and_keeps_their_journals(tmp_path: Path):
    terminal = start_run(tmp_path, "producers.yaml", "--no-report")
    try:
        wait_for(terminal, tmp_path, has_type("fault_start"), "the fault", timeout_s=180)
        terminal.type(CTRL_C)  # the kernel signals the harness and every producer process
        code, seconds = terminal.wait_exit(60)
        assert_clean_interrupt(terminal, code, seconds)  # 130, bounded, no process left
    finally:
        terminal.close()
    run_dir = next(tmp_path.rglob("events.jsonl")).parent
    check_journals_and_acked(run_dir)
    events = events_in(run_dir)
    assert not [e for e in events if e["type"] == "producer_crashed"], events
    [tally] = [e for e in events if e["type"] == "recorder_tally"]
    assert tally["journal_error"] is None and len(tally["producers"]) == PRODUCERS
