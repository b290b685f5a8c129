"""Admin actions librdkafka's admin API lacks (partition reassignment, the KRaft quorum's voter
set), run by the harness's small Java program (java/KafkaChaosAdmin.java) built on demand
against kafka-clients.

The program runs beside the harness like every client and reaches the brokers through the
cluster's bootstrap address; it answers one JSON line, which becomes a typed result or an
AdminError naming the partition and why.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.platform.java import compiled_classpath, java_tool
from harness.settings import Settings

if TYPE_CHECKING:
    from harness.platform.cluster import KafkaCluster

# The client the admin program is built with: AlterPartitionReassignments is in every broker
# from 2.4 on, whatever the client's release; the voter changes (KIP-853) need a 3.9 client.
ADMIN_CLIENT_VERSION = "3.9.1"
ADMIN_SOURCE = Path(__file__).resolve().parent / "java" / "KafkaChaosAdmin.java"
ADMIN_CLASS = "KafkaChaosAdmin"


class AdminError(RuntimeError):
    """An admin action failed; the message names the partition and the broker's answer."""


@dataclass(frozen=True)
class Reassigned:
    """A completed reassignment: the replica sets before and after, the ISR then, and how
    long it took from the request to its completion."""

    before: tuple[int, ...]
    after: tuple[int, ...]
    isr: tuple[int, ...]
    ms: int


@dataclass(frozen=True)
class QuorumState:
    """The KRaft quorum as its leader describes it: leader id and epoch, the voters' and the
    observers' ids (each with its metadata directory id and log end offset), and for a voter
    change how long it took from the request until the quorum showed it."""

    leader: int
    epoch: int
    voters: tuple[tuple[int, str, int], ...]
    observers: tuple[tuple[int, str, int], ...]
    ms: int = 0

    @property
    def voter_ids(self) -> list[int]:
        return sorted(voter[0] for voter in self.voters)


def admin_classpath(settings: Settings | None = None) -> str:
    """The admin program's classpath, built or found cached (JavaBuildError if it cannot)."""
    return compiled_classpath(ADMIN_SOURCE, ADMIN_CLIENT_VERSION, settings)


def reassign(
    cluster: KafkaCluster, topic: str, partition: int, replicas: list[int], timeout_s: float
) -> Reassigned:
    """Move `topic`-`partition` to `replicas` (the first the preferred leader) and wait until
    the move has completed; AdminError when it is refused or does not complete in time."""
    argv = [
        java_tool("java"), "-cp", admin_classpath(cluster.settings), ADMIN_CLASS, "reassign",
        cluster.bootstrap_servers, topic, str(partition), ",".join(map(str, replicas)),
        str(int(timeout_s * 1000)),
    ]  # fmt: skip
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s + 30)
    except subprocess.TimeoutExpired:
        raise AdminError(f"{topic}-{partition}: the reassignment did not answer in time") from None
    answer = _answer(done.stdout)
    if "reassigned" in answer:
        moved = answer["reassigned"]
        return Reassigned(
            tuple(moved["before"]), tuple(moved["after"]), tuple(moved["isr"]), int(moved["ms"])
        )
    reason = answer.get("error") or done.stderr.strip()[-500:] or f"exit status {done.returncode}"
    raise AdminError(f"{topic}-{partition}: reassignment to {replicas} failed: {reason}")


def quorum(cluster: KafkaCluster, timeout_s: float = 30) -> QuorumState:
    """The quorum as described now; AdminError when it cannot be described."""
    return _quorum_call(cluster, ["quorum"], timeout_s, "describing the quorum")


def remove_voter(
    cluster: KafkaCluster, node_id: int, directory: str, timeout_s: float
) -> QuorumState:
    """Take controller `node_id` (metadata directory `directory`) out of the voter set and
    wait until the quorum shows it; AdminError when that does not happen in time."""
    argv = ["remove-voter", str(node_id), directory, str(int(timeout_s * 1000))]
    return _quorum_call(cluster, argv, timeout_s, f"removing voter {node_id}")


def add_voter(
    cluster: KafkaCluster, node_id: int, directory: str, host: str, port: int, timeout_s: float
) -> QuorumState:
    """Add controller `node_id` (reached at `host`:`port` on the CONTROLLER listener) to the
    voter set and wait until the quorum shows it; the leader only takes an observer that has
    caught up, so this asks until it does. AdminError when that does not happen in time."""
    argv = ["add-voter", str(node_id), directory, host, str(port), str(int(timeout_s * 1000))]
    return _quorum_call(cluster, argv, timeout_s, f"adding voter {node_id}")


def _quorum_call(
    cluster: KafkaCluster, argv: list[str], timeout_s: float, action: str
) -> QuorumState:
    """Run one of the program's quorum commands; its answer as a QuorumState."""
    command, rest = argv[0], argv[1:]
    full = [
        java_tool("java"), "-cp", admin_classpath(cluster.settings), ADMIN_CLASS, command,
        cluster.bootstrap_servers, *rest,
    ]  # fmt: skip
    try:
        done = subprocess.run(full, capture_output=True, text=True, timeout=timeout_s + 30)
    except subprocess.TimeoutExpired:
        raise AdminError(f"{action}: the admin program did not answer in time") from None
    answer = _answer(done.stdout)
    if "quorum" not in answer:
        reason = answer.get("error") or done.stderr.strip()[-500:] or f"exit {done.returncode}"
        raise AdminError(f"{action} failed: {reason}")
    state = answer["quorum"]

    def replicas(key: str) -> tuple[tuple[int, str, int], ...]:
        return tuple((int(r["id"]), str(r["directory"]), int(r["end"])) for r in state[key])

    return QuorumState(
        int(state["leader"]),
        int(state["epoch"]),
        replicas("voters"),
        replicas("observers"),
        int(answer.get("ms", 0)),
    )


def _answer(stdout: str) -> dict:
    """The program's JSON answer (its last JSON line); {} when there is none."""
    for line in reversed(stdout.splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return {}
