"""Faults on the consumer group's members (`workload.consumers`), not on brokers.

Their targets are `consumer` (a member chosen with the repetition's seed) or `consumer-<i>`;
the nemesis resolves them to the group's members
(harness.workload.consumer_group.group.ConsumerMember), which can be killed, paused, made to
leave and started again as a broker node can. No broker is touched, so the producer's
guarantee is that of no fault; what changes is what the group processes
(analysis.checks.consumers).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, ClassVar

from harness.chaos.faults.base import FaultError, HelperSite, NoParams
from harness.chaos.faults.process import ProcessFault
from harness.rundir.fault_classes import ClassKind

if TYPE_CHECKING:
    from harness.chaos.faults.base import FaultContext

CONSUMER_TARGET = re.compile(r"^consumer(?:-([0-9]+))?$")


def is_consumer_target(target: str) -> bool:
    """True for `consumer` and `consumer-<i>`."""
    return CONSUMER_TARGET.match(target) is not None


def consumer_members(ctx: FaultContext, target: str) -> list[Any]:
    """The members `target` names right now; FaultError without a group or such a member."""
    group = ctx.consumers
    match = CONSUMER_TARGET.match(target)
    if group is None or match is None:
        raise FaultError(f"{target}: this repetition has no consumer group to target")
    if match.group(1) is None:
        return [ctx.rng.choice(group.members)]
    try:
        return [group.member(int(match.group(1)))]
    except LookupError as exc:
        raise FaultError(str(exc)) from None


class ConsumerFault(ProcessFault[NoParams]):
    """A fault on group members; `nodes` holds the members the nemesis resolved."""

    acts_on_consumers: ClassVar[bool] = True
    helper_site: ClassVar[HelperSite] = HelperSite.CLIENT_PROCESS


class ConsumerKill(ConsumerFault):
    """SIGKILL of a member mid-batch; healed by starting it again (it rejoins the group)."""

    name = "consumer-kill"
    class_kinds = (ClassKind.KILL,)
    act, signal, undo_in = "kill", "SIGKILL", "exited"


class ConsumerPause(ConsumerFault):
    """SIGSTOP of a member (a long GC pause); SIGCONT when healed. Paused past the session
    timeout, it loses its partitions and finds its generation fenced when it resumes."""

    name = "consumer-pause"
    class_kinds = (ClassKind.PAUSE,)
    act, signal, undo, undo_in = "pause", "SIGSTOP", "unpause", "paused"


class ConsumerRebalance(ConsumerFault):
    """A forced rebalance: a member leaves the group cleanly (SIGTERM, close) and returns when
    healed, so the group rebalances twice."""

    name = "consumer-rebalance"
    class_kinds = (ClassKind.REBALANCE,)
    act, signal, undo_in = "leave", "SIGTERM", "exited"
