"""Removing what clusters left: by owner process (remove_leftovers) or by one cluster's id
(remove_cluster), against a fake engine that filters by label as Docker does."""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

import pytest

from harness.platform import leftovers
from harness.settings import Settings

LABEL = Settings().label
DEAD_PID = "999999999"  # above any pid_max: never a live process


class FakeObject:
    """A container or network: its labels, and whether it was removed."""

    def __init__(self, labels: dict[str, str]):
        self.labels = labels
        self.attrs = {"Labels": labels}
        self.removed = False

    def remove(self, **_: Any) -> None:
        self.removed = True


class FakeCollection:
    def __init__(self, objects: list[FakeObject]):
        self.objects = objects

    def list(self, all: bool = False, filters: dict[str, str] | None = None) -> list[FakeObject]:
        wanted = (filters or {}).get("label", "")
        key, _, value = wanted.partition("=")
        return [
            o for o in self.objects if key in o.labels and (not value or o.labels[key] == value)
        ]


def labels(cluster: str, pid: str) -> dict[str, str]:
    return {LABEL: cluster, f"{LABEL}.pid": pid}


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    containers = [
        FakeObject(labels("mine", str(os.getpid()))),
        FakeObject(labels("mine", str(os.getpid()))),
        FakeObject(labels("other-live", str(os.getppid()))),
        FakeObject(labels("other-dead", DEAD_PID)),
        FakeObject({"unrelated": "x"}),
    ]
    networks = [
        FakeObject(labels("mine", str(os.getpid()))),
        FakeObject(labels("other-dead", DEAD_PID)),
    ]
    client = SimpleNamespace(
        containers=FakeCollection(containers), networks=FakeCollection(networks)
    )
    monkeypatch.setattr(leftovers.docker, "from_env", lambda: client)
    return SimpleNamespace(containers=containers, networks=networks)


def removed(objects: list[FakeObject]) -> list[str]:
    return [o.labels.get(LABEL, "-") for o in objects if o.removed]


def test_remove_cluster_removes_only_that_cluster(engine: SimpleNamespace) -> None:
    assert leftovers.remove_cluster("mine") == 3
    assert removed(engine.containers) == ["mine", "mine"]
    assert removed(engine.networks) == ["mine"]


def test_remove_leftovers_still_removes_only_what_dead_processes_left(
    engine: SimpleNamespace,
) -> None:
    assert leftovers.remove_leftovers() == 2
    assert removed(engine.containers) == ["other-dead"]
    assert removed(engine.networks) == ["other-dead"]


def test_remove_leftovers_of_one_owner(engine: SimpleNamespace) -> None:
    assert leftovers.remove_leftovers(owner=os.getpid()) == 5
    assert removed(engine.containers) == ["mine", "mine", "other-dead"]
