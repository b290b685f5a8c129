"""The nemesis: runs a fault schedule against the cluster and heals everything at the end.

Targets are resolved when a fault fires (the leader of a partition then, not at plan time).
Every start and end goes to events.jsonl. `heal_all` runs in `finally`, also after Ctrl-C.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from harness.chaos.faults import (
    FAULT_TYPES,
    RESIDUE_CLEANUP,
    Fault,
    FaultContext,
    FaultError,
    FaultParams,
)
from harness.platform.cluster import KafkaNode
from harness.rundir.events import EventLog, EventType, now_us


class Step(Protocol):
    """What the nemesis reads of a schedule step (harness.experiment.spec.FaultStep)."""

    at_s: float
    fault: str
    target: str
    partition: int
    duration_s: float
    params: FaultParams


@dataclass
class ActiveFault:
    """A fault that was injected and not yet healed."""

    fault_id: int
    step: Step
    fault: Fault


def resolve_target(ctx: FaultContext, step: Step) -> list[KafkaNode]:
    """The nodes `step.target` names right now; FaultError if there is none (e.g. no leader)."""
    cluster, target = ctx.cluster, step.target
    if target in ("all", "brokers") or FAULT_TYPES[step.fault].hits_whole_cluster(step.params):
        return list(cluster.nodes)
    if target.startswith("node:"):
        return [cluster.node(int(target.split(":", 1)[1]))]
    if target.startswith("zookeeper:"):
        return [cluster.zookeeper(int(target.split(":", 1)[1]))]
    if target == "zookeeper":
        return list(cluster.ensemble)
    if target == "controllers":
        return list(cluster.quorum)
    if target == "random":
        return [ctx.rng.choice(cluster.nodes)]
    if target == "controller":
        controller = cluster.active_controller()
        if controller is None:
            raise FaultError("no active controller to target")
        return [cluster.node(controller)]
    state = cluster.partition_states(ctx.topic)[step.partition]
    if state.leader is None:
        raise FaultError(f"partition {step.partition} has no leader to target")
    if target == "leader":
        return [cluster.node(state.leader)]
    followers = [r for r in state.replicas if r != state.leader]
    return [cluster.node(ctx.rng.choice(sorted(followers)))]


def _faulted(nodes: Sequence[KafkaNode]) -> dict[str, list]:
    """The event fields naming faulted nodes: `nodes` the broker ids (what the analysis reads
    leaders and ISRs against), `hosts` every node's name, controllers and ZooKeeper too."""
    return {
        "nodes": [n.node_id for n in nodes if n.role.is_broker],
        "hosts": [n.hostname for n in nodes],
    }


def heal_all(ctx: FaultContext) -> list[str]:
    """Bring every node back: start, unpause, then every fault type's cleanup; return actions."""
    actions = []
    for node in ctx.cluster.all_nodes:  # ZooKeeper servers and controllers too
        try:
            state = node.state()
            if state == "paused":
                node.unpause()
                actions.append(f"unpause {node.hostname}")
            elif state != "running":
                node.start()
                actions.append(f"start {node.hostname}")
            # One exec per node: each costs ~0.2 s, and the cleanups never fail.
            node.exec(["sh", "-c", RESIDUE_CLEANUP])
        except Exception as exc:  # heal the others even if one node misbehaves
            actions.append(f"{node.hostname}: heal failed: {exc}")
    return actions


class Nemesis:
    """Runs `steps` relative to `t0` (monotonic) in a thread; `stop()` ends and heals."""

    def __init__(self, ctx: FaultContext, steps: Sequence[Step], events: EventLog):
        self.ctx = ctx
        self.steps = list(steps)
        self.events = events
        self.active: list[ActiveFault] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._next_id = 1

    def start(self, t0: float) -> None:
        self._thread = threading.Thread(target=self._run, args=(t0,), name="nemesis", daemon=True)
        self._thread.start()

    def _run(self, t0: float) -> None:
        try:
            for step in self.steps:
                if self._stop.wait(max(0.0, t0 + step.at_s - time.monotonic())):
                    return
                active = self._inject(step)
                # Heal on the planned clock: time spent injecting must not stretch the fault.
                heal_at = t0 + step.at_s + step.duration_s
                if self._stop.wait(max(0.0, heal_at - time.monotonic())) or active is None:
                    continue
                self._heal(active)
        finally:
            self.heal_active()

    def _inject(self, step: Step) -> ActiveFault | None:
        fault_id, self._next_id = self._next_id, self._next_id + 1
        started_us = now_us()
        try:
            nodes = resolve_target(self.ctx, step)
            fault = FAULT_TYPES[step.fault](self.ctx, nodes, step.params)
            active = ActiveFault(fault_id, step, fault)
            self.active.append(active)
            detail = fault.inject()
        except Exception as exc:
            self.errors.append(f"fault {fault_id} ({step.fault} {step.target}): {exc}")
            self.events.write(
                EventType.FAULT_ERROR,
                fault_id=fault_id,
                fault=step.fault,
                target=step.target,
                stage="inject",
                error=str(exc),
            )
            return None
        # ts_us is when injection began; injected_us when the last command returned.
        self.events.write(
            EventType.FAULT_START,
            ts_us=started_us,
            injected_us=now_us(),
            fault_id=fault_id,
            fault=step.fault,
            target=step.target,
            partition=step.partition,
            **_faulted(nodes),
            detail=detail,
        )
        return active

    def _heal(self, active: ActiveFault) -> None:
        try:
            active.fault.heal()
        except Exception as exc:  # evidence: a fault that may still act makes the run UNKNOWN
            self.errors.append(f"heal of fault {active.fault_id}: {exc}")
            self.events.write(
                EventType.FAULT_ERROR,
                fault_id=active.fault_id,
                fault=active.step.fault,
                target=active.step.target,
                stage="heal",
                error=str(exc),
            )
        with contextlib.suppress(ValueError):
            self.active.remove(active)
        self.events.write(
            EventType.FAULT_END,
            fault_id=active.fault_id,
            fault=active.step.fault,
            **_faulted(active.fault.nodes),
            **({"detail": detail} if (detail := active.fault.detail()) else {}),
        )

    def heal_active(self) -> None:
        """Heal every fault still active (idempotent)."""
        for active in list(self.active):
            self._heal(active)

    def stop(self, timeout_s: float = 120.0) -> None:
        """Stop scheduling, heal what is active, and wait for the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        self.heal_active()
