"""Fault types, one module each, all behind the `Fault` interface (inject, heal)."""

from harness.chaos.faults.base import Fault, FaultContext, FaultError, check_tools
from harness.chaos.faults.kill import Kill
from harness.chaos.faults.loss import Loss
from harness.chaos.faults.partition import Partition
from harness.chaos.faults.pause import Pause
from harness.chaos.faults.power_loss import PowerLoss
from harness.chaos.faults.rolling_restart import RollingRestart
from harness.chaos.faults.slow import Slow
from harness.chaos.faults.stop import Stop

FAULT_TYPES: dict[str, type[Fault]] = {
    "kill": Kill,
    "kill-all": Kill,
    "stop": Stop,
    "pause": Pause,
    "partition": Partition,
    "loss": Loss,
    "slow": Slow,
    "power-loss": PowerLoss,
    "rolling-restart": RollingRestart,
}

__all__ = ["FAULT_TYPES", "Fault", "FaultContext", "FaultError", "check_tools"]
