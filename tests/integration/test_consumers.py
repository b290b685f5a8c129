"""workload.consumers end to end through the CLI: a group of two under consumer faults."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from analysis.checks.consumers import processed_table
from tests.integration.support import run_experiment
from tests.integration.test_interrupts import (
    CTRL_C,
    assert_clean_interrupt,
    has_type,
    start_run,
    wait_for,
)
from tests.integration.test_producers import alive, events_in, repetition_verdict


@pytest.mark.integration
def test_an_at_least_once_group_processes_every_acknowledged_message(tmp_path: Path):
    root, _ = run_experiment("consumers", tmp_path)
    [run_dir] = [p.parent for p in root.rglob("results.json")]
    result = json.loads((run_dir / "results.json").read_text())
    events = events_in(run_dir)

    # The faults acted on the members: consumer-0 killed and started again, consumer-1 paused,
    # then consumer-0 made to leave the group (a clean close, not a crash) and started again.
    starts = [e for e in events if e.get("type") == "fault_start"]
    assert [(e["fault"], e["hosts"], e["nodes"]) for e in starts] == [
        ("consumer-kill", ["consumer-0"], []),
        ("consumer-pause", ["consumer-1"], []),
        ("consumer-rebalance", ["consumer-0"], []),
    ]
    assert (run_dir / "consumer-c0-r2-processed.arrows").is_file()  # its third start
    [end] = [e for e in events if e.get("type") == "consumers"]
    assert end["caught_up"] is True and end["starts"] == {"consumer-0": 3, "consumer-1": 1}
    assert end["journal_errors"] == [] and end["crashes"] == []

    # The group's lag is on the timeline, and a group that caught up ends it at zero.
    lags = [s["group_lag"] for s in result["timeline"] if s["group_lag"] is not None]
    assert lags and max(lags) > 0 and lags[-1] == 0, lags

    # Every acknowledged message of the log was processed by some member.
    acked = pq.read_table(run_dir / "acked.parquet").to_pydict()
    ok = {m for m, s in zip(acked["msg_id"], acked["status"], strict=True) if s == "ok"}
    read = set(pq.read_table(run_dir / "readback.parquet")["msg_id"].to_pylist())
    processed = set(processed_table(run_dir)["msg_id"].to_pylist())
    assert ok and (ok & read) <= processed
    assert result["counts"]["consumer_unprocessed"] == 0
    assert repetition_verdict(root)["verdict"] == "PASS"

    # No member process outlives the run.
    [ready] = [e for e in events if e.get("phase") == "consumers-ready"]
    assert not any(alive(pid) for pid in ready["pids"])


def paused(events: list[dict]) -> bool:
    return any(e.get("type") == "fault_start" and e["fault"] == "consumer-pause" for e in events)


@pytest.mark.chaos
def test_ctrl_c_while_a_member_is_paused_ends_every_member(tmp_path: Path):
    terminal = start_run(tmp_path, "consumers.yaml", "--no-report")
    try:
        wait_for(terminal, tmp_path, paused, "the consumer pause", timeout_s=180)
        terminal.type(CTRL_C)  # the members ignore it: the harness ends them, the paused one too
        code, seconds = terminal.wait_exit(60)
        assert_clean_interrupt(terminal, code, seconds)  # 130, bounded, no process left
    finally:
        terminal.close()
    run_dir = next(tmp_path.rglob("events.jsonl")).parent
    events = events_in(run_dir)
    [end] = [e for e in events if e.get("type") == "consumers"]
    assert end["caught_up"] is False and end["crashes"] == [], end
    assert has_type("harness_error")(events)  # interrupted: the repetition is UNKNOWN
