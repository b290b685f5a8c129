"""Removing what clusters left behind: containers and networks labelled by this harness, whose
owning process is gone (or every one, or one process's own, or one cluster's)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

import docker
import docker.errors
import docker.models.containers

from harness.platform.node import thaw_cgroup
from harness.settings import Settings, load_settings


def remove_leftovers(
    settings: Settings | None = None, *, all_owners: bool = False, owner: int | None = None
) -> int:
    """Remove containers and networks of clusters whose harness process is gone; return count.

    With `all_owners`, also those of live processes (for `kafka-chaos clean --all`); with
    `owner`, also those of that process (the harness's own, after an interrupt).
    """
    settings = settings or load_settings()
    pid_label = f"{settings.label}.pid"

    def reapable(labels: dict[str, str] | None) -> bool:
        pid = (labels or {}).get(pid_label)
        return all_owners or (owner is not None and pid == str(owner)) or not _owner_alive(pid)

    return _remove_labelled(settings.label, reapable)


def remove_cluster(cluster_id: str, settings: Settings | None = None) -> int:
    """Remove every container and network of one cluster, by its id's label (what its `close`
    could not reach, e.g. a container an interrupt created unseen); return the count."""
    settings = settings or load_settings()
    return _remove_labelled(f"{settings.label}={cluster_id}", lambda labels: True)


def _remove_labelled(label: str, reapable: Callable[[dict[str, str] | None], bool]) -> int:
    """Remove the containers and networks matching the `label` filter whose labels are
    `reapable`; return the count."""
    client = docker.from_env()
    removed = 0
    for container in client.containers.list(all=True, filters={"label": label}):
        if reapable(container.labels):
            if getattr(container, "status", None) == "paused":
                # A frozen process cannot be killed: removing it hangs (Docker on cgroup v1).
                thaw_cgroup(container.id)
            with contextlib.suppress(docker.errors.APIError):
                container.remove(force=True, v=True)
                removed += 1
    for network in client.networks.list(filters={"label": label}):
        if reapable(network.attrs.get("Labels")):
            with contextlib.suppress(docker.errors.APIError):
                network.remove()
                removed += 1
    return removed


def _owner_alive(pid: str | None) -> bool:
    if not pid or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
