"""A paused node always thaws: when `docker unpause` hangs, its freezer cgroup is thawed by hand
(harness/platform/node.py)."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.platform import node as node_module
from harness.platform.node import KafkaNode, thaw_cgroup
from harness.platform.topology import Role

CONTAINER = "ab12" * 16


def frozen_tree(root: Path) -> tuple[Path, Path]:
    """A cgroup v1 freezer and a v2 unified entry for CONTAINER, both frozen."""
    v1 = root / "freezer" / "docker" / CONTAINER / "freezer.state"
    v2 = root / "unified" / "docker" / CONTAINER / "cgroup.freeze"
    for path, frozen in ((v1, "FROZEN"), (v2, "1")):
        path.parent.mkdir(parents=True)
        path.write_text(frozen)
    return v1, v2


def test_thaw_writes_both_hierarchies(tmp_path: Path):
    v1, v2 = frozen_tree(tmp_path)
    assert thaw_cgroup(CONTAINER, tmp_path) is True
    assert (v1.read_text(), v2.read_text()) == ("THAWED", "0")
    assert thaw_cgroup("other", tmp_path) is False


class HangingContainer:
    """`docker unpause` that returns only once the freezer was thawed by hand."""

    id = CONTAINER

    def __init__(self, state: Path):
        self.state = state
        self.calls = 0

    def unpause(self) -> None:
        self.calls += 1
        while self.state.read_text() != "THAWED":
            threading.Event().wait(0.01)


def test_a_hanging_unpause_is_healed_through_the_cgroup(tmp_path: Path, monkeypatch):
    v1, _ = frozen_tree(tmp_path)
    monkeypatch.setattr(node_module, "CGROUP_ROOT", tmp_path)
    container = HangingContainer(v1)
    wrapper = SimpleNamespace(get_wrapped_container=lambda: container)  # a Testcontainers one
    node = KafkaNode(1, 0, wrapper, role=Role.BROKER)  # type: ignore[arg-type]
    node.unpause(timeout_s=0.1)
    assert v1.read_text() == "THAWED" and container.calls == 1


def test_an_unpause_that_cannot_be_healed_says_so(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(node_module, "CGROUP_ROOT", tmp_path)  # no cgroup of this container
    elsewhere = tmp_path / "not-a-cgroup"
    elsewhere.write_text("FROZEN")
    missing = HangingContainer(elsewhere)
    wrapper = SimpleNamespace(get_wrapped_container=lambda: missing)
    node = KafkaNode(1, 0, wrapper, role=Role.BROKER)  # type: ignore[arg-type]
    with pytest.raises(TimeoutError, match="could not be thawed"):
        node.unpause(timeout_s=0.05)
