"""The disk layer: chaosfs (harness/platform/chaosfs/), a FUSE file system mounted over a node's
log directory inside its container, through which the disk faults act.

A node with the layer keeps its log data in DISK_DIR of its container (what a disk holds)
and Kafka reads and writes it through the mount at its log directory. chaosfs writes through
at once, so DISK_DIR always holds everything Kafka wrote; beside it chaosfs remembers what was
not fsynced yet, which its `crash` command takes away (the real power loss).

The container's entrypoint becomes a short shell script that starts chaosfs, waits for the
mount and then runs the image's own entrypoint: the broker stays PID 1 (so `docker kill` is
still a SIGKILL of the broker) and chaosfs dies with the container, as a disk's cache would.
The image is not changed: the static binary is copied into the container between its creation
and its start (Testcontainers' with_copy_into_container), so any image with /bin/sh gets the
layer. The binary is built on demand from its Go sources into a
static binary, cached under the cache directory keyed by a digest of the sources, so a second
call is a lookup; it needs the Go toolchain only to build.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from harness.settings import Settings

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
    """The disk layer could not be built, set up or did not answer; the message says why (and,
    for the build, the fix)."""


class CreateOptions(TypedDict, total=False):
    """The container options of a node under the disk layer, for Testcontainers' with_kwargs
    and with_command (none for a node without it; create_options gives the first three always)."""

    devices: list[str]
    entrypoint: list[str]
    command: list[str]
    security_opt: list[str]


def create_options(client: docker.DockerClient, image: str, log_dir: str) -> CreateOptions:
    """The container options that give a node of `image` the layer over
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


def control(node: KafkaNode, *command: str) -> dict[str, Any]:
    """chaosfs's answer (its JSON reply) to `command` on `node`; DiskLayerError when the node
    has no layer, chaosfs does not answer or refuses."""
    from docker.errors import APIError

    from harness.platform.sidecar import last_json_object  # docker: only where a node runs

    argv = [BINARY, "ctl", "--control", CONTROL, *command]
    try:
        code, out = node.exec(argv)
        if code == 0 and not out.strip() and command[0] != "crash":
            # Seen once while a controller started: exit 0, no output through the engine's
            # exec. Every command but the crash is idempotent, so asking again is safe.
            code, out = node.exec(argv)
    except APIError as exc:  # e.g. 409: the container stopped (a broker that halted)
        raise DiskLayerError(
            f"{node.hostname}: `{shlex.join(command)}` could not reach its disk layer: {exc}"
        ) from exc
    reply = last_json_object(out)
    if code != 0 or not reply.get("ok"):
        raise DiskLayerError(
            f"{node.hostname}: `{shlex.join(command)}` on its disk layer failed "
            f"(exit {code}): {reply.get('error') or out.strip()[-500:]}"
        )
    return reply


# -- the binary, built on demand ---------------------------------------------------------

SOURCE = Path(__file__).resolve().parent / "chaosfs"
_FALLBACK_GO = Path("/usr/local/go/bin/go")
_BUILD_TIMEOUT_S = 600


def go_tool() -> str:
    """The path of the Go toolchain's `go` (on PATH, else /usr/local/go/bin/go);
    DiskLayerError naming the fix when there is none."""
    path = shutil.which("go")
    if path is not None:
        return path
    if _FALLBACK_GO.is_file() and os.access(_FALLBACK_GO, os.X_OK):
        return str(_FALLBACK_GO)
    raise DiskLayerError(
        "go is not installed, and chaosfs (the disk-fault file system) is built from Go "
        "sources. Fix: install Go 1.23 or later (apt-get install golang-go, or the official "
        "tarball in /usr/local/go) and put its bin on PATH, then rerun."
    )


def _sources() -> list[Path]:
    """The files the binary is built from, in a stable order: the Go sources (tests
    excluded: they do not reach the binary), go.mod and go.sum."""
    go_files = sorted(p for p in SOURCE.glob("*.go") if not p.name.endswith("_test.go"))
    return [*go_files, SOURCE / "go.mod", SOURCE / "go.sum"]


def _digest() -> str:
    """A digest of the sources' names and contents: a change to any gives a new binary."""
    digest = hashlib.sha256()
    for path in _sources():
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _build(out: Path) -> None:
    """Build the static binary at `out`; DiskLayerError with go's output tail on failure."""
    env = {**os.environ, "CGO_ENABLED": "0"}
    # Use the toolchain at hand, never download another one.
    env.setdefault("GOTOOLCHAIN", "local")
    # -buildvcs=false: the binary needs no VCS stamp, and stamping fails where git is
    # missing or the checkout belongs to another user.
    result = subprocess.run(
        [go_tool(), "build", "-trimpath", "-buildvcs=false", "-o", str(out), "."],
        cwd=SOURCE, env=env, capture_output=True, text=True, check=False,
        timeout=_BUILD_TIMEOUT_S,
    )  # fmt: skip
    if result.returncode != 0 or not out.is_file():
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
        raise DiskLayerError(
            f"chaosfs does not build from {SOURCE}:\n{tail}\n"
            "Fix: use Go 1.23 or later, and let go reach the Go module proxy to download "
            "go-fuse (or fill the module cache with `go mod download` in that folder)."
        )


def chaosfs_binary(settings: Settings | None = None) -> Path:
    """The chaosfs binary built from SOURCE (static, CGO_ENABLED=0), cached under
    settings.cache_dir / "diskfs" keyed by a sha256 of the Go sources, go.mod and go.sum,
    so a second call is a lookup; DiskLayerError with go's output tail and the fix when the
    build fails."""
    entry = f"diskfs/chaosfs-{_digest()}"
    return (settings or Settings()).built_once(
        entry, "chaosfs", lambda folder: _build(folder / "chaosfs")
    )
