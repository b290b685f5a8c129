"""The nemesis: runs a fault schedule against the cluster and heals everything at the end.

Steps run in order. Targets are resolved when a step acts (the leader of a partition then,
not at plan time); a step may bind what it resolved to a name (`as:`) that later steps target
(`@name`) or wait on (`after:` conditions), and a fault without a duration stays active until
a heal step names it. Every start, end and condition goes to events.jsonl, with the leader
and ISR of every partition at each injection (the roles the analysis judges by). The final
heal (harness.chaos.heal) runs in `finally`, also after Ctrl-C.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Sequence
from typing import Any

from confluent_kafka import KafkaException

from harness.chaos.conditions import ClusterView
from harness.chaos.faults import FAULT_TYPES, FaultContext, FaultError, FaultRefused
from harness.experiment.model import FaultStep
from harness.nemesis.records import (
    ActiveFault,
    ResolvedStep,
    Roles,
    faulted,
    led_by,
    states_field,
)
from harness.nemesis.targets import (
    free_partition,
    held_against,
    resolve_target,
    step_partition,
    whole_cluster,
)
from harness.platform.node import KafkaNode
from harness.platform.offsets import high_watermarks_of
from harness.platform.topology import ClusterError, PartitionState
from harness.rundir.events import (
    ConditionMet,
    EventLog,
    FaultEnd,
    FaultFailed,
    FaultSkipped,
    FaultStart,
    PartitionRoles,
    now_us,
)

CONDITION_POLL_S = 0.25


class Nemesis:
    """Runs `steps` relative to `t0` (monotonic) in a thread; `stop()` ends and heals.

    `resolved` records, per step, what it acted on and when: spec.json keeps it, so the same
    seed and file can be checked to give the same schedule.
    """

    def __init__(
        self,
        ctx: FaultContext,
        steps: Sequence[FaultStep],
        events: EventLog,
        disjoint: bool = False,
    ):
        self.ctx = ctx
        # faults.disjoint (a generated schedule's rule): a role-targeted step leaves out the
        # nodes other faults in force hold, and is skipped when none is left or its role
        # names no node (a generator cannot know which node a role will name; a kill of a
        # node already down would fail the run).
        self.disjoint = disjoint
        self._skipped: set[str] = set()  # names of skipped steps, whose heals are skipped
        self.steps = list(steps)
        self.events = events
        self.active: list[ActiveFault] = []
        self.errors: list[str] = []
        self.resolved: list[ResolvedStep] = []
        self.bindings: dict[str, list[KafkaNode]] = {}
        self._named: dict[str, ActiveFault] = {}  # open faults by the name their step bound
        self._led: dict[str, list[int]] = {}  # partitions a name's nodes led when bound
        self._stop = threading.Event()
        # Injections run apart (_injected_apart) by the name they bind, and the lock over the
        # faults in force, which those threads and the schedule's thread both change.
        self._injecting: dict[str, threading.Thread] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._next_id = 1
        # The clock of `resolved`'s t_s: from start(), or from here for steps acted on directly.
        self._t0 = time.monotonic()
        self._previous_done = 0.0  # monotonic time the previous step finished acting
        self._leaders_before: dict[int, int | None] = {}
        # The last roles snapshot taken, and when (monotonic): a fault on a cluster with no
        # broker answering records these, marked stale (no broker can have changed them).
        self._last_roles: tuple[float, list[PartitionRoles]] | None = None

    @property
    def injected(self) -> int:
        """How many faults the nemesis has started to inject so far (each gets an id)."""
        return self._next_id - 1

    def start(self, t0: float) -> None:
        self._t0 = self._previous_done = t0
        self._thread = threading.Thread(target=self._run, args=(t0,), name="nemesis", daemon=True)
        self._thread.start()

    def _run(self, t0: float) -> None:
        # Leaders are read after each step only for a leader_changed: a read is a round trip.
        watch = any(s.condition and s.condition.calls("leader_changed") for s in self.steps)
        try:
            self._leaders_before = self._leaders() if watch else {}
            for index, step in enumerate(self.steps):
                if step.at_s is not None and self._stop.wait(
                    max(0.0, t0 + step.at_s - time.monotonic())
                ):
                    return
                if not self._await_condition(index, step):
                    return  # a timed-out condition voids the rest of the schedule
                if step.heals:
                    self._heal_named(index, step)
                else:
                    self._act(index, step, t0)
                if self._stop.is_set():
                    return
                self._previous_done = time.monotonic()
                self._leaders_before = self._leaders() if watch else {}
        finally:
            self.heal_active()

    def act(self, step: FaultStep) -> ActiveFault | None:
        """Inject `step` now, in the calling thread, as the schedule's next step: for a caller
        that drives the faults itself instead of `start` (the pytest plugin). None when it
        failed, recorded in `errors` and events as a scheduled step's failure is."""
        self.steps.append(step)
        return self._inject(len(self.steps) - 1, step)

    def heal(self, active: ActiveFault) -> None:
        """Heal one fault now (nothing when it is no longer active)."""
        if active in self.active:
            self._heal(active)

    def _act(self, index: int, step: FaultStep, t0: float) -> None:
        """Inject the step's fault; heal it after duration_s, or leave it open under its name."""
        started = time.monotonic()
        active = self._inject(index, step, until=self._injected_apart(index, step))
        if active is None or step.duration_s is None:
            return
        # Heal on the planned clock: time spent injecting must not stretch the fault.
        planned = step.at_s is not None and step.condition is None
        heal_at = t0 + step.at_s if step.at_s is not None and planned else started
        heal_at += step.duration_s
        if not self._stop.wait(max(0.0, heal_at - time.monotonic())):
            self._heal(active)

    def _injected_apart(self, index: int, step: FaultStep) -> float | None:
        """When the next step is due (monotonic) if the step's injection runs in a thread of
        its own, else None: a fault left open under a name, followed by a step timed later and
        without a condition, which then comes on its own clock, not when this injection
        returns (a stop's controlled shutdown, a torn write's restart). Steps at one instant
        run in turn."""
        after = self.steps[index + 1] if index + 1 < len(self.steps) else None
        if (
            step.as_ is None
            or step.duration_s is not None
            or step.at_s is None
            or after is None
            or after.at_s is None
            or after.at_s <= step.at_s
            or after.condition is not None
        ):
            return None
        return self._t0 + after.at_s

    def _inject(
        self, index: int, step: FaultStep, until: float | None = None
    ) -> ActiveFault | None:
        """Resolve the step's target and inject its fault; None when it did not act. `until`
        (monotonic): the injection runs in its own thread, waited for until then only, and the
        fault is returned then (a heal of its name, and the final heal, wait for the rest)."""
        fault_id, self._next_id = self._next_id, self._next_id + 1
        started_us = now_us()
        roles, states = self._roles()  # the one reading the step records and acts on
        try:
            partition = step_partition(self.ctx, step, self._led, states)
            held = held_against(step, [a.fault for a in self.active])
            if self.disjoint and isinstance(step.partition, int) and step.bound_target is None:
                partition = free_partition(self.ctx, step, partition, held, states)
            avoid = held if self.disjoint else frozenset()
            nodes = self._target(index, step, partition, avoid, states)
            if nodes == []:
                return None
            if step.as_ is not None:
                self.bindings[step.as_] = nodes
                self._led[step.as_] = led_by(roles, nodes)
            fault = FAULT_TYPES[step.fault](self.ctx, nodes, step.params, partition)
        except Exception as exc:
            self._not_injected(index, step, fault_id, exc)
            return None
        active = ActiveFault(fault_id, step, fault)
        with self._lock:
            self.active.append(active)
            if step.as_ is not None and step.duration_s is None:
                self._named[step.as_] = active
        start: dict[str, Any] = {  # fault_start's fields, the injection's own added after it
            "ts_us": started_us,
            "fault_id": fault_id,
            "step": index,
            "fault": step.fault,
            "target": step.target,
            "partition": partition,
            # What the analysis keys the guarantee on, per partition, with `partitions`.
            "class_kind": FAULT_TYPES[step.fault].class_kind(step.params),
            "whole_cluster": whole_cluster(self.ctx, step, nodes),
            **({"as": step.as_} if step.as_ else {}),
            **({"open": True} if step.duration_s is None else {}),
            **faulted(nodes),
            **roles,
        }
        if until is not None and step.as_ is not None:
            thread = threading.Thread(
                target=self._complete, args=(index, active, start), name=step.as_, daemon=True
            )
            self._injecting[step.as_] = thread
            thread.start()
            thread.join(max(0.0, until - time.monotonic()))  # a quick one ends in turn
            return active
        return active if self._complete(index, active, start) else None

    def _complete(self, index: int, active: ActiveFault, start: dict[str, Any]) -> bool:
        """Inject `active`'s fault and record it (fault_start: `start` with the time the last
        command returned and the fault's detail); whether it acted."""
        try:
            detail = active.fault.inject()
        except Exception as exc:
            self._not_injected(index, active.step, active.fault_id, exc, active)
            return False
        self._resolved(index, active.step, active.fault_id, active.fault.nodes)
        # ts_us is when injection began; injected_us when the last command returned.
        acted = {**start, **active.fault.acted_as(detail), "injected_us": now_us()}
        self.events.write(FaultStart(**acted, detail=detail))
        return True

    def _not_injected(
        self,
        index: int,
        step: FaultStep,
        fault_id: int,
        exc: Exception,
        active: ActiveFault | None = None,
    ) -> None:
        """Record why a step did not act, and that its heal step has nothing to end. A fault
        the cluster's state refused did nothing, so it is no longer in force; any other
        failure may have acted in part, and is healed at the end."""
        if isinstance(exc, FaultRefused) and active is not None:
            with self._lock:
                self._named = {k: v for k, v in self._named.items() if v is not active}
                with contextlib.suppress(ValueError):
                    self.active.remove(active)
        if not isinstance(exc, FaultRefused) or not self.disjoint or step.bound_target:
            self._fail(index, step, fault_id, "inject", str(exc))
        else:
            self._skip(index, step, f"the cluster refused it then: {exc}")
        if step.as_ is not None:
            self._skipped.add(step.as_)

    def _target(
        self,
        index: int,
        step: FaultStep,
        partition: int,
        held: frozenset[str],
        states: list[PartitionState] | None,
    ) -> list[KafkaNode]:
        """The nodes the step acts on. Disjoint (a generated schedule), a role that names no
        node now (no leader, no active controller) skips the step ([] and a fault_skipped
        event): the generator cannot know the roles a step will meet. Otherwise it is a
        FaultError."""
        try:
            nodes = resolve_target(self.ctx, step, self.bindings, partition, held, states)
        except (FaultError, ClusterError, KafkaException) as exc:
            # No node, or no broker answering the metadata the role is read from.
            if not self.disjoint or step.bound_target is not None:
                raise
            self._skip(index, step, f"its target named no node: {exc}")
            return []
        return self._free(index, step, nodes) if self.disjoint else nodes

    def _skip(self, index: int, step: FaultStep, reason: str) -> None:
        """Record that `step` did not act, and that its heal step has nothing to end."""
        if step.as_ is not None:
            self._skipped.add(step.as_)
        self.events.write(
            FaultSkipped(step=index, fault=step.fault, target=step.target, reason=reason)
        )

    def _free(self, index: int, step: FaultStep, nodes: list[KafkaNode]) -> list[KafkaNode]:
        """`nodes` without those another fault in force holds or that are down (a broker
        that halted by itself) ([] and a fault_skipped event when none is left, or when a
        whole-cluster step would miss one). Bound targets and consumer faults are left as
        they are."""
        if step.bound_target is not None or FAULT_TYPES[step.fault].acts_on_consumers:
            return nodes
        held = held_against(step, [a.fault for a in self.active])
        free = [n for n in nodes if n.hostname not in held and n.state() == "running"]
        if len(free) == len(nodes) or (free and not whole_cluster(self.ctx, step, nodes)):
            return free
        reason = (
            "it hits the whole cluster and a node was held by another fault or down"
            if free
            else f"every node it named ({', '.join(n.hostname for n in nodes)}) was held or down"
        )
        self._skip(index, step, reason)
        return []

    def _heal_named(self, index: int, step: FaultStep) -> None:
        """A heal step: end the open fault bound to its @name (validation made sure of one)."""
        name = step.bound_target or ""
        if (injecting := self._injecting.pop(name, None)) is not None:
            injecting.join()  # its injection, run apart, decides whether it acted
        if name in self._skipped:  # its fault never acted: nothing to end
            self._skipped.discard(name)
            return
        active = self._named.pop(name, None)
        if active is None:
            self._fail(index, step, 0, "heal", f"no open fault is bound to @{name}")
            return
        self.resolved.append(
            {"step": index, "heal": f"@{name}", "fault_id": active.fault_id, "t_s": self._t()}
        )
        self._heal(active)

    def _resolved(self, index: int, step: FaultStep, fault_id: int, nodes: list[KafkaNode]) -> None:
        entry: ResolvedStep = {
            "step": index,
            "fault_id": fault_id,
            "fault": step.fault,
            "target": step.target,
            "hosts": [n.hostname for n in nodes],
            "t_s": self._t(),
        }
        if step.as_:
            entry["as"] = step.as_
        self.resolved.append(entry)

    def _t(self) -> float:
        return round(time.monotonic() - self._t0, 3)

    def _fail(self, index: int, step: FaultStep, fault_id: int, stage: str, error: str) -> None:
        self.errors.append(f"step {index} ({step.fault} {step.target}): {stage}: {error}")
        self.events.write(
            FaultFailed(
                fault_id=fault_id,
                step=index,
                fault=step.fault,
                target=step.target,
                stage=stage,
                error=error,
            )
        )

    def _await_condition(self, index: int, step: FaultStep) -> bool:
        """Wait until the step's condition holds; False (and a fault_error) when it timed out
        or the nemesis was stopped."""
        condition = step.condition
        if condition is None:
            return True
        started = time.monotonic()
        deadline = started + step.timeout_s
        while True:
            try:
                partition = step_partition(self.ctx, step, self._led)
            except FaultError:
                partition = 0  # the step itself will say so when it acts
            unmet = condition.unmet(self._view(condition.calls("high_watermark")), partition)
            if not unmet:
                waited = round(time.monotonic() - started, 3)
                self.events.write(
                    ConditionMet(step=index, condition=condition.text, waited_s=waited)
                )
                return True
            if time.monotonic() >= deadline:
                error = (
                    f"condition `{condition.text}` not met within {step.timeout_s:g} s "
                    f"(still false: {', '.join(unmet)}); the rest of the schedule was skipped"
                )
                self._fail(index, step, 0, "condition", error)
                return False
            if self._stop.wait(CONDITION_POLL_S):  # said, so that a replay shows what it missed
                waited, still = time.monotonic() - started, ", ".join(unmet)
                reason = f"the schedule ended after {waited:.1f} s waiting for `{condition.text}`"
                self._skip(index, step, f"{reason} (still false: {still})")
                return False

    def _view(self, high_watermarks: bool = False) -> ClusterView:
        """One metadata snapshot with what the nemesis remembers (and the high watermarks when
        asked), for conditions; when no broker answers, a view that knows only the time."""
        bindings = {
            name: [n.node_id for n in nodes if n.role.is_broker]
            for name, nodes in self.bindings.items()
        }
        since = time.monotonic() - self._previous_done
        try:
            meta = self.ctx.cluster.metadata(self.ctx.topic, timeout_s=2.0)
            partitions = list(meta.topics[self.ctx.topic].partitions.values())
            ids = [p.id for p in partitions] if high_watermarks else []
            ends = high_watermarks_of(self.ctx.cluster.admin(), self.ctx.topic, ids) if ids else {}
        except Exception:
            return ClusterView.unanswered(bindings, since)
        return ClusterView(
            leaders={p.id: (p.leader if p.leader >= 0 else None) for p in partitions},
            isrs={p.id: list(p.isrs) for p in partitions},
            brokers=frozenset(meta.brokers),
            bindings=bindings,
            leaders_before=self._leaders_before,
            since_previous_s=since,
            high_watermarks=ends,
        )

    def _leaders(self) -> dict[int, int | None]:
        """The leader of every partition now ({} when the metadata cannot be read)."""
        with contextlib.suppress(Exception):
            return {
                s.partition: s.leader
                for s in self.ctx.cluster.partition_states(self.ctx.topic, 2.0)
            }
        return {}

    def _roles(self) -> tuple[Roles, list[PartitionState] | None]:
        """`partitions` (leader, ISR and replicas of each) just before an injection, or why not
        (with the last snapshot taken, when there was one, as `partitions`); and the states
        read (None when the read failed: resolving the target reads again, and says why)."""
        try:
            states = self.ctx.cluster.partition_states(self.ctx.topic, timeout_s=2.0)
        except Exception as exc:
            if self._last_roles is None:
                return {"partitions_error": str(exc)}, None
            taken, roles = self._last_roles
            age = time.monotonic() - taken
            return {
                "partitions": roles,
                "partitions_error": f"{exc}; partitions: the roles seen {age:.1f} s earlier",
            }, None
        roles = states_field(states)
        self._last_roles = (time.monotonic(), roles)
        return {"partitions": roles}, states

    def _heal(self, active: ActiveFault) -> None:
        """End `active`, whatever name it is open under; record the end and any failure."""
        with self._lock:
            self._named = {k: v for k, v in self._named.items() if v is not active}
        try:
            active.fault.heal()
        except Exception as exc:  # evidence: a fault that may still act makes the run UNKNOWN
            self.errors.append(f"heal of fault {active.fault_id}: {exc}")
            self.events.write(
                FaultFailed(
                    fault_id=active.fault_id,
                    fault=active.step.fault,
                    target=active.step.target,
                    stage="heal",
                    error=str(exc),
                )
            )
        with self._lock, contextlib.suppress(ValueError):
            self.active.remove(active)
        self.events.write(
            FaultEnd(
                fault_id=active.fault_id,
                fault=active.step.fault,
                **faulted(active.fault.nodes),
                **({"detail": detail} if (detail := active.fault.detail()) else {}),
            )
        )

    def heal_active(self) -> None:
        """Heal every fault still active, once the injections run apart have returned
        (idempotent)."""
        for injecting in list(self._injecting.values()):
            injecting.join()
        self._injecting.clear()
        for active in list(self.active):
            self._heal(active)

    def finish(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` for the schedule to play to its end (every step acted and
        healed as planned); whether it did. The caller stops it afterwards either way."""
        if self._thread is None:
            return True
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def stop(self, timeout_s: float = 120.0) -> None:
        """Stop scheduling, heal what is active, and wait for the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        self.heal_active()
