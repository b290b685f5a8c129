"""The fault registry: every fault type, one module each, behind the `Fault` interface.

Each type declares its name, parameter model, where its helper runs (HelperSite) and the tools
it needs there, fault-class kinds and final-heal cleanup (see base.py); experiment validation,
fault classes and the nemesis' final heal read them from here; the kinds they yield are the
contract's (harness.rundir.fault_classes). Adding a fault type is one new module, listed
below, plus its rows in analysis/judge/guarantees.py.
"""

from harness.chaos.faults.base import (
    Fault,
    FaultContext,
    FaultError,
    FaultParams,
    FaultRefused,
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
from harness.chaos.faults.file_damage import Flip, Truncate
from harness.chaos.faults.loss import Loss
from harness.chaos.faults.partition import Partition
from harness.chaos.faults.power_loss import PowerLoss
from harness.chaos.faults.process import Kill, KillAll, Pause, Stop
from harness.chaos.faults.reassign import Reassign
from harness.chaos.faults.remove_controller import RemoveController
from harness.chaos.faults.rolling_restart import RollingRestart
from harness.chaos.faults.shape import Delay, DropRequests, Duplicate, Reorder
from harness.chaos.faults.slow import Slow

# In the order experiment files and messages list them.
FAULT_TYPES: dict[str, type[Fault]] = {
    fault.name: fault
    for fault in (
        *(Kill, Stop, Pause, Partition, Loss, Slow, KillAll, PowerLoss, RollingRestart),
        *(Delay, DropRequests, Reorder, Duplicate, Reassign, RemoveController),
        *(LoseUnsynced, TornWrite, FsyncError, DiskFull, SlowDisk, Truncate, Flip),
        *(ConsumerKill, ConsumerPause, ConsumerRebalance),
    )
}

# The final heal's one shell line per node: every type's cleanup once, and never a failure
# (a node may have had none of these faults).
RESIDUE_CLEANUP: str = "; ".join(
    [*dict.fromkeys(f.residue_cleanup for f in FAULT_TYPES.values() if f.residue_cleanup), "true"]
)


__all__ = [
    "FAULT_TYPES",
    "RESIDUE_CLEANUP",
    "Fault",
    "FaultContext",
    "FaultError",
    "FaultParams",
    "FaultRefused",
    "HelperSite",
    "NoParams",
    "check_tools",
    "consumer_members",
    "is_consumer_target",
]
