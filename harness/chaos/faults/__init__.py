"""The fault registry: every fault type, one module each, behind the `Fault` interface.

Each type declares its name, parameter model, where its helper runs (HelperSite) and the tools
it needs there, fault-class kinds and final-heal cleanup (see base.py); experiment validation,
fault classes, the nemesis' final heal and the guarantee table's list of kinds all read them
from here. Adding a fault type is one new module, listed
below, plus its rows in analysis/judge/guarantees.py.
"""

from collections.abc import Iterable

from harness.chaos.faults.base import (
    Fault,
    FaultContext,
    FaultError,
    FaultParams,
    HelperSite,
    NoParams,
    check_tools,
)
from harness.chaos.faults.consumer import (
    ConsumerKill,
    ConsumerPause,
    ConsumerRebalance,
    consumer_members,
    is_consumer_target,
)
from harness.chaos.faults.disk import DiskFull, FsyncError, LoseUnsynced, SlowDisk, TornWrite
from harness.chaos.faults.file_damage import CORRUPTION, Flip, Truncate
from harness.chaos.faults.kill import Kill, KillAll
from harness.chaos.faults.loss import Loss
from harness.chaos.faults.partition import Partition
from harness.chaos.faults.pause import Pause
from harness.chaos.faults.power_loss import PowerLoss
from harness.chaos.faults.quorum import RemoveController
from harness.chaos.faults.reassign import Reassign
from harness.chaos.faults.rolling_restart import RollingRestart
from harness.chaos.faults.shape import Delay, Duplicate, Reorder
from harness.chaos.faults.slow import Slow
from harness.chaos.faults.stop import Stop

# In the order experiment files and messages list them.
FAULT_TYPES: dict[str, type[Fault]] = {
    fault.name: fault
    for fault in (
        *(Kill, Stop, Pause, Partition, Loss, Slow, KillAll, PowerLoss, RollingRestart),
        *(Delay, Reorder, Duplicate, Reassign, RemoveController),
        *(LoseUnsynced, TornWrite, FsyncError, DiskFull, SlowDisk, Truncate, Flip),
        *(ConsumerKill, ConsumerPause, ConsumerRebalance),
    )
}

# Every <kind> of a '<role>-<kind>' fault class some fault type yields.
CLASS_KINDS: frozenset[str] = frozenset(
    kind for fault in FAULT_TYPES.values() for kind in fault.class_kinds
)

# The final heal's one shell line per node: every type's cleanup once, and never a failure
# (a node may have had none of these faults).
RESIDUE_CLEANUP: str = "; ".join(
    [*dict.fromkeys(f.residue_cleanup for f in FAULT_TYPES.values() if f.residue_cleanup), "true"]
)


def deciding_class(classes: Iterable[str]) -> str | None:
    """The fault class that decides the guarantee of a mix of faults: 'all-power-loss' (it
    allows any loss), else the first '<role>-corruption' (Kafka documents no outcome for it);
    None when neither is among `classes`."""
    chosen = set(classes)
    if "all-power-loss" in chosen:
        return "all-power-loss"
    return min((c for c in chosen if c.endswith(f"-{CORRUPTION}")), default=None)


__all__ = [
    "CLASS_KINDS",
    "FAULT_TYPES",
    "RESIDUE_CLEANUP",
    "Fault",
    "FaultContext",
    "FaultError",
    "FaultParams",
    "HelperSite",
    "NoParams",
    "check_tools",
    "consumer_members",
    "deciding_class",
    "is_consumer_target",
]
