"""The clusters of a test session: started with the harness's own machinery on first use,
kept for the tests that ask for the same cluster, and always removed.

One cluster runs at a time (a test machine holds one comfortably, two rarely): a test asking
for another version, mode, size or broker config removes the running one first. Every
cluster is removed when the session ends, after a failure or Ctrl-C too (pytest tears the
session down then), and anything its `close` missed is reaped by its label
(harness.platform.leftovers.remove_cluster); a process killed outright leaves containers
that `kafka-chaos clean` (or the `--kafka-chaos-remove-leftovers` option) removes later.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.chaos.faults import FAULT_TYPES, check_tools
from harness.experiment.model import Experiment
from harness.platform.cluster import KafkaCluster
from harness.platform.engine import engine_answers, engine_endpoint
from harness.platform.image import BrokerImage, ImageError, ensure_image
from harness.platform.leftovers import remove_cluster, remove_leftovers
from harness.run.resolved import cluster_of
from kafka_chaos.testing.errors import ChaosError

__all__ = ["ClusterKey", "ClusterPool", "LiveCluster", "cluster_key"]

log = logging.getLogger("kafka_chaos.pytest")
# What makes two tests' clusters the same: image, mode, sizes and broker settings.
ClusterKey = tuple[Any, ...]


def start_or_reap(cluster: KafkaCluster) -> None:
    """Start `cluster`; when that fails (or is interrupted), remove whatever of it is left by its
    labels before the error goes on."""
    try:
        cluster.start()
    except BaseException:
        with contextlib.suppress(Exception):  # start() closed it; reap what it missed
            remove_cluster(cluster.cluster_id)
        raise


def cluster_key(spec: Experiment) -> ClusterKey:
    """The cluster an experiment runs on (its topic is each test's own)."""
    kafka = spec.kafka
    return (
        kafka.version,
        kafka.image,
        kafka.effective_mode(),
        kafka.brokers,
        kafka.zookeeper_nodes,
        tuple(sorted((k, str(v)) for k, v in kafka.broker_config.items())),
    )


@dataclass
class LiveCluster:
    """A started cluster, its broker image, and the fault types whose tools it was checked
    for."""

    cluster: KafkaCluster
    image: BrokerImage
    checked: set[str] = field(default_factory=set)

    def check_tools(self, fault: str) -> None:
        """ChaosError naming what is missing when the image lacks a tool `fault` runs in the
        broker container (checked once per fault type)."""
        if fault in self.checked:
            return
        try:
            check_tools(self.cluster.nodes[0], [FAULT_TYPES[fault]], self.image.tag)
        except Exception as exc:
            raise ChaosError(str(exc)) from exc
        self.checked.add(fault)


class ClusterPool:
    """Starts, keeps and removes the session's clusters (one running at a time)."""

    def __init__(self, *, remove_leftovers_first: bool = False, log_line: Callable[[str], None]):
        self._sweep = remove_leftovers_first
        self._log = log_line
        self._live: dict[ClusterKey, LiveCluster] = {}
        self._failed: dict[ClusterKey, str] = {}  # a cluster that did not start: why
        self._started: list[str] = []  # the cluster id of every cluster this pool created
        self._engine_checked = False

    def cluster_for(self, spec: Experiment) -> LiveCluster:
        """The running cluster `spec` asks for, started now (after removing any other)."""
        key = cluster_key(spec)
        if key in self._live:
            return self._live[key]
        if key in self._failed:
            raise ChaosError(
                f"this cluster failed to start earlier in the session: {self._failed[key]}"
            )
        self._engine()
        for other in list(self._live.values()):
            self.discard(other)
        try:
            live = self._start(spec)
        except Exception as exc:
            self._failed[key] = f"{type(exc).__name__}: {exc}"
            raise
        self._live[key] = live
        return live

    def _engine(self) -> None:
        """ChaosError with the fix when no Docker engine answers; the opt-in sweep of what
        dead processes left."""
        if self._engine_checked:
            return
        try:
            answers = engine_answers()
        except PermissionError:
            answers = False
        if not answers:
            raise ChaosError(
                f"no Docker engine answers at {engine_endpoint()}. Fix: start Docker or set "
                "DOCKER_HOST (`kafka-chaos engine` installs and starts Debian's as root)"
            )
        self._engine_checked = True
        if self._sweep:
            removed = remove_leftovers()
            self._log(f"removed {removed} containers/networks left by processes that are gone")

    def _start(self, spec: Experiment) -> LiveCluster:
        kafka = spec.kafka
        try:
            image = ensure_image(kafka.version, image=kafka.image, log=self._log)
        except ImageError as exc:
            raise ChaosError(f"no broker image: {exc}") from exc
        cluster = cluster_of(kafka, image)
        self._started.append(cluster.cluster_id)
        self._log(f"starting a {kafka.brokers}-broker cluster of {image.tag}")
        start_or_reap(cluster)
        return LiveCluster(cluster, image)

    def discard(self, live: LiveCluster) -> None:
        """Remove a cluster (one another test needs replaced, or one a test left damaged)."""
        for key, kept in list(self._live.items()):
            if kept is live:
                del self._live[key]
        live.cluster.close()
        with contextlib.suppress(Exception):
            remove_cluster(live.cluster.cluster_id)

    def close(self) -> None:
        """Remove every cluster this pool started (idempotent)."""
        for live in list(self._live.values()):
            with contextlib.suppress(Exception):
                self.discard(live)
        self._live.clear()
        for cluster_id in self._started:
            with contextlib.suppress(Exception):
                remove_cluster(cluster_id)
        self._started.clear()
