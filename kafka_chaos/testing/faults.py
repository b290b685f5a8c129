"""Faults a test injects itself: the schedule step each call stands for, and the handle that
heals it.

A call `inject("kill", target="leader", partition=0)` is one step of an experiment file's
`faults.schedule` (validated as one, with its targets and params), acted on at once by the
harness's nemesis (harness.nemesis.schedule.Nemesis.act), which records it in events.jsonl
with the roles of every partition at that moment, exactly as a scheduled step.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any, NotRequired, TypedDict

from harness.chaos.faults import FAULT_TYPES
from harness.experiment.fields import BOUND_TARGET, HEAL
from harness.limits import shown
from harness.nemesis.records import ActiveFault
from harness.nemesis.schedule import Nemesis
from kafka_chaos.testing.errors import ChaosUsageError

__all__ = ["FaultHandle", "call_text", "step_document", "step_error"]


def call_text(fault: Any, target: Any, partition: Any, params: Any, duration_s: Any) -> str:
    """The inject(...) call as a message quotes it."""
    args = [shown(fault), f"target={shown(target)}", f"partition={shown(partition)}"]
    if params:
        args.append(f"params={shown(params)}")
    if duration_s is not None:
        args.append(f"duration_s={shown(duration_s)}")
    return f"inject({', '.join(args)})"


class StepDocument(TypedDict):
    """A `faults.schedule` step of an experiment document, as inject() writes it."""

    fault: str
    target: str
    partition: int
    params: NotRequired[Mapping[str, Any]]
    duration_s: NotRequired[float]


def step_document(
    fault: str,
    target: str,
    partition: int,
    params: Mapping[str, Any] | None,
    duration_s: float | None,
) -> StepDocument:
    """The `faults.schedule` step an inject call stands for; ChaosUsageError for what only an
    experiment has (heal steps and @name targets: the handle does their job; faults on the
    harness's consumer group)."""
    call = call_text(fault, target, partition, params, duration_s)
    if fault == HEAL:
        raise ChaosUsageError(f"{call}: heal a fault with the handle inject() returned: .heal()")
    if isinstance(target, str) and BOUND_TARGET.match(target):
        raise ChaosUsageError(
            f"{call}: @name targets bind nodes across schedule steps; keep the handle instead "
            "(its .nodes are the broker ids it hit) and target node:<id>"
        )
    if fault in FAULT_TYPES and FAULT_TYPES[fault].acts_on_consumers:
        raise ChaosUsageError(
            f"{call}: {fault} acts on the members of the harness's own consumer group "
            "(workload.consumers of an experiment file), which a test's run does not have"
        )
    step: StepDocument = {"fault": fault, "target": target, "partition": partition}
    if params is not None:
        step["params"] = params
    if duration_s is not None:
        step["duration_s"] = duration_s
    return step


def step_error(call: str, index: int, problems: Sequence[tuple[str, str]]) -> ChaosUsageError:
    """The error for a step the experiment's validation refused: each problem of the step
    under its own field name (target, partition, params...), others under their full path."""
    prefix = f"faults.schedule[{index}]"
    lines = []
    for path, reason in problems:
        field = path.removeprefix(prefix).lstrip(".") if path.startswith(prefix) else path
        lines.append(f"  {field or 'step'}: {reason}")
    return ChaosUsageError(f"{call} is invalid:\n" + "\n".join(lines))


class FaultHandle:
    """One injected fault: what it hit, and `heal()` (at most once; `judge()` and the end of
    the test heal whatever is still active). A context manager: healed on leaving the block."""

    def __init__(self, nemesis: Nemesis, active: ActiveFault, partition: int):
        self._nemesis = nemesis
        self._active = active
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self.partition = partition  # the step's partition (whose leader `leader` named)
        self.healed = False

    @property
    def fault(self) -> str:
        """The fault type, as an experiment file names it (kill, pause, partition...)."""
        return self._active.step.fault

    @property
    def target(self) -> str:
        """The target as given (leader, follower, node:2...)."""
        return self._active.step.target

    @property
    def fault_id(self) -> int:
        """The fault's id in events.jsonl (fault_start and fault_end)."""
        return self._active.fault_id

    @property
    def nodes(self) -> tuple[int, ...]:
        """The broker ids the fault hit, resolved when it was injected."""
        return tuple(node.node_id for node in self._active.fault.nodes if node.role.is_broker)

    @property
    def hosts(self) -> tuple[str, ...]:
        """Every node the fault hit, by host name (controllers and ZooKeeper servers too)."""
        return tuple(node.hostname for node in self._active.fault.nodes)

    def heal(self) -> None:
        """End the fault now (nothing when it was healed already)."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            if self.healed:
                return
            self.healed = True
            self._nemesis.heal(self._active)

    def heal_after(self, seconds: float) -> None:
        """Heal the fault `seconds` from now, in the background (inject's duration_s)."""
        timer = threading.Timer(seconds, self.heal)
        timer.daemon = True
        timer.name = f"heal-fault-{self.fault_id}"
        self._timer = timer
        timer.start()

    def __enter__(self) -> FaultHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.heal()

    def __repr__(self) -> str:
        state = "healed" if self.healed else "active"
        return f"<FaultHandle {self.fault} on {self.target} (brokers {list(self.nodes)}): {state}>"
