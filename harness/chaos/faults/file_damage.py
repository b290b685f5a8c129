"""Damage to one file of a node's log directory, chosen by kind: `truncate` cuts its last
bytes off, what a lost page cache leaves of one file on one node (the scenario of
redpanda-data/kafka-fsync: ten bytes cut off the last leader's segment while it was down);
`flip` inverts one bit near its end, silent corruption of one replica (Jepsen's NATS 2.12.1
analysis lost acknowledged writes to one flipped bit on a minority of nodes).

The file is one of the step's partition of the experiment topic (its newest segment, offset
index or time index, its leader-epoch checkpoint or partition.metadata), or one of the log
directory's checkpoints. On a stopped node the file is rewritten through the Docker engine's
archive API (as `power-loss` cuts); on a running node it is changed in place by a command in
the broker's container, so the broker's open file sees the change. Damage is permanent: the
heal does nothing (a stopped node stays stopped; the step that stopped it starts it).
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, TypedDict

from pydantic import Field

from harness.chaos.faults.base import Fault, FaultError, FaultParams, HelperSite
from harness.limits import at_most, whole
from harness.rundir.events import FaultDetail
from harness.rundir.fault_classes import ClassKind

if TYPE_CHECKING:
    from harness.platform.node import KafkaNode

MAX_CUT_BYTES = 1 << 30  # a whole default segment
FileKind = Literal[
    "segment",
    "index",
    "timeindex",
    "leader-epoch-checkpoint",
    "partition-metadata",
    "recovery-checkpoint",
    "replication-checkpoint",
    "log-start-checkpoint",
]
# Kinds that are the newest file of a partition with this suffix (names are zero-padded base
# offsets, so the last in name order is the newest).
NEWEST_WITH_SUFFIX = {"segment": ".log", "index": ".index", "timeindex": ".timeindex"}
IN_PARTITION = {
    "leader-epoch-checkpoint": "leader-epoch-checkpoint",
    "partition-metadata": "partition.metadata",
}
IN_LOG_DIR = {
    "recovery-checkpoint": "recovery-point-offset-checkpoint",
    "replication-checkpoint": "replication-offset-checkpoint",
    "log-start-checkpoint": "log-start-offset-checkpoint",
}
FILE_DESCRIPTION = (
    "which file: segment, index, timeindex (the partition's newest), leader-epoch-checkpoint, "
    "partition-metadata, or the log directory's recovery-, replication- or "
    "log-start-checkpoint"
)


class TruncateParams(FaultParams):
    """Which file loses how many of its last bytes."""

    file: Annotated[FileKind, Field(description=FILE_DESCRIPTION)] = "segment"
    bytes: Annotated[
        whole,
        Field(ge=1, description="bytes cut off the file's end, >= 1"),
        at_most(MAX_CUT_BYTES, "a whole default segment", " bytes"),
    ] = 10


class FlipParams(FaultParams):
    """Which file has which bit of which byte inverted."""

    file: Annotated[FileKind, Field(description=FILE_DESCRIPTION)] = "segment"
    byte_from_end: Annotated[
        whole,
        Field(
            ge=1,
            description="the byte, counted from the file's end (1: the last byte; the first "
            "byte when the file is shorter), >= 1; the default lands in the newest record's "
            "value",
        ),
        at_most(MAX_CUT_BYTES, "a whole default segment", " bytes"),
    ] = 20
    bit: Annotated[whole, Field(ge=0, le=7, description="which bit of the byte, 0-7")] = 0


class DamagedFile(TypedDict, total=False):
    """What was done to one node's file: whether the node ran, the file (relative to the log
    directory), its size before, and the damage: truncate's size_after; flip's byte (`at`,
    from the start), bit, and the byte's values before and after."""

    node: str
    file: str
    size_before: int
    size_after: int
    at: int
    bit: int
    byte_before: int
    byte_after: int


class FileDamageDetail(FaultDetail):
    """Per host, what was done to its file."""

    files: dict[str, DamagedFile]


class _FileDamage(Fault[Any]):
    """Finding the file, and reading and writing it on a running or a stopped node: `_damage`
    turns the file's bytes into the damaged bytes, `_change_in_place` damages it in place."""

    helper_site = HelperSite.BROKER_CONTAINER
    tools: ClassVar[tuple[str, ...]] = ("truncate", "stat", "ls")

    def inject(self) -> FileDamageDetail:
        return {"files": {node.hostname: self._damage_on(node) for node in self.nodes}}

    def heal(self) -> None:
        """Nothing to undo: the damage stays, as a disk's would."""

    def _damage_on(self, node: KafkaNode) -> DamagedFile:
        running = node.state() == "running"
        folder, name = self._where(node, running)
        if running:
            return {"node": "running", **self._in_place(node, f"{node.log_dir}/{folder}{name}")}
        return {"node": "stopped", **self._through_archive(node, folder, name)}

    def _where(self, node: KafkaNode, running: bool) -> tuple[str, str]:
        """(folder relative to the log directory, ending in '/' or empty; file name)."""
        kind = self.params.file
        if kind in IN_LOG_DIR:
            return "", IN_LOG_DIR[kind]
        folder = f"{self.ctx.topic}-{self.partition}/"
        if kind in IN_PARTITION:
            return folder, IN_PARTITION[kind]
        names = self._listing(node, folder, running)
        suffix = NEWEST_WITH_SUFFIX[kind]
        matching = sorted(n for n in names if n.endswith(suffix))
        if not matching:
            raise FaultError(f"{node.hostname}: no {suffix} file in {folder} to damage")
        return folder, matching[-1]

    @staticmethod
    def _listing(node: KafkaNode, folder: str, running: bool) -> list[str]:
        if running:
            code, out = node.exec(["ls", "-1", f"{node.log_dir}/{folder}"])
            if code != 0:
                raise FaultError(f"{node.hostname}: cannot list {folder}: {out.strip()}")
            return out.split()
        files = node.read_files(f"{node.disk_dir}/{folder}")
        return [name.rsplit("/", 1)[-1] for name in files]

    def _through_archive(self, node: KafkaNode, folder: str, name: str) -> DamagedFile:
        path = f"{node.disk_dir}/{folder}{name}"
        files = node.read_files(path)
        if name not in files:
            raise FaultError(f"{node.hostname}: {folder}{name} does not exist")
        header, data = files[name]
        damaged, detail = self._damage(data)
        node.write_files(path.rsplit("/", 1)[0], {name: (header, damaged)})
        return {"file": f"{folder}{name}", "size_before": len(data), **detail}

    def _in_place(self, node: KafkaNode, path: str) -> DamagedFile:
        size = int(_run(node, f"stat -c %s {shlex.quote(path)}"))
        detail = self._change_in_place(node, path, size)
        return {"file": path.removeprefix(f"{node.log_dir}/"), "size_before": size, **detail}

    def _damage(self, data: bytes) -> tuple[bytes, DamagedFile]:
        raise NotImplementedError

    def _change_in_place(self, node: KafkaNode, path: str, size: int) -> DamagedFile:
        raise NotImplementedError


class Truncate(_FileDamage):
    """The file's last `bytes` bytes cut off (all of it when shorter)."""

    name = "truncate"
    Params = TruncateParams
    # What a lost page cache leaves of the file, on the target alone.
    class_kinds = (ClassKind.POWER_LOSS,)

    def _damage(self, data: bytes) -> tuple[bytes, DamagedFile]:
        kept = max(0, len(data) - self.params.bytes)
        return data[:kept], {"size_after": kept}

    def _change_in_place(self, node: KafkaNode, path: str, size: int) -> DamagedFile:
        kept = max(0, size - self.params.bytes)
        _run(node, f"truncate -s {kept} {shlex.quote(path)}")
        return {"size_after": kept}


class Flip(_FileDamage):
    """One bit of one byte near the file's end inverted, the file's size unchanged."""

    name = "flip"
    Params = FlipParams
    tools = ("stat", "ls", "od", "dd")
    # Silent corruption of one replica: Kafka documents no outcome for it.
    class_kinds = (ClassKind.CORRUPTION,)

    def _damage(self, data: bytes) -> tuple[bytes, DamagedFile]:
        if not data:
            raise FaultError(f"the file to flip a bit of is empty ({self.params.file})")
        at = max(0, len(data) - self.params.byte_from_end)
        after = data[at] ^ (1 << self.params.bit)
        detail: DamagedFile = {
            "at": at,
            "bit": self.params.bit,
            "byte_before": data[at],
            "byte_after": after,
        }
        return data[:at] + bytes([after]) + data[at + 1 :], detail

    def _change_in_place(self, node: KafkaNode, path: str, size: int) -> DamagedFile:
        if size == 0:
            raise FaultError(f"{node.hostname}: {path} is empty, no bit to flip")
        at, quoted = max(0, size - self.params.byte_from_end), shlex.quote(path)
        before = int(_run(node, f"od -An -tu1 -j {at} -N1 {quoted}"))
        after = before ^ (1 << self.params.bit)
        # printf writes the byte from its octal escape; dd overwrites it and keeps the size.
        _run(
            node,
            f"printf '\\{after:03o}' | dd of={quoted} bs=1 seek={at} count=1 conv=notrunc "
            "2>/dev/null",
        )
        return {"at": at, "bit": self.params.bit, "byte_before": before, "byte_after": after}


def _run(node: KafkaNode, script: str) -> str:
    """The output of `script` run by sh in the broker's container; FaultError when it fails."""
    code, out = node.exec(["sh", "-c", script])
    if code != 0:
        raise FaultError(f"{node.hostname}: `{script}` exited {code}: {out.strip()}")
    return out.strip()
