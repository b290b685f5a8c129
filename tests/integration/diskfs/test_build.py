"""chaosfs's build (harness/platform/disk_layer.py: cached, errors that name the fix) and its own
Go tests, go vet and gofmt, so CI runs them."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.platform import disk_layer
from harness.platform.disk_layer import DiskLayerError, chaosfs_binary
from harness.settings import Settings

pytestmark = pytest.mark.integration


def test_binary_is_cached(binary: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_build(*args, **kwargs):
        raise AssertionError("built again")

    monkeypatch.setattr(disk_layer.subprocess, "run", no_build)
    assert chaosfs_binary() == binary
    assert binary.parent.parent == Settings().cache_dir / "diskfs"


def test_build_failure_names_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = tmp_path / "chaosfs"
    shutil.copytree(disk_layer.SOURCE, broken)
    with open(broken / "main.go", "a") as main:
        main.write("\nthis is not Go\n")
    monkeypatch.setattr(disk_layer, "SOURCE", broken)
    with pytest.raises(DiskLayerError, match=r"(?s)does not build.*main\.go.*Fix:"):
        chaosfs_binary(Settings(cache_dir=tmp_path / "cache"))
    assert not list((tmp_path / "cache" / "diskfs").glob("chaosfs-*"))


def test_missing_go_names_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(disk_layer.shutil, "which", lambda name: None)
    monkeypatch.setattr(disk_layer, "_FALLBACK_GO", tmp_path / "no-go")
    with pytest.raises(DiskLayerError, match="install Go"):
        disk_layer.go_tool()


def test_go_tests_vet_and_format() -> None:
    """chaosfs's own Go tests (the rapid properties of the rollback, the tracker on real
    files, the control commands) pass, go vet finds nothing and gofmt changes nothing."""
    env = {**os.environ, "CGO_ENABLED": "0", "GOTOOLCHAIN": "local"}
    go = disk_layer.go_tool()
    for command in ([go, "test", "-count=1", "./..."], [go, "vet", "./..."]):
        done = subprocess.run(
            command, cwd=disk_layer.SOURCE, env=env, capture_output=True, text=True,
            timeout=600, check=False,
        )  # fmt: skip
        assert done.returncode == 0, f"{' '.join(command[1:])}:\n{done.stdout}{done.stderr}"
    gofmt = Path(go).with_name("gofmt")
    unformatted = subprocess.run(
        [gofmt, "-l", "."], cwd=disk_layer.SOURCE, capture_output=True, text=True, check=True
    ).stdout
    assert unformatted == "", f"gofmt would change: {unformatted}"
