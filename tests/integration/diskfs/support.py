"""chaosfs served on this host for the tests of this folder: a backing dir of the test's own
(what a crash leaves on "disk") at a mount point beside it, its control commands, and the
helpers and documented torn cut the tests share."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

SERVE_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 15.0
DELAY_MS = 200
WRITEBACK_TIMEOUT_S = 10.0


def mounted(path: Path) -> bool:
    """Whether `path` is a mount point now (from /proc/self/mounts)."""
    with open("/proc/self/mounts") as mounts:
        return any(line.split()[1] == str(path) for line in mounts)


class ChaosFS:
    """A running `chaosfs serve` of base/disk (backing) at base/data (mount).

    Nothing is written back unless a test asks (writeback_s 0), so what a crash keeps
    depends on the test's fsyncs alone, never on how long it took; None: serve's default."""

    def __init__(self, binary: Path, base: Path, writeback_s: int | None = 0):
        self.binary = binary
        self.writeback_s = writeback_s
        self.disk = base / "disk"
        self.data = base / "data"
        self.socket = base / "ctl.sock"
        self.log = base / "chaosfs.log"
        self.disk.mkdir(exist_ok=True)
        self.data.mkdir(exist_ok=True)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start serving; returns once chaosfs said it serves the mount."""
        writeback = [] if self.writeback_s is None else ["--writeback-s", str(self.writeback_s)]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [self.binary, "serve", "--backing", self.disk, "--mount", self.data,
                 "--control", self.socket, *writeback],
                stdout=subprocess.PIPE, stderr=log,
            )  # fmt: skip
        line = self._first_line(SERVE_TIMEOUT_S)
        if line != f"chaosfs: serving {self.data}\n".encode():
            self.proc.kill()
            self.proc.wait()
            pytest.fail(
                f"chaosfs did not report serving within {SERVE_TIMEOUT_S} s "
                f"(exit {self.proc.returncode}); stdout {line!r}; "
                f"stderr: {self.log.read_text(errors='replace')}"
            )

    def _first_line(self, timeout_s: float) -> bytes:
        """The first stdout line, or what came before EOF or the timeout."""
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        got = b""
        while b"\n" not in got:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                break
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            got += chunk
        return got

    def stop(self) -> None:
        """SIGTERM; it must exit 0 and leave nothing mounted (else it is unmounted lazily)."""
        if self.proc is None:
            return
        problems = []
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                problems.append(f"did not exit within {STOP_TIMEOUT_S} s of SIGTERM")
        if self.proc.returncode != 0:
            problems.append(f"exited {self.proc.returncode}")
        if mounted(self.data):
            subprocess.run(["umount", "-l", str(self.data)], check=False)
            problems.append("left its mount behind")
        self.proc = None
        if problems:
            pytest.fail(f"chaosfs {'; '.join(problems)}: {self.log.read_text(errors='replace')}")

    def ctl(self, *command: str) -> tuple[int, dict]:
        """`chaosfs ctl COMMAND`: its exit code and its JSON reply."""
        done = subprocess.run(
            [self.binary, "ctl", "--control", self.socket, *command],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        return done.returncode, json.loads(done.stdout) if done.stdout.strip() else {}

    def ok(self, *command: str) -> dict:
        """The reply of a command that must succeed."""
        code, reply = self.ctl(*command)
        assert code == 0 and reply["ok"] is True, (command, code, reply)
        return reply


@contextlib.contextmanager
def opened(path: Path, flags: int = os.O_RDWR | os.O_CREAT) -> Iterator[int]:
    """A descriptor of `path`, closed afterwards even if close fails (EIO after a crash)."""
    fd = os.open(path, flags, 0o644)
    try:
        yield fd
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)


def fails_with(code: int, call, *args) -> None:
    """`call(*args)` raises OSError with errno `code`."""
    with pytest.raises(OSError) as raised:
        call(*args)
    assert raised.value.errno == code, f"{call.__name__}: {raised.value!r}"


def torn_cut(synced: int, size: int, last: tuple[int, int] | None) -> int:
    """The documented size a torn crash leaves a file of `size` bytes synced at `synced`,
    whose last write since that ended past `synced` was (offset, length), None if none: the
    middle of that write's part past `synced`, clamped to [synced, size], one byte less when
    past that part's start and on a 512-byte sector boundary; `synced` without such a write."""
    if last is None:
        return synced
    offset, length = last
    start = max(offset, synced)
    cut = max(synced, min(start + (offset + length - start) // 2, size))
    return cut - 1 if cut > start and cut % 512 == 0 else cut
