"""The fault classes a run records and the analysis keys its guarantees on.

A fault class is '<role>-<kind>' ('leader-kill', 'all-power-loss'): the role the fault hit and
the kind of harm. The kinds are part of the contract between the harness and the analysis, so
they are defined here; each fault type of harness.chaos.faults declares which of them it
yields, and the analysis reads them without importing the machinery that injects them.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Final


class ClassKind(StrEnum):
    """The kind of harm of a fault class."""

    KILL = "kill"
    STOP = "stop"
    PAUSE = "pause"
    PARTITION = "partition"  # cut from the other brokers
    PARTITION_QUORUM = "partition-quorum"  # cut from the controllers
    ISOLATE = "isolate"  # cut from everything, clients too
    PARTITION_GROUPS = "partition-groups"
    LOSS = "loss"  # packets dropped
    SLOW = "slow"
    DELAY = "delay"
    REORDER = "reorder"
    DUPLICATE = "duplicate"
    POWER_LOSS = "power-loss"  # what was not fsynced is gone
    ROLLING_RESTART = "rolling-restart"
    REASSIGN = "reassign"
    QUORUM_CHANGE = "quorum-change"
    DISK_ERROR = "disk-error"
    SLOW_DISK = "slow-disk"
    CORRUPTION = "corruption"  # silent: Kafka documents no outcome for it
    REBALANCE = "rebalance"


CLASS_KINDS: Final = frozenset(ClassKind)
# Power loss of every node at once: it allows any loss of what was not fsynced.
ALL_POWER_LOSS: Final = f"all-{ClassKind.POWER_LOSS}"


def deciding_class(classes: Iterable[str]) -> str | None:
    """The fault class that decides the guarantee of a mix of faults: 'all-power-loss' (it
    allows any loss), else the first '<role>-corruption' (Kafka documents no outcome for it);
    None when neither is among `classes`."""
    chosen = set(classes)
    if ALL_POWER_LOSS in chosen:
        return ALL_POWER_LOSS
    return min((c for c in chosen if c.endswith(f"-{ClassKind.CORRUPTION}")), default=None)
