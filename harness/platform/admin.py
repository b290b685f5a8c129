"""Admin actions librdkafka's admin API lacks (partition reassignment), run by the harness's
small Java program (java/KafkaChaosAdmin.java) built on demand against kafka-clients.

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
# from 2.4 on, whatever the client's release.
ADMIN_CLIENT_VERSION = "3.8.0"
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
