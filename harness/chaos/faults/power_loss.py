"""Power loss: the broker dies and the OS page cache (its unflushed log data) dies with it.

Kafka does not fsync by default; it relies on replicas. SIGKILL keeps the page cache, so only
losing it shows what the disk alone holds. The model, per target node: SIGKILL, then every
partition log (not the fsynced KRaft metadata log) loses its batches past the recovery point
the broker last checkpointed, except those older than `window_s` seconds, which the kernel
is taken to have written back already (dirty pages expire after 30 s on Linux). The node
restarts on heal and recovers its log as after a real crash.
"""

from __future__ import annotations

import tarfile
import time
from typing import TYPE_CHECKING, Annotated

from pydantic import Field

from harness.chaos.faults.base import Fault, FaultError, FaultParams, start_stopped
from harness.chaos.faults.process import SignalDetail
from harness.limits import (
    MAX_DURATION_S,
    WHY_DURATION,
    at_least,
    at_most,
    optional_param_number,
)
from harness.rundir.fault_classes import ClassKind
from harness.rundir.segments import read_checkpoint, surviving_length
from harness.waiting import wait_for

if TYPE_CHECKING:
    from harness.platform.node import KafkaNode

METADATA_LOG = "__cluster_metadata-0"  # the Raft log fsyncs every append: it survives
CHECKPOINT = "recovery-point-offset-checkpoint"


class PowerLossParams(FaultParams):
    """Which unflushed writes the power loss takes with it."""

    window_s: Annotated[
        optional_param_number,
        Field(
            description="seconds of unflushed writes lost, >= 0; null = all since the last flush"
        ),
        at_least(0),
        at_most(MAX_DURATION_S, WHY_DURATION, "s"),
    ] = 30  # Linux writes dirty pages back after 30 s


class PowerLossDetail(SignalDetail):
    """SIGKILL with the page cache lost: the window, and per host what each partition lost."""

    page_cache: str
    window_s: float | None
    lost: dict[str, dict[str, dict[str, int | str]]]  # host -> partition -> its cut


class PowerLoss(Fault[PowerLossParams]):
    """SIGKILL plus the loss of each target's unflushed partition data; heal restarts."""

    name = "power-loss"
    Params = PowerLossParams
    class_kinds = (ClassKind.POWER_LOSS,)

    def inject(self) -> PowerLossDetail:
        for node in self.nodes:
            node.kill()
        window_s = self.params.window_s
        lost_after_ms = None if window_s is None else int((time.time() - window_s) * 1000)
        lost = {}
        for node in self.nodes:
            wait_until_down(node)
            lost[node.hostname] = lose_unflushed(node, lost_after_ms)
        return {"signal": "SIGKILL", "page_cache": "lost", "window_s": window_s, "lost": lost}

    def heal(self) -> None:
        start_stopped(self.nodes)


def wait_until_down(node: KafkaNode, timeout_s: float = 10.0) -> None:
    """Wait until the killed container stopped: no process may write while we cut."""
    if not wait_for(lambda: node.state() != "running", timeout_s, interval_s=0.05):
        raise FaultError(f"{node.hostname} still runs {timeout_s:.0f} s after SIGKILL")


def lose_unflushed(node: KafkaNode, lost_after_ms: int | None) -> dict[str, dict[str, int | str]]:
    """Cut the unflushed tail of every partition log on the stopped node.

    Returns, per partition that lost data, the bytes and batches before and after the cut.
    """
    log_dir = node.disk_dir  # where the data lies while the node is stopped
    files = node.read_files(log_dir)
    root = log_dir.rstrip("/").rsplit("/", 1)[-1]  # archive names start with the folder's name
    checkpoint = files.get(f"{root}/{CHECKPOINT}")
    recovery = read_checkpoint(checkpoint[1].decode()) if checkpoint else {}
    cut: dict[str, tuple[tarfile.TarInfo, bytes]] = {}
    report: dict[str, dict[str, int | str]] = {}
    # Segment names are zero-padded base offsets: sorted names are log order.
    for name in sorted(files):
        header, data = files[name]
        parts = name.split("/")
        if len(parts) != 3 or not parts[2].endswith(".log") or parts[1] == METADATA_LOG:
            continue
        partition = parts[1]
        kept = surviving_length(data, recovery.get(partition, 0), lost_after_ms)
        if partition in report:  # an earlier segment was cut: this one must vanish
            raise FaultError(
                f"{node.hostname}: {partition} has unflushed data in more than one segment, "
                "which a simulated power loss cannot cut; raise segment.bytes"
            )
        if kept < len(data):
            cut[name] = (header, data[:kept])
            report[partition] = {
                "segment": parts[2],
                "bytes_before": len(data),
                "bytes_after": kept,
            }
    if cut:
        parent = log_dir.rstrip("/").rsplit("/", 1)[0]
        node.write_files(parent, cut)
    return report
