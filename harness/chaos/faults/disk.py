"""Disk faults, through the disk layer (chaosfs, a FUSE file system under each node's log
directory: harness/platform/disk_layer.py).

- lose-unsynced: the real power loss. Every write the node did not fsync is undone on its disk,
  then the node is SIGKILLed: it restarts from what an fsync had made durable, where the
  `power-loss` fault only models that from the recovery-point checkpoint.
- torn-write: the same power loss, but the kernel had written back each file's unsynced
  writes except the last, which was in flight: its first half reached the disk (never ending
  on a 512-byte sector boundary). Kafka appends a record batch a write, so each segment ends in
  a torn batch that its recovery has to find and drop.
- fsync-error: fsync fails with EIO while the fault lasts (Kafka takes its log directory
  offline; with its only log directory gone a broker halts).
- disk-full: writes that need new space fail with ENOSPC while the fault lasts.
- slow-disk: each write and each fsync waits, as on a saturated or failing disk.

Metadata (create, rename, unlink) is durable at once on the layer: a power loss keeps files
that were created, even empty, which a real file system without a directory fsync may not.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Annotated, Any, Final, TypedDict, cast

from pydantic import Field

from harness.chaos.faults.base import Fault, FaultError, FaultParams, HelperSite, start_stopped
from harness.chaos.faults.power_loss import wait_until_down
from harness.chaos.faults.process import SignalDetail
from harness.limits import at_most, whole
from harness.platform import disk_layer
from harness.rundir.events import FaultDetail, FaultEndDetail
from harness.rundir.fault_classes import ClassKind
from harness.waiting import wait_for

if TYPE_CHECKING:
    from harness.platform.node import KafkaNode

MAX_DISK_DELAY_MS = 60_000


class _FileReport(TypedDict, total=False):
    """What a crash did to one file (chaosfs's FileReport: tracker.go)."""

    path: str
    synced_size: int
    size_before: int
    size_after: int
    restored_bytes: int


class _LayerReply(TypedDict, total=False):
    """chaosfs's reply, as read: a crash's (CrashReport: tracker.go) or a status's."""

    torn: bool
    files: list[_FileReport]
    dropped_bytes: int
    failed_ops: int


def _layer_answer(node: KafkaNode, *command: str) -> _LayerReply:
    """chaosfs's reply to `command` on `node`; FaultError when the node has no disk layer or
    the layer refuses."""
    if not node.disk_layered:
        raise FaultError(
            f"{node.hostname} has no disk layer, which the disk faults act through; the runner "
            "mounts one under every node when an experiment has disk faults"
        )
    try:
        return cast("_LayerReply", disk_layer.control(node, *command))
    except disk_layer.DiskLayerError as exc:
        raise FaultError(str(exc)) from exc


HALT_WAIT_S: Final = 10.0  # how long a heal waits for a broker whose disk failed to halt


def _halted(node: KafkaNode) -> bool:
    """Whether `node`'s container has stopped."""
    return node.state() != "running"


def _if_running(node: KafkaNode, *command: str) -> _LayerReply | None:
    """chaosfs's reply to `command` on `node`; None when the node is not running, before the
    command or by the time it failed: a broker halts on its failing log directory at any
    moment, and a stopped container takes no command."""
    if node.state() != "running":
        return None
    try:
        return _layer_answer(node, *command)
    except FaultError:
        if node.state() != "running":
            return None
        raise


class _OnDisk(Fault[Any]):
    """What every disk fault shares: its site, and the binary built before any cluster."""

    helper_site = HelperSite.FUSE_MOUNT

    @classmethod
    def prepare(cls, settings: Any) -> None:
        """Build chaosfs (or find it cached): DiskLayerError naming the fix when Go is missing."""
        from harness.platform.disk_layer import chaosfs_binary

        chaosfs_binary(settings)


class FileSizes(TypedDict):
    """One file's size when last synced, before the crash and after it."""

    synced: int
    before: int
    after: int


class CrashSummary(TypedDict):
    """What a crash took on one node: bytes dropped, whether torn, per changed file its sizes."""

    dropped_bytes: int
    torn: bool | None
    files: dict[str, FileSizes]


class CrashDetail(SignalDetail):
    """The disk layer's power loss (page cache lost), and per host what its crash took."""

    method: str
    page_cache: str
    lost: dict[str, CrashSummary]


class LoseUnsynced(_OnDisk):
    """Power loss for real: unsynced writes undone on the disk, then SIGKILL; heal restarts."""

    name = "lose-unsynced"
    class_kinds = (ClassKind.POWER_LOSS,)
    crash_command: tuple[str, ...] = ("crash",)

    def inject(self) -> CrashDetail:
        lost = {}
        for node in self.nodes:
            # The layer refuses every operation after the crash, so nothing Kafka writes
            # between the crash and the kill reaches the disk.
            reply = _layer_answer(node, *self.crash_command)
            node.kill()
            lost[node.hostname] = _crash_summary(reply)
        for node in self.nodes:
            wait_until_down(node)
        return {"method": "disk-layer", "signal": "SIGKILL", "page_cache": "lost", "lost": lost}

    def heal(self) -> None:
        start_stopped(self.nodes)


class TornWrite(LoseUnsynced):
    """Power loss with the last write in flight: each file keeps its unsynced writes but the
    second half of the last one."""

    name = "torn-write"
    crash_command = ("crash", "torn")


def _crash_summary(reply: _LayerReply) -> CrashSummary:
    """What a crash took, for events.jsonl: bytes dropped, and per changed file its sizes."""
    files: dict[str, FileSizes] = {
        entry.get("path") or "(unlinked)": {
            "synced": entry.get("synced_size", 0),
            "before": entry.get("size_before", 0),
            "after": entry.get("size_after", 0),
        }
        for entry in reply.get("files", [])
        if entry.get("size_before") != entry.get("size_after") or entry.get("restored_bytes")
    }
    return {
        "dropped_bytes": reply.get("dropped_bytes", 0),
        "torn": reply.get("torn"),
        "files": files,
    }


class ModeDetail(FaultDetail):
    """The disk layer's mode switched on."""

    mode: str


class ModeEnd(FaultEndDetail):
    """Operations the layer failed per node running at heal; the nodes stopped by then."""

    failed_ops: dict[str, int]
    halted: list[str]


class _Mode(_OnDisk):
    """A disk fault that is a mode of the layer: on at inject, off at heal. A broker that
    halted on the failure (Kafka halts when its only log directory fails) is started again."""

    class_kinds = (ClassKind.DISK_ERROR,)
    mode: str

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._failed_ops: dict[str, int] = {}
        self._halted: list[str] = []

    def inject(self) -> ModeDetail:
        for node in self.nodes:
            _layer_answer(node, "set", self.mode, "on")
        return {"mode": self.mode}

    def heal(self) -> None:
        for node in self.nodes:
            status = _if_running(node, "status")
            if status is not None:
                self._failed_ops[node.hostname] = int(status.get("failed_ops", 0))
            if status is None or _if_running(node, "set", self.mode, "off") is None:
                self._halted.append(node.hostname)  # its layer restarts with the node: off
            elif self._failed_ops[node.hostname] and wait_for(partial(_halted, node), HALT_WAIT_S):
                # A failed operation took the log directory offline, and Kafka halts a broker
                # whose only one is: a moment later, maybe after the mode went off here.
                self._halted.append(node.hostname)
        start_stopped(self.nodes)

    def detail(self) -> ModeEnd:
        """How many operations the layer failed on each node still running at heal, and which
        nodes had stopped by then (the broker halted on the failure)."""
        return {"failed_ops": dict(self._failed_ops), "halted": list(self._halted)}


class FsyncError(_Mode):
    """fsync fails with EIO on the target's log directory while the fault lasts."""

    name = "fsync-error"
    mode = "fsync-error"


class DiskFull(_Mode):
    """The target's disk is full while the fault lasts: growing writes fail with ENOSPC."""

    name = "disk-full"
    mode = "disk-full"


DiskDelay = Annotated[
    whole,
    Field(ge=0),
    at_most(MAX_DISK_DELAY_MS, "a minute, beyond every broker and client timeout", "ms"),
]


class SlowDiskParams(FaultParams):
    """How long each write and each fsync of the target's log directory waits."""

    write_ms: Annotated[DiskDelay, Field(description="wait before each write, whole ms")] = 20
    fsync_ms: Annotated[DiskDelay, Field(description="wait before each fsync, whole ms")] = 200


class SlowDiskDetail(FaultDetail):
    """The wait before each write and each fsync, ms."""

    write_ms: int
    fsync_ms: int


class SlowDisk(_OnDisk):
    """Every write and fsync of the target's log directory waits (params.write_ms, fsync_ms)."""

    name = "slow-disk"
    Params = SlowDiskParams
    class_kinds = (ClassKind.SLOW_DISK,)

    def inject(self) -> SlowDiskDetail:
        for node in self.nodes:
            _layer_answer(node, "set", "write-delay", str(self.params.write_ms))
            _layer_answer(node, "set", "fsync-delay", str(self.params.fsync_ms))
        return {"write_ms": self.params.write_ms, "fsync_ms": self.params.fsync_ms}

    def heal(self) -> None:
        for node in self.nodes:  # a node stopped meanwhile restarts with a fresh layer
            if _if_running(node, "set", "write-delay", "0") is not None:
                _if_running(node, "set", "fsync-delay", "0")
