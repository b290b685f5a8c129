"""A multi-step mechanism schedule end to end through the real CLI: names, open faults, heal
steps and `after:` conditions on real brokers, then the verdict by partition and mechanism."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.support import labelled_leftovers, run_experiment

pytestmark = pytest.mark.chaos


def test_followers_frozen_then_leader_killed_loses_acks1_writes_by_mechanism(tmp_path: Path):
    root, done = run_experiment("mechanism", tmp_path)
    run_dir = root / "base" / "0"
    spec = json.loads((run_dir / "spec.json").read_text())
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]

    # The steps acted in file order, on the nodes their targets named, and waited for the
    # cluster where they said so.
    resolved = spec["resolved_schedule"]
    assert [entry["step"] for entry in resolved] == [0, 1, 2, 3], resolved
    frozen, old_leader = resolved[0]["hosts"], resolved[1]["hosts"]
    assert len(frozen) == 2 and len(old_leader) == 1 and old_leader[0] not in frozen
    assert [r.get("heal") for r in resolved[2:]] == ["@frozen", "@old_leader"]
    assert [e for e in events if e["type"] == "fault_error"] == []
    conditions = [e["condition"] for e in events if e["type"] == "condition"]
    assert conditions == [
        "after_s(3)",
        "after_s(1)",
        "has_leader(0) and not leader_is(@old_leader)",
    ]
    starts = [e for e in events if e["type"] == "fault_start"]
    assert [s["class_kind"] for s in starts] == ["pause", "kill"]
    roles = {p["partition"]: p for p in starts[1]["partitions"]}
    assert roles[0]["leader"] == int(old_leader[0].rsplit("-", 1)[1])
    # The old leader came back only after a follower had been elected in its place.
    ends = [e for e in events if e["type"] == "fault_end"]
    assert [e["nodes"] for e in ends] == [starts[0]["nodes"], starts[1]["nodes"]]

    # The old leader acknowledged alone for seconds: acks=1 loses that, explained per partition.
    result = json.loads((run_dir / "results.json").read_text())
    assert result["loss"] > 0 and result["loss_by_partition"].get("0", 0) > 0, result
    report = json.loads((run_dir.parent.parent / "report" / "report.json").read_text())
    (cell,) = report["cells"]
    assert cell["verdict"] == "EXPECTED-LOSS", cell
    reasons = " ".join(cell["repetitions"][0]["reasons"])
    assert "p0: acks=1 truncation" in reasons and "leader of p0" in reasons, reasons
    assert labelled_leftovers(done.pid) == []


def test_a_schedule_goes_on_after_the_workload_until_its_last_step_is_healed(tmp_path: Path):
    root, done = run_experiment("after-workload", tmp_path)
    run_dir = root / "base" / "0"
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]

    def at(kind: str, phase: str | None = None) -> int:
        (event,) = [e for e in events if e["type"] == kind and e.get("phase", phase) == phase]
        return event["ts_us"]

    workload_end, heal = at("phase", "workload-end"), at("phase", "heal")
    start, end = at("fault_start"), at("fault_end")
    # The step began 6 s in, after the 4 s workload, and was healed on its own 3 s later,
    # before the final heal: the schedule played to its end, not to the bound (15 s).
    assert workload_end < start < end < heal, (workload_end, start, end, heal)
    assert 2.5e6 <= end - start <= 6e6 and heal - workload_end < 14e6
    result = json.loads((run_dir / "results.json").read_text())
    assert result["counts"]["acked"] > 0 and result["loss"] == 0, result
    assert labelled_leftovers(done.pid) == []
