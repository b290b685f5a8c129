"""chaosfs, the FUSE file system that injects disk faults under a broker's log directory
(lost unsynced writes on a crash, failing fsync, a full disk, a slow disk), built on demand
from its Go sources in chaosfs/ into a static binary.

The binary is cached under the cache directory, keyed by a digest of the sources, so a
second call is a lookup; it needs the Go toolchain only to build.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from harness.settings import Settings

__all__ = ["SOURCE", "DiskLayerError", "chaosfs_binary", "go_tool"]

SOURCE = Path(__file__).resolve().parent / "chaosfs"
_FALLBACK_GO = Path("/usr/local/go/bin/go")
_BUILD_TIMEOUT_S = 600


class DiskLayerError(RuntimeError):
    """chaosfs cannot be built here; the message names the problem and the fix."""


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
