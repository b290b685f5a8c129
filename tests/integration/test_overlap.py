"""An overlapping generated schedule end to end through the real CLI: faults in force together
as bound faults with heal steps, on disjoint nodes, none failing, every one healed, and spec.json
saying the schedule ran disjoint (what a shrink's replays need)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.rundir.events import load_events
from harness.rundir.spec import RunSpec
from tests.integration.support import labelled_leftovers, run_experiment

pytestmark = pytest.mark.chaos


def test_two_drawn_faults_act_together_on_disjoint_nodes(tmp_path: Path):
    root, done = run_experiment("overlap", tmp_path)
    run_dir = root / "base" / "0"
    spec = RunSpec.read(run_dir)
    events = load_events(run_dir)
    assert spec.disjoint is True
    assert any(step.get("fault") == "heal" for step in spec.schedule)
    assert [e for e in events if e["type"] == "fault_error"] == []
    acting: dict[int, set[int]] = {}
    together = False
    for event in events:
        if event["type"] == "fault_start":
            nodes = set(event["nodes"])
            for other in acting.values():
                assert not nodes & other, (event, acting)  # disjoint nodes
            together |= bool(acting)
            acting[event["fault_id"]] = nodes
        elif event["type"] == "fault_end":
            acting.pop(event["fault_id"], None)
    assert together, "no fault started while another acted"
    assert acting == {}  # every fault healed
    assert labelled_leftovers(done.pid) == []


def test_a_cascade_takes_one_partitions_replicas_down_in_turn(tmp_path: Path):
    """Each cascade (bound names c<draw>_<j>) acts on one partition, each step on a replica no
    other of its steps holds, all of them down together at its last start, each step at its
    drawn gap from the first (injections run apart: a stop's controlled shutdown does not
    delay the next); every fault is healed and none fails."""
    # Its first cascade takes every broker down within seconds, and min.insync.replicas 2 then
    # refuses most writes: the verdict (UNKNOWN with nothing acknowledged) is not the check.
    # The stop in it, of the last replica standing, cannot hand leadership on and runs to its
    # 60 s timeout, which its heal waits for: the other cascades the seed draws come after the
    # workload, and the final heal ends them before they act.
    root, done = run_experiment("cascade", tmp_path, "--fail-on", "violation")
    run_dir = root / "base" / "0"
    events = load_events(run_dir)
    assert [e for e in events if e["type"] == "fault_error"] == []
    planned = {
        step["as"]: step["at_s"]
        for step in json.loads((run_dir / "spec.json").read_text())["schedule"]
        if step.get("as")
    }
    chains: dict[str, list[dict]] = {}
    acting: set[int] = set()
    together = 0
    for event in events:
        if event["type"] == "fault_start" and event.get("as", "").startswith("c"):
            chain = chains.setdefault(event["as"].split("_")[0], [])
            chain.append(event)
            acting.add(event["fault_id"])
            together = max(together, len(acting))
        elif event["type"] == "fault_end":
            acting.discard(event["fault_id"])
    assert chains and together == 3, chains
    for chain in chains.values():
        assert len({e["partition"] for e in chain}) == 1
        nodes = [n for e in chain for n in e["nodes"]]
        assert len(nodes) == len(set(nodes)), chain  # each replica once
        chain.sort(key=lambda e: e["ts_us"])
        first = chain[0]
        for event in chain[1:]:
            began = (event["ts_us"] - first["ts_us"]) / 1e6
            gap = planned[event["as"]] - planned[first["as"]]
            assert abs(began - gap) < 1.0, (event["as"], began, gap)
    assert acting == set()
    assert labelled_leftovers(done.pid) == []
