"""Fault types, one module each, all behind the `Fault` interface (inject, heal)."""

from harness.faults.base import Fault, FaultContext, FaultError, check_tools
from harness.faults.kill import Kill
from harness.faults.loss import Loss
from harness.faults.partition import Partition
from harness.faults.pause import Pause
from harness.faults.power_loss import PowerLoss
from harness.faults.rolling_restart import RollingRestart
from harness.faults.slow import Slow
from harness.faults.stop import Stop

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
