"""The disk layer: chaosfs (harness/platform/chaosfs/), a FUSE file system mounted over a node's
log directory inside its container, through which the disk faults act.

A node with the layer keeps its log data in DISK_DIR of its container (what a disk holds)
and Kafka reads and writes it through the mount at its log directory. chaosfs writes through
at once, so DISK_DIR always holds everything Kafka wrote; beside it chaosfs remembers what was
not fsynced yet, which its `crash` command takes away (the real power loss).

The container's entrypoint becomes a short shell script that starts chaosfs, waits for the
mount and then runs the image's own entrypoint: the broker stays PID 1 (so `docker kill` is
still a SIGKILL of the broker) and chaosfs dies with the container, as a disk's cache would.
The image is not changed: the static binary is copied into the created container, so any
image with /bin/sh gets the layer.
"""

from __future__ import annotations

import io
import shlex
import tarfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    import docker

    from harness.platform.node import KafkaNode

DISK_DIR = "/var/lib/kafka/disk"  # the node's disk: what survives when chaosfs is gone
TOOLS_DIR = "/opt/kafka-chaos"
BINARY = f"{TOOLS_DIR}/chaosfs"
CONTROL = "/run/chaosfs.sock"
SERVE_LOG = "/run/chaosfs.log"
MOUNT_WAIT_S = 20
APPARMOR = Path("/sys/module/apparmor/parameters/enabled")


def start_script(log_dir: str) -> str:
    """The shell that mounts chaosfs at `log_dir` over DISK_DIR, waits for the mount, then
    runs "$@" (the image's own entrypoint and command); it fails naming why chaosfs did not
    mount. Loads no Docker module, like the fault registry that reads RESIDUE_CLEANUP."""
    return f"""set -eu
rm -f {CONTROL} {SERVE_LOG}
mkdir -p {DISK_DIR} {log_dir}
{BINARY} serve --backing {DISK_DIR} --mount {log_dir} --control {CONTROL} >{SERVE_LOG} 2>&1 &
tries=0
until grep -q '^chaosfs: serving' {SERVE_LOG} 2>/dev/null; do
  if ! kill -0 $! 2>/dev/null; then
    echo "chaosfs could not mount {log_dir}:" >&2; cat {SERVE_LOG} >&2; exit 1
  fi
  tries=$((tries + 1))
  if [ $tries -gt {MOUNT_WAIT_S * 20} ]; then
    echo "chaosfs did not mount {log_dir} in {MOUNT_WAIT_S} s:" >&2; cat {SERVE_LOG} >&2; exit 1
  fi
  sleep 0.05
done
exec "$@"
"""


# What the final heal runs in every node with the layer: the disk faults' modes off (a crash
# stays: its container is killed right after, and a restart mounts afresh). In the node
# itself, never in a network-tools helper: the control socket is in the node's file system.
HEAL = ["sh", "-c", f"[ ! -S {CONTROL} ] || {BINARY} ctl --control {CONTROL} heal"]


class DiskLayerError(RuntimeError):
    """The disk layer could not be set up or did not answer; the message says why."""


class CreateOptions(TypedDict, total=False):
    """containers.create() keyword arguments for a node under the disk layer (none for a node
    without it; create_options gives the first three always)."""

    devices: list[str]
    entrypoint: list[str]
    command: list[str]
    security_opt: list[str]


def create_options(client: docker.DockerClient, image: str, log_dir: str) -> CreateOptions:
    """The containers.create() keyword arguments that give a node of `image` the layer over
    `log_dir`: the FUSE device, the start script before the image's entrypoint (the caller
    adds CAP_SYS_ADMIN, which mounting needs)."""
    config = client.images.get(image).attrs.get("Config") or {}
    own = [*(config.get("Entrypoint") or []), *(config.get("Cmd") or [])]
    if not own:
        raise DiskLayerError(f"image {image} names no entrypoint or command to run under chaosfs")
    options: CreateOptions = {
        "devices": ["/dev/fuse:/dev/fuse:rwm"],
        "entrypoint": ["/bin/sh", "-c", start_script(log_dir), "kafka-chaos-disk-layer"],
        "command": own,
    }
    # Docker's default AppArmor profile forbids mount(2) even with CAP_SYS_ADMIN.
    if _apparmor_enabled():
        options["security_opt"] = ["apparmor=unconfined"]
    return options


def _apparmor_enabled() -> bool:
    try:
        return APPARMOR.read_text().strip().upper().startswith("Y")
    except OSError:
        return False


def install(container: Any, binary: Path) -> None:
    """Copy chaosfs into the created (not yet started) container, at BINARY."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        folder = tarfile.TarInfo(TOOLS_DIR.strip("/"))
        folder.type, folder.mode = tarfile.DIRTYPE, 0o755
        archive.addfile(folder)
        member = tarfile.TarInfo(BINARY.strip("/"))
        member.size, member.mode = binary.stat().st_size, 0o755
        with binary.open("rb") as data:
            archive.addfile(member, data)
    if not container.put_archive("/", buffer.getvalue()):
        raise DiskLayerError(f"could not copy chaosfs into {container.name}")


def control(node: KafkaNode, *command: str) -> dict[str, Any]:
    """chaosfs's answer (its JSON reply) to `command` on `node`; DiskLayerError when the node
    has no layer, chaosfs does not answer or refuses."""
    from harness.platform.sidecar import last_json_object  # docker: only where a node runs

    argv = [BINARY, "ctl", "--control", CONTROL, *command]
    code, out = node.exec(argv)
    if code == 0 and not out.strip() and command[0] != "crash":
        # Seen once while a controller started: exit 0, no output through the engine's exec.
        # Every command but the crash is idempotent, so asking again is safe.
        code, out = node.exec(argv)
    reply = last_json_object(out)
    if code != 0 or not reply.get("ok"):
        raise DiskLayerError(
            f"{node.hostname}: `{shlex.join(command)}` on its disk layer failed "
            f"(exit {code}): {reply.get('error') or out.strip()[-500:]}"
        )
    return reply
