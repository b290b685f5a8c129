"""A run's schedule pinned to the states its faults met, replayed on real brokers through the
CLI: each pinned step that acts meets the ISR size and leader presence it was pinned to, the
first a committed message too (the condition's reading and the nemesis' snapshot agree), which
is what makes a shrinker's replay of a race meet the race."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.chaos.conditions import parse_condition
from harness.experiment.from_run import experiment_document, steps_of_run
from harness.experiment.pin import first_acks, pin
from harness.rundir.events import ConditionMet, FaultStart, read_events
from harness.rundir.spec import RunSpec
from tests.integration.support import HERE, only_dir, run_cli

pytestmark = pytest.mark.chaos


def _state(start: FaultStart) -> tuple[int, bool]:
    """(ISR size, has a leader) of the step's partition in the nemesis' snapshot."""
    roles = next(r for r in start.partitions or () if r.get("partition") == start.partition)
    return len(roles.get("isr") or ()), roles.get("leader") is not None


def _run(path: Path, runs_dir: Path) -> Path:
    """Run the experiment file `path` through the CLI; its one repetition's directory (a
    verdict of loss is an answer here, not a failure: exit 0 or 1)."""
    done = run_cli("run", str(path), "--runs-dir", str(runs_dir), "--quiet", "--master", "local[2]")
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return only_dir(runs_dir / yaml.safe_load(path.read_text())["name"]) / "base" / "0"


def test_a_pinned_replay_meets_the_states_its_run_met(tmp_path: Path):
    run_dir = _run(HERE / "experiments" / "pin.yaml", tmp_path / "first")
    spec = RunSpec.read(run_dir)
    timed = steps_of_run(spec)
    pinned = pin(timed, read_events(run_dir).of(FaultStart), first_acks(run_dir))
    held = {i for i, (p, t) in enumerate(zip(pinned, timed, strict=True)) if p.after != t.after}
    assert held == {0, 1, 2}, pinned  # the three faults, not their heals

    document = experiment_document(spec, pinned, name="pin-replayed")
    path = tmp_path / "pin-replayed.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    replay = read_events(_run(path, tmp_path / "replay"))

    met = {e.step for e in replay.of(ConditionMet)}
    acted = {s.step: s for s in replay.of(FaultStart) if s.step in held}
    assert acted, "no pinned step acted in the replay"
    for index, start in acted.items():
        assert index in met  # it waited for its state, and the state came
        if start.partitions_error is not None:
            continue
        size, led = _state(start)
        clauses = {c.fn: c for c in parse_condition(pinned[index].after or "").clauses}
        assert size == clauses["isr_size"].value, (index, start)
        assert led != clauses["has_leader"].negated, (index, start)
        # The first fault came after the run's first acknowledgement (3 s in, at 200 a
        # second): it alone waits for a committed message.
        assert ("high_watermark" in clauses) is (index == min(held)), (index, start)
