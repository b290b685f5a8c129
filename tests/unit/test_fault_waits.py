"""The faults' waits on the one poll loop: power loss waits for the killed container to stop,
the rolling restart for a restarted node to rejoin the ISR (or for the heal)."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from harness.chaos.faults.base import FaultError
from harness.chaos.faults.power_loss import wait_until_down
from harness.chaos.faults.rolling_restart import RollingRestart
from harness.platform.topology import PartitionState


@pytest.fixture(autouse=True)
def _no_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("harness.waiting.time.sleep", lambda s: None)


class _Node:
    def __init__(self, states: list[str], node_id: int = 2) -> None:
        self.states, self.node_id, self.hostname = iter(states), node_id, f"kafka-{node_id}"

    def state(self) -> str:
        return next(self.states)


def test_power_loss_waits_until_the_killed_node_stopped() -> None:
    node = _Node(["running", "running", "exited", "unexpected"])
    wait_until_down(node)
    assert next(node.states) == "unexpected"


def test_power_loss_gives_up_when_the_node_still_runs() -> None:
    with pytest.raises(FaultError, match="kafka-2 still runs 0 s after SIGKILL"):
        wait_until_down(_Node(["running"] * 10), timeout_s=0)


class _Cluster:
    """partition_states from a script: an exception is raised, a list answered."""

    def __init__(self, answers: list[Any]) -> None:
        self.answers, self.asked = iter(answers), 0

    def partition_states(self, topic: str) -> list[PartitionState]:
        self.asked += 1
        answer = next(self.answers)
        if isinstance(answer, Exception):
            raise answer
        return answer


def _roll(cluster: _Cluster) -> RollingRestart:
    fault = RollingRestart.__new__(RollingRestart)
    fault.ctx = SimpleNamespace(cluster=cluster, topic="t")
    return fault


def _isr(*isr: int) -> list[PartitionState]:
    return [PartitionState(0, 1, (1, 2, 3), isr), PartitionState(1, 3, (1, 3), (1, 3))]


def test_the_roll_waits_through_errors_until_the_node_rejoined() -> None:
    cluster = _Cluster([RuntimeError("no metadata"), _isr(1, 3), _isr(1, 2, 3), _isr()])
    _roll(cluster)._wait_rejoined(_Node([]), 60, threading.Event())
    assert cluster.asked == 3


def test_the_roll_stops_waiting_when_healed() -> None:
    cluster = _Cluster([_isr(1, 3)] * 10)
    healed = threading.Event()
    healed.set()
    _roll(cluster)._wait_rejoined(_Node([]), 60, healed)
    assert cluster.asked == 0


def test_the_roll_goes_on_when_the_node_does_not_rejoin_in_time() -> None:
    cluster = _Cluster([_isr(1, 3)] * 10)
    _roll(cluster)._wait_rejoined(_Node([]), 0, threading.Event())
    assert cluster.asked == 1
