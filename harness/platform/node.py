"""One Kafka, controller or ZooKeeper node: its container (a Testcontainers NodeContainer,
harness/platform/containers.py, never removed across restarts) and what the harness asks of it,
done on the docker SDK container it wraps."""

from __future__ import annotations

import copy
import io
import json
import tarfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import docker
import docker.errors
import docker.models.containers
from testcontainers.core.exceptions import ContainerStartException

from harness.platform.topology import (
    LOG_DIR,
    ClusterError,
    Role,
    hostname_of,
)

if TYPE_CHECKING:
    from harness.platform.containers import NodeContainer


UNPAUSE_TIMEOUT_S = 15.0
KILLED_EXIT = 137  # a container's exit code after SIGKILL (128 + 9)
# What the engine says when asked to signal a container whose process already exited.
ALREADY_EXITED = ("is not running", "is zombie")
CGROUP_ROOT = Path("/sys/fs/cgroup")


def thaw_cgroup(container_id: str, root: Path | None = None) -> bool:
    """Thaw a container's freezer cgroup by hand (cgroup v1 freezer.state, v2 cgroup.freeze);
    True when one was found and written. Only for a local engine run as root."""
    root = root or CGROUP_ROOT
    thawed = False
    patterns = (f"freezer/**/*{container_id}*/freezer.state", f"**/*{container_id}*/cgroup.freeze")
    for pattern in patterns:
        for path in root.glob(pattern):
            try:
                path.write_text("THAWED" if path.name == "freezer.state" else "0")
                thawed = True
            except OSError:
                continue
    return thawed


class NetworkTools(Protocol):
    """Runs a command in a node's network namespace (see KafkaNode.net_exec)."""

    def exec(self, argv: list[str]) -> tuple[int, str]: ...


@dataclass
class KafkaNode:
    """One container of the cluster (a broker, a controller or a ZooKeeper server);
    lifecycle calls never remove the container."""

    node_id: int
    host_port: int  # the published client port; 0 for nodes clients never reach
    container: NodeContainer  # the Testcontainers container; `docker` is the one it wraps
    host: str = "127.0.0.1"  # where this process reaches host_port (the docker host)
    role: Role = Role.COMBINED
    # Pause and exec take turns: an exec racing a pause leaves its process in the frozen
    # cgroup, and the engine's unpause then hangs (reproduced with Docker 20.10 on cgroup v1:
    # the sampler's controller probe, an exec, against a pause fault on the same node).
    _engine_turn: threading.Lock = field(
        default_factory=threading.Lock, init=False, repr=False, compare=False
    )
    # Where the harness's network commands (iptables, tc) run when the node's image lacks
    # them: a helper in the node's network namespace (harness/platform/sidecar.py); None runs
    # them in the node itself.
    network_tools: NetworkTools | None = field(default=None, repr=False, compare=False)
    # Where the log data lies in the container's own file system, readable when it is stopped:
    # LOG_DIR, or the disk below the disk layer's mount (harness/platform/disk_layer.py).
    disk_dir: str = LOG_DIR

    @property
    def hostname(self) -> str:
        return hostname_of(self.role, self.node_id)

    @property
    def log_dir(self) -> str:
        """The log directory as the running broker sees it (the disk layer's mount, if any)."""
        return LOG_DIR

    @property
    def disk_layered(self) -> bool:
        """Whether the node's log directory is a disk layer's mount (the disk faults' site)."""
        return self.disk_dir != LOG_DIR

    @property
    def address(self) -> str:
        """host:port at which clients of this process reach the node."""
        return f"{self.host}:{self.host_port}"

    @property
    def docker(self) -> docker.models.containers.Container:
        """The docker SDK container the node's Testcontainers container wraps."""
        return self.container.get_wrapped_container()

    def state(self) -> str:
        """Docker's state of the container: running, paused, exited, ..."""
        self.docker.reload()
        return self.docker.status

    def kill(self) -> None:
        """SIGKILL the broker process (the OS page cache survives, as with a process crash). A
        process that already exited counts as killed: the engine refuses to signal a container
        that is not running, or whose process it has not reaped yet (a zombie), and either way
        the broker is gone without a controlled shutdown, which is what a kill means."""
        try:
            self.docker.kill(signal="SIGKILL")
        except docker.errors.APIError as exc:
            if not any(sign in str(exc) for sign in ALREADY_EXITED):
                raise

    def stop(self, timeout_s: int = 60) -> bool:
        """SIGTERM and wait up to `timeout_s` for Kafka's controlled shutdown to finish;
        whether it did (False: the engine killed the broker at the timeout, as SIGKILL would,
        which a shutdown that cannot reach the controller quorum may need)."""
        self.docker.stop(timeout=timeout_s)
        self.docker.reload()
        return self.docker.attrs["State"].get("ExitCode") != KILLED_EXIT

    def start(self) -> None:
        """Start the stopped or killed container again, with its log directory intact."""
        self.docker.start()

    def pause(self, attempts: int = 10) -> None:
        """Freeze every process of the node (cgroup freezer), retrying a transient refusal.

        With cgroup v1 the freezer gives up ("unable to freeze") when a task does not stop
        in time, e.g. a JVM busy starting; a moment later the same request succeeds.
        """
        for attempt in range(attempts):
            try:
                with self._engine_turn:
                    self.docker.pause()
                return
            except docker.errors.APIError as exc:
                if "unable to freeze" not in str(exc) or attempt == attempts - 1:
                    raise
                time.sleep(0.2 * (attempt + 1))

    def unpause(self, timeout_s: float = UNPAUSE_TIMEOUT_S) -> None:
        """Thaw a paused node. When the engine does not answer within `timeout_s` (seen on a
        2-core machine under load: `docker unpause` hung with the freezer cgroup FROZEN),
        thaw the container's freezer cgroup directly, then wait as long again for the engine:
        a fault must heal whatever the engine does."""
        done = threading.Event()
        failure: list[BaseException] = []

        def unpause() -> None:
            try:
                self.docker.unpause()
            except BaseException as exc:  # handed to the caller's thread
                failure.append(exc)
            finally:
                done.set()

        threading.Thread(target=unpause, name=f"unpause-{self.hostname}", daemon=True).start()
        if not done.wait(timeout_s):
            thawed = thaw_cgroup(self.docker.id)
            if not done.wait(timeout_s) and not thawed:
                raise TimeoutError(
                    f"docker unpause of {self.hostname} did not return in {2 * timeout_s:g} s "
                    "and its freezer cgroup could not be thawed directly"
                )
        if failure:
            raise failure[0]

    def exec(self, argv: list[str]) -> tuple[int, str]:
        """Run `argv` inside the node; return exit code and combined output."""
        with self._engine_turn:
            result = self.docker.exec_run(argv)
        return result.exit_code, result.output.decode(errors="replace")

    def net_exec(self, argv: list[str]) -> tuple[int, str]:
        """Run `argv` in the node's network namespace with the harness's network tools (in the
        node, or in its network-tools helper when its image has none); code and output."""
        if self.network_tools is not None:
            return self.network_tools.exec(argv)
        return self.exec(argv)

    def started_at(self) -> str:
        """When the container last started: a new value means a new network namespace."""
        self.docker.reload()
        return str(self.docker.attrs.get("State", {}).get("StartedAt", ""))

    def read_files(self, path: str) -> dict[str, tuple[tarfile.TarInfo, bytes]]:
        """The regular files under `path` (works on a stopped container): archive name ->
        (tar header with owner and mode, contents). Names start with the folder's own name."""
        stream, _ = self.docker.get_archive(path)
        files = {}
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as archive:
            for member in archive.getmembers():
                if member.isfile():
                    extracted = archive.extractfile(member)
                    files[member.name] = (member, extracted.read() if extracted else b"")
        return files

    def archive(self, path: str) -> Iterator[bytes] | None:
        """The tar stream of `path` in chunks, as Docker sends it (works on a stopped
        container); None when the path does not exist. Names start with the path's own name."""
        try:
            stream, _ = self.docker.get_archive(path)
        except docker.errors.NotFound:
            return None
        return stream

    def write_files(self, parent: str, files: dict[str, tuple[tarfile.TarInfo, bytes]]) -> None:
        """Overwrite files below `parent` (archive names as `read_files` gives them), keeping
        each header's owner and mode; works on a stopped container."""
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            for name, (header, data) in files.items():
                member = copy.copy(header)
                member.name, member.size = name, len(data)
                archive.addfile(member, io.BytesIO(data))
        if not self.docker.put_archive(parent, buffer.getvalue()):
            raise ClusterError(f"{self.hostname}: could not write files below {parent}")

    def ip(self, network: str) -> str:
        """The node's address on the cluster's Docker network ('' while it is down)."""
        self.docker.reload()
        return self.docker.attrs["NetworkSettings"]["Networks"][network]["IPAddress"]

    def logs(self) -> bytes | None:
        """Everything the node wrote to stdout/stderr, across restarts; None when the engine
        cannot give it (the container is gone)."""
        try:
            return self.docker.logs(stdout=True, stderr=True)
        except (docker.errors.APIError, ContainerStartException):  # gone, or never created
            return None

    def controller_vote(self) -> tuple[int, int] | None:
        """(leader epoch, leader id) of the KRaft quorum as this node last recorded it."""
        path = f"{LOG_DIR}/__cluster_metadata-0/quorum-state"
        try:
            code, out = self.exec(["cat", path])
        except docker.errors.APIError:
            return None
        if code != 0:
            return None
        try:
            document = json.loads(out)
        except json.JSONDecodeError:
            # Seen once: exit 0 and no output through the engine's exec (a random nemesis'
            # `controller` target then failed its fault). Another node's vote serves.
            return None
        data = document.get("data", document)
        leader = data.get("leaderId", -1)
        return (data.get("leaderEpoch", -1), leader) if leader >= 0 else None


def vote_if_running(node: KafkaNode) -> tuple[int, int] | None:
    """The node's controller vote, None if it is not running or has none."""
    return node.controller_vote() if node.state() == "running" else None
