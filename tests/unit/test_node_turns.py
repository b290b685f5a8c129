"""A node's pause and exec take turns (harness/platform/node.py): an exec racing a pause left
its process in the frozen cgroup and hung the engine's unpause (Docker 20.10, cgroup v1)."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import docker.errors
import pytest

from harness.platform.node import KafkaNode
from harness.platform.topology import Role


class RecordingContainer:
    """Records when each exec and pause ran; an exec takes 0.2 s, as a real one does."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, float, float]] = []
        self.exec_started = threading.Event()

    def exec_run(self, argv: list[str]) -> SimpleNamespace:
        started = time.monotonic()
        self.exec_started.set()
        time.sleep(0.2)
        self.spans.append(("exec", started, time.monotonic()))
        return SimpleNamespace(exit_code=0, output=b"")

    def pause(self) -> None:
        now = time.monotonic()
        self.spans.append(("pause", now, now))


def wrapping(container: object) -> SimpleNamespace:
    """A stand-in for the node's Testcontainers container, wrapping the fake docker one."""
    return SimpleNamespace(get_wrapped_container=lambda: container)


def test_a_pause_waits_for_the_exec_in_progress() -> None:
    container = RecordingContainer()
    node = KafkaNode(1, 9092, wrapping(container), role=Role.COMBINED)  # type: ignore[arg-type]
    probe = threading.Thread(target=node.exec, args=(["true"],))
    probe.start()
    assert container.exec_started.wait(5)
    node.pause()
    probe.join(5)
    (exec_span,) = [span for span in container.spans if span[0] == "exec"]
    (pause_span,) = [span for span in container.spans if span[0] == "pause"]
    assert pause_span[1] >= exec_span[2]


def test_nodes_still_compare_by_their_fields() -> None:
    container = wrapping(RecordingContainer())
    first = KafkaNode(1, 9092, container, role=Role.COMBINED)  # type: ignore[arg-type]
    second = KafkaNode(1, 9092, container, role=Role.COMBINED)  # type: ignore[arg-type]
    assert first == second
    assert "_engine_turn" not in repr(first)


class RefusingContainer:
    """A container the engine refuses to signal, with `message`."""

    def __init__(self, message: str) -> None:
        self.message = message

    def kill(self, signal: str) -> None:
        raise docker.errors.APIError(self.message)


@pytest.mark.parametrize(
    "message",
    [
        "Cannot kill container: dd81: container dd81 PID 13014 is zombie and can not be killed",
        "Cannot kill container: dd81: Container dd81 is not running",
    ],
)
def test_a_kill_of_a_process_that_already_exited_counts_as_done(message: str) -> None:
    node = KafkaNode(1, 9092, wrapping(RefusingContainer(message)), role=Role.COMBINED)  # type: ignore[arg-type]
    node.kill()


def test_a_kill_the_engine_refuses_for_another_reason_fails() -> None:
    container = RefusingContainer("500 Server Error: no such container")
    node = KafkaNode(1, 9092, wrapping(container), role=Role.COMBINED)  # type: ignore[arg-type]
    with pytest.raises(docker.errors.APIError):
        node.kill()
