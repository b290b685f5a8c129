"""The chaosfs binary and a fresh mount of it, for the tests of this folder (root and
/dev/fuse, as CI has; no Docker)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.platform.disk_layer import chaosfs_binary
from tests.integration.diskfs.support import ChaosFS


@pytest.fixture(scope="session")
def binary() -> Path:
    """The chaosfs binary (built once); fails, never skips, where FUSE is missing."""
    if not Path("/dev/fuse").exists():
        pytest.fail(
            "/dev/fuse is missing: these tests mount chaosfs, a FUSE file system. "
            "Fix: modprobe fuse (or run the container with --device /dev/fuse), as root."
        )
    return chaosfs_binary()


@pytest.fixture
def fs(binary: Path, tmp_path: Path) -> Iterator[ChaosFS]:
    """A fresh chaosfs mount, stopped (and checked unmounted) after the test."""
    mount = ChaosFS(binary, tmp_path)
    mount.start()
    try:
        yield mount
    finally:
        mount.stop()
