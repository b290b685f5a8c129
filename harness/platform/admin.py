"""Admin actions librdkafka's admin API lacks (partition reassignment, the KRaft quorum's voter
set), run by the harness's small Java program (java_programs/KafkaChaosAdmin.java) built on demand
against kafka-clients.

The program runs beside the harness like every client and reaches the brokers through the
cluster's bootstrap address; it answers one JSON line, which becomes a typed result or an
AdminError naming the partition and why.
"""

from __future__ import annotations

import dataclasses
import io
import os
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from harness.platform.jdk import compiled_classpath, java_tool
from harness.platform.sidecar import last_json_object
from harness.platform.topology import CONTROLLER_PORT
from harness.settings import Settings

if TYPE_CHECKING:
    from harness.platform.cluster import KafkaCluster

# The client the admin program is built with: AlterPartitionReassignments is in every broker
# from 2.4 on, whatever the client's release; the voter changes (KIP-853) need a 3.9 client.
ADMIN_CLIENT_VERSION = "3.9.1"
ADMIN_SOURCE = Path(__file__).resolve().parent / "java_programs" / "KafkaChaosAdmin.java"
ADMIN_CLASS = "KafkaChaosAdmin"
ADMIN_DIR = "/tmp/kafka-chaos-admin"  # where the classes go inside a broker's container
KAFKA_LIBS = "/opt/kafka/libs/*"  # the broker image's Kafka jars (its KAFKA_HOME)
# How the quorum commands reach the quorum: through the brokers, which forward voter changes
# to the active controller, or straight to the controllers.
Via = Literal["brokers", "controllers"]


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
    refusals: int = 0  # how often the leader refused the change before it took it
    last_refusal: str = ""
    # Admin clients started afresh after one found no node to describe the quorum with.
    new_clients: int = 0
    before: QuorumState | None = None  # for a voter change: the quorum when it was asked

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
    answer = last_json_object(done.stdout)
    if "reassigned" in answer:
        moved = answer["reassigned"]
        return Reassigned(
            tuple(moved["before"]), tuple(moved["after"]), tuple(moved["isr"]), int(moved["ms"])
        )
    reason = answer.get("error") or done.stderr.strip()[-500:] or f"exit status {done.returncode}"
    raise AdminError(f"{topic}-{partition}: reassignment to {replicas} failed: {reason}")


def quorum(cluster: KafkaCluster, via: Via = "controllers", timeout_s: float = 30) -> QuorumState:
    """The quorum as described now; AdminError when it cannot be described."""
    return _quorum_call(cluster, ["quorum"], via, timeout_s, "describing the quorum")


def remove_voter(
    cluster: KafkaCluster, node_id: int, directory: str, via: Via, timeout_s: float
) -> QuorumState:
    """Take controller `node_id` (metadata directory `directory`) out of the voter set and
    wait until the quorum shows it; AdminError when that does not happen in time."""
    argv = ["remove-voter", str(node_id), directory, str(int(timeout_s * 1000))]
    return _quorum_call(cluster, argv, via, timeout_s, f"removing voter {node_id}")


def add_voter(
    cluster: KafkaCluster,
    node_id: int,
    directory: str,
    endpoint: tuple[str, int],
    via: Via,
    timeout_s: float,
) -> QuorumState:
    """Add controller `node_id` (reached at `endpoint`, host and port of its CONTROLLER
    listener) to the voter set and wait until the quorum shows it; the leader only takes an
    observer that has caught up, so this asks until it does. AdminError when that does not
    happen in time."""
    host, port = endpoint
    argv = ["add-voter", str(node_id), directory, host, str(port), str(int(timeout_s * 1000))]
    return _quorum_call(cluster, argv, via, timeout_s, f"adding voter {node_id}")


def _quorum_call(
    cluster: KafkaCluster, argv: list[str], via: Via, timeout_s: float, action: str
) -> QuorumState:
    """Run one of the program's quorum commands `via` the brokers (from this machine, as
    kafka-metadata-quorum --bootstrap-server) or the controllers (inside a broker's container,
    where their names resolve, as --bootstrap-controller); its answer as a QuorumState."""
    command, rest = argv[0], argv[1:]
    try:
        if via == "brokers":
            full = [
                java_tool("java"), "-cp", admin_classpath(cluster.settings), ADMIN_CLASS,
                command, cluster.bootstrap_servers, *rest,
            ]  # fmt: skip
            done = subprocess.run(full, capture_output=True, text=True, timeout=timeout_s + 30)
            code, output, errors = done.returncode, done.stdout, done.stderr
        else:
            controllers = ",".join(f"{n.hostname}:{CONTROLLER_PORT}" for n in cluster.quorum)
            code, output = _inside(cluster, [command, f"controllers={controllers}", *rest])
            errors = output
    except subprocess.TimeoutExpired:
        raise AdminError(f"{action}: the admin program did not answer in time") from None
    answer = last_json_object(output)
    if "quorum" not in answer:
        reason = answer.get("error") or errors.strip()[-500:] or f"exit {code}"
        raise AdminError(f"{action} failed: {reason}")
    before = _state(answer["before"]) if "before" in answer else None
    return dataclasses.replace(
        _state(answer["quorum"]),
        ms=int(answer.get("ms", 0)),
        refusals=int(answer.get("refusals", 0)),
        last_refusal=str(answer.get("last_refusal", "")),
        new_clients=int(answer.get("new_clients", 0)),
        before=before,
    )


def _state(state: dict) -> QuorumState:
    """One quorum description of the program's answer."""

    def replicas(key: str) -> tuple[tuple[int, str, int], ...]:
        return tuple((int(r["id"]), str(r["directory"]), int(r["end"])) for r in state[key])

    return QuorumState(
        int(state["leader"]), int(state["epoch"]), replicas("voters"), replicas("observers")
    )


def _inside(cluster: KafkaCluster, argv: list[str]) -> tuple[int, str]:
    """Run the admin program in the first running broker's container, on the image's own
    Java and Kafka libraries (the program's classes copied in once); exit code and output."""
    node = next((n for n in cluster.nodes if n.state() == "running"), None)
    if node is None:
        raise AdminError("no broker is running to run the admin program in")
    classes = Path(admin_classpath(cluster.settings).split(os.pathsep)[0])
    # Named by the build (source digest and client version): a changed program is copied anew.
    inside = f"{ADMIN_DIR}/{classes.parent.name}"
    code, _ = node.exec(["test", "-f", f"{inside}/{ADMIN_CLASS}.class"])
    if code != 0:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            archive.add(classes, arcname=f"{Path(ADMIN_DIR).name}/{classes.parent.name}")
        if not node.docker.put_archive(str(Path(ADMIN_DIR).parent), buffer.getvalue()):
            raise AdminError(f"{node.hostname}: could not copy the admin program in")
    return node.exec(["java", "-cp", f"{inside}:{KAFKA_LIBS}", ADMIN_CLASS, *argv])
