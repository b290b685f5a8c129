"""The schedule runner reads the partitions' leaders after each step only for a schedule whose
conditions compare with them (`leader_changed`): a read is a metadata round trip."""

from __future__ import annotations

import pytest

from harness.nemesis.schedule import Nemesis
from harness.rundir.events import EventType
from tests.unit.test_schedule import FakeCluster, doc, run, steps_of


@pytest.mark.parametrize("compares", [False, True])
def test_leaders_are_read_after_each_step_only_for_a_schedule_that_compares_with_them(
    tmp_path, monkeypatch, compares: bool
):
    reads: list[int] = []
    leaders = Nemesis._leaders

    def counted(self: Nemesis) -> dict[int, int | None]:
        reads.append(1)
        return leaders(self)

    monkeypatch.setattr(Nemesis, "_leaders", counted)
    heal = {"fault": "heal", "target": "@x", "timeout_s": 5}
    if compares:
        heal["after"] = "not leader_changed(0)"  # node 2 led once 1 was down, and still does
    steps = steps_of(doc([{"at_s": 0, "fault": "kill", "target": "leader", "as": "x"}, heal]))
    cluster = FakeCluster()
    nemesis, events = run(cluster, steps, tmp_path)
    assert nemesis.errors == [] and cluster.node(1).actions == ["kill", "start"]
    # Before the schedule and after each of its two steps; none when nothing compares.
    assert len(reads) == (3 if compares else 0)
    met = [e["condition"] for e in events if e["type"] == EventType.CONDITION]
    assert met == (["not leader_changed(0)"] if compares else [])
