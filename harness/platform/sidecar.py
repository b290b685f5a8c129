"""Helper containers that share a node's network namespace and run one program of the harness.

A helper is a Testcontainers container (harness/platform/containers.py: HelperContainer) and
runs from the project's JRE base image (Debian with iptables and Python), whatever
image the broker runs: that is how a stock broker image without iptables still gets network
faults. It carries the cluster's labels, so the cluster's removal and the leftovers sweep
find it like a node. Its program speaks in JSON lines on stdout: one `ready` (or `error`)
line when it acts, and whatever it reports when SIGTERM ends it.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, cast

import docker
import docker.errors

from harness.platform.containers import HelperContainer
from harness.platform.image import base_tag
from harness.rundir.events import ShaperFigures
from harness.waiting import wait_for

if TYPE_CHECKING:
    from harness.platform.node import KafkaNode
    from harness.settings import Settings

PROGRAM_DIR = "/opt/kafka-chaos"
HELPER_LABEL_SUFFIX = ".helper"  # after the settings' label: the helper's program, e.g. shaper
_numbers = itertools.count(1)


class HelperOwner(Protocol):
    """What a helper needs of its cluster (harness.platform.cluster.KafkaCluster is one):
    its settings, its id and the labels its containers carry."""

    settings: Settings
    cluster_id: str

    @property
    def labels(self) -> dict[str, str]: ...


class HelperReady(TypedDict, total=False):
    """What a helper set up, as its `ready` line says (the shaper: its queue, chain, rules)."""

    queue: int
    chain: str
    rules: list[list[str]]


class HelperLine(TypedDict, total=False):
    """One JSON line of a helper's program, as read (not validated): `ready` or `error` when it
    acts, what it reports when SIGTERM ends it (the shaper: `figures`)."""

    ready: HelperReady
    error: str
    figures: ShaperFigures


class SidecarError(RuntimeError):
    """A helper container could not start, act or stop; the message names the node and why."""


def helper_image(cluster: HelperOwner) -> str:
    """The helper image's tag; SidecarError naming the fix when it is not on this engine."""
    tag = base_tag(cluster.settings.compose_dir)
    try:
        docker.from_env().images.get(tag)
    except docker.errors.ImageNotFound:
        raise SidecarError(
            f"the helper image {tag} (the project's JRE base) is not on this Docker engine; "
            "build it with `kafka-chaos image` (it is built with the broker image)"
        ) from None
    return tag


def _helper(cluster: HelperOwner, node: KafkaNode, kind: str, argv: list[str]) -> HelperContainer:
    """A helper container of `kind` to run `argv` in `node`'s network namespace, labelled as
    the cluster's and with its kind; not started yet."""
    return HelperContainer(
        helper_image(cluster),
        argv,
        name=f"{node.docker.name}-{kind}-{next(_numbers)}",
        node_id=node.docker.id,
        labels={**cluster.labels, cluster.settings.label + HELPER_LABEL_SUFFIX: kind},
        working_dir=PROGRAM_DIR,
    )


def with_package(helper: HelperContainer, package: Path) -> HelperContainer:
    """`helper` with the Python package at `package` (its .py files) copied into PROGRAM_DIR
    before it starts."""
    for path in sorted(package.glob("*.py")):
        helper.with_copy_into_container(path, f"{PROGRAM_DIR}/{package.name}/{path.name}")
    return helper


def json_lines(text: str) -> list[dict[str, object]]:
    """The JSON objects among `text`'s lines (other lines are not for the harness)."""
    found = []
    for line in text.splitlines():
        with contextlib.suppress(ValueError):
            value = json.loads(line)
            if isinstance(value, dict):
                found.append(value)
    return found


def last_json_object(text: str) -> dict[str, Any]:
    """The last JSON object among `text`'s lines (a program's answer); {} when there is none."""
    found = json_lines(text)
    return found[-1] if found else {}


@dataclass
class Sidecar:
    """One helper container in `node`'s network namespace running `python3 -m <module>`."""

    cluster: HelperOwner
    node: KafkaNode
    package: Path  # the program's package, copied into the container
    module: str  # run as `python3 -m <module> <argument>`
    argument: str
    kind: str  # what the helper is, in its name and label (e.g. shaper)
    container: Any = None
    said: list[HelperLine] = field(default_factory=list)

    def start(self, timeout_s: float = 20.0) -> HelperReady:
        """Start the helper and wait for its `ready` line; return what it said there."""
        argv = ["python3", "-m", self.module, self.argument]
        helper = with_package(_helper(self.cluster, self.node, self.kind, argv), self.package)
        self.container = helper.start().get_wrapped_container()

        def answered() -> bool:
            self._read_output()
            return any("ready" in line or "error" in line for line in self.said) or (
                self._state() not in ("running", "created")
            )

        if not wait_for(answered, timeout_s, interval_s=0.05):
            self.remove()
            raise SidecarError(f"{self.where}: no answer from the {self.kind} in {timeout_s:.0f} s")
        for line in self.said:
            if "ready" in line:
                return line["ready"]
        reason = next((str(line["error"]) for line in self.said if "error" in line), None)
        tail = reason or self._logs()[-400:].strip() or "it exited without a word"
        self.remove()
        raise SidecarError(f"{self.where}: the {self.kind} did not start: {tail}")

    def stop(self, timeout_s: int = 10) -> list[HelperLine]:
        """SIGTERM, wait for the program to end, remove the container; its JSON lines."""
        if self.container is None:
            return self.said
        with contextlib.suppress(docker.errors.APIError):
            self.container.stop(timeout=timeout_s)
        self._read_output()
        self.remove()
        return self.said

    def remove(self) -> None:
        """Remove the container, whatever its state (idempotent)."""
        if self.container is not None:
            with contextlib.suppress(docker.errors.APIError):
                self.container.remove(force=True)
            self.container = None

    @property
    def where(self) -> str:
        return self.node.hostname

    def _state(self) -> str:
        try:
            self.container.reload()
            return str(self.container.status)
        except docker.errors.APIError:
            return "gone"

    def _logs(self) -> str:
        with contextlib.suppress(docker.errors.APIError):
            return self.container.logs(stdout=True, stderr=True).decode(errors="replace")
        return ""

    def _read_output(self) -> None:
        with contextlib.suppress(docker.errors.APIError):
            out = self.container.logs(stdout=True, stderr=False).decode(errors="replace")
            self.said = cast("list[HelperLine]", json_lines(out))


NETWORK_TOOLS = ("iptables", "tc")  # what the faults run in a node's network namespace


@dataclass
class ToolsHelper:
    """A helper idling in a node's network namespace, where the harness runs iptables and tc
    for a node whose image lacks them (a stock broker image). Made on first use, and made
    again when the node has restarted since (a restarted container has a new namespace)."""

    cluster: HelperOwner
    node: KafkaNode
    container: Any = None
    node_started_at: str = ""

    def exec(self, argv: list[str]) -> tuple[int, str]:
        """Run `argv` in the node's network namespace; exit code and combined output."""
        self._ensure()
        result = self.container.exec_run(argv)
        return result.exit_code, result.output.decode(errors="replace")

    def _ensure(self) -> None:
        started_at = self.node.started_at()
        if started_at == self.node_started_at and self._running():
            return
        if self.container is not None:
            with contextlib.suppress(docker.errors.APIError):
                self.container.remove(force=True)
        helper = _helper(self.cluster, self.node, "tools", ["sleep", "infinity"])
        self.container = helper.start().get_wrapped_container()
        self.node_started_at = started_at

    def _running(self) -> bool:
        """Whether the helper is still there and running (the final heal removes helpers)."""
        if self.container is None:
            return False
        try:
            self.container.reload()
        except docker.errors.NotFound:
            self.container = None
            return False
        return self.container.status == "running"


def remove_helpers(cluster: HelperOwner) -> int:
    """Stop and remove every helper container of `cluster`; return the count."""
    label = cluster.settings.label
    client = docker.from_env()
    removed = 0
    for container in client.containers.list(
        all=True, filters={"label": [f"{label}={cluster.cluster_id}", label + HELPER_LABEL_SUFFIX]}
    ):
        # SIGTERM first: a shaper then removes its rules and lets its held packets go.
        with contextlib.suppress(docker.errors.APIError):
            container.stop(timeout=5)
        with contextlib.suppress(docker.errors.APIError):
            container.remove(force=True)
            removed += 1
    return removed
