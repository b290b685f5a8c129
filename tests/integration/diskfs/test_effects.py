"""chaosfs through a real FUSE mount on this host: each fault's effect on real files.

These need root and /dev/fuse (as CI has), not Docker: chaosfs serves a backing dir of the
test's own at a mount point beside it, the test works on files through the mount with plain
system calls, and reads the backing dir directly to see what a crash left on "disk".
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from harness.waiting import poll_until
from tests.integration.diskfs.support import (
    DELAY_MS,
    WRITEBACK_TIMEOUT_S,
    ChaosFS,
    fails_with,
    opened,
    torn_cut,
)

pytestmark = pytest.mark.integration


def test_passthrough(fs: ChaosFS) -> None:
    payload = os.urandom(1 << 20)
    (fs.data / "topic-0").mkdir()
    with opened(fs.data / "topic-0" / "00000.log") as fd:
        for start in range(0, len(payload), 65536):
            os.write(fd, payload[start : start + 65536])
        os.pwrite(fd, b"patched", 100)
    expected = payload[:100] + b"patched" + payload[107:]
    assert (fs.disk / "topic-0" / "00000.log").read_bytes() == expected
    assert (fs.data / "topic-0" / "00000.log").read_bytes() == expected

    # An index as Kafka keeps one: preallocated, written through a shared mapping.
    with opened(fs.data / "topic-0" / "00000.index") as fd:
        os.ftruncate(fd, 10 * 4096)
        with mmap.mmap(fd, 10 * 4096) as mapped:
            mapped[0:16] = b"offset+position!"
            mapped[4096 * 9 : 4096 * 9 + 4] = b"last"
            mapped.flush()
    index = (fs.disk / "topic-0" / "00000.index").read_bytes()
    assert len(index) == 10 * 4096 and index[:16] == b"offset+position!"
    assert index[4096 * 9 : 4096 * 9 + 4] == b"last"

    os.rename(fs.data / "topic-0" / "00000.log", fs.data / "topic-0" / "00000.log.deleted")
    assert sorted(os.listdir(fs.data / "topic-0")) == ["00000.index", "00000.log.deleted"]
    assert sorted(os.listdir(fs.disk / "topic-0")) == ["00000.index", "00000.log.deleted"]
    assert fs.ok("status")["tracked_files"] == 1  # the log; the index was synced by msync
    os.unlink(fs.data / "topic-0" / "00000.log.deleted")
    assert os.listdir(fs.disk / "topic-0") == ["00000.index"]
    status = fs.ok("status")
    assert status["writes"] >= 16 and status["fsyncs"] >= 1
    assert status["tracked_files"] == 0 and status["unsynced_bytes"] == 0  # unlinked: forgotten


def test_crash_drops_unsynced_writes(fs: ChaosFS) -> None:
    (fs.disk / "untouched").write_bytes(b"written before the mount")
    with (
        opened(fs.data / "segment.log") as seg,
        opened(fs.data / "fresh.log") as fresh,
        opened(fs.data / "synced.log") as synced,
        opened(fs.data / "leader.index") as index,
    ):
        os.write(seg, b"A" * 6000)
        os.fsync(seg)
        os.write(seg, b"B" * 3000)  # appended, not synced
        os.pwrite(seg, b"C" * 100, 1000)  # overwritten in place, inside the synced part
        os.pwrite(seg, b"D" * 100, 1050)  # and again, overlapping the first
        os.write(fresh, b"N" * 500)  # created, never synced
        os.write(synced, b"S" * 700)
        os.fsync(synced)  # synced after its last write
        os.ftruncate(index, 8192)
        with mmap.mmap(index, 8192) as mapped:
            mapped[0:8] = b"entry-01"
            mapped.flush()  # msync: an fsync of the index
            mapped[8:16] = b"entry-02"  # dirty, written back by close(), never synced
        os.close(os.dup(index))  # a close flushes the dirty page to chaosfs
        assert (fs.disk / "leader.index").read_bytes()[8:16] == b"entry-02"
        assert (fs.disk / "segment.log").stat().st_size == 9000  # write-through

        reply = fs.ok("crash")
        assert (fs.disk / "segment.log").read_bytes() == b"A" * 6000
        assert (fs.disk / "fresh.log").read_bytes() == b""
        assert (fs.disk / "synced.log").read_bytes() == b"S" * 700
        assert (fs.disk / "untouched").read_bytes() == b"written before the mount"
        assert (fs.disk / "leader.index").read_bytes() == b"entry-01" + bytes(8192 - 8)
        files = {f["path"]: f for f in reply["files"]}
        assert set(files) == {"segment.log", "fresh.log", "leader.index"}
        assert files["segment.log"] == {
            "path": "segment.log", "synced_size": 6000, "size_before": 9000,
            "size_after": 6000, "restored_bytes": 200,
        }  # fmt: skip
        assert files["fresh.log"] == {
            "path": "fresh.log", "synced_size": 0, "size_before": 500, "size_after": 0,
            "restored_bytes": 0,
        }  # fmt: skip
        assert files["leader.index"]["size_after"] == 8192
        assert files["leader.index"]["restored_bytes"] > 0
        assert reply["torn"] is False and reply["dropped_bytes"] == 3000 + 500

        # Crashed: every request that reaches chaosfs fails, and changes nothing.
        fails_with(errno.EIO, os.write, seg, b"late")
        fails_with(errno.EIO, os.fsync, synced)
        fails_with(errno.EIO, os.open, fs.data / "synced.log", os.O_RDONLY)
        fails_with(errno.EIO, os.open, fs.data / "new.log", os.O_RDWR | os.O_CREAT)
        fails_with(errno.EIO, os.listdir, fs.data)
        fails_with(errno.EIO, os.mkdir, fs.data / "dir")
        assert (fs.disk / "segment.log").read_bytes() == b"A" * 6000
        assert not (fs.disk / "new.log").exists()
    status = fs.ok("status")
    assert status["mode"]["crashed"] is True and status["tracked_files"] == 0
    assert status["failed_ops"] >= 6


def test_crash_torn_tears_the_last_write(fs: ChaosFS) -> None:
    """A torn crash cuts each file in the middle of its last write past its synced size: the
    writes before it stay, the rest of it and whatever came after it are lost."""
    batches = [os.urandom(1000) for _ in range(4)]  # equal record batches, one per write
    second, crossing = os.urandom(1024), os.urandom(1000)
    with (
        opened(fs.data / "segment.log") as segment,
        opened(fs.data / "sectors.log") as sectors,
        opened(fs.data / "crossing.log") as crossed,
        opened(fs.data / "grown.log") as grown,
        opened(fs.data / "leader.index") as index,
    ):
        os.write(segment, b"s" * 1096)
        os.fsync(segment)
        for batch in batches:  # half the unsynced tail, 2000 bytes, ends on a batch boundary
            os.write(segment, batch)
        os.pwrite(segment, b"X" * 10, 0)  # over synced bytes: restored
        os.write(sectors, b"f" * 1024)
        os.write(sectors, second)  # its middle, 1536, is a sector boundary: 1535
        os.write(crossed, b"c" * 3500)
        os.write(crossed, crossing)  # [3500, 4500): over the page boundary at 4096
        os.write(grown, b"g" * 600)
        os.ftruncate(grown, 4096)  # after the last write: lost with its second half
        os.write(index, b"i" * 100)
        os.fsync(index)
        os.ftruncate(index, 8192)  # grown with no write since the fsync: lost whole
        reply = fs.ok("crash", "torn")
    files = {f["path"]: f for f in reply["files"]}
    assert reply["torn"] is True
    assert files["segment.log"] == {
        "path": "segment.log", "synced_size": 1096, "size_before": 5096, "size_after": 4596,
        "restored_bytes": 10,
    }  # fmt: skip
    # Inside the last batch, [4096, 5096); half the tail would have cut at 3096, between two.
    assert (fs.disk / "segment.log").read_bytes() == b"s" * 1096 + b"".join(batches)[:3500]
    assert (fs.disk / "sectors.log").read_bytes() == b"f" * 1024 + second[:511]
    # The kernel sends the crossing write whole (cut at 4000) or, as it has not cached the
    # page it starts in, as [3500, 4096) and [4096, 4500) (cut in the last piece, at 4298):
    # inside the write either way.
    cut = files["crossing.log"]["size_after"]
    assert cut in (torn_cut(0, 4500, (3500, 1000)), torn_cut(0, 4500, (4096, 404)))
    assert (fs.disk / "crossing.log").read_bytes() == b"c" * 3500 + crossing[: cut - 3500]
    assert (fs.disk / "grown.log").read_bytes() == b"g" * 300
    assert (fs.disk / "leader.index").read_bytes() == b"i" * 100
    assert {path: f["size_after"] for path, f in files.items()} == {
        "segment.log": 4596, "sectors.log": 1535, "crossing.log": cut, "grown.log": 300,
        "leader.index": 100,
    }  # fmt: skip
    assert reply["dropped_bytes"] == 500 + 513 + (4500 - cut) + 3796 + 8092


def test_rollback_reaches_a_renamed_file(fs: ChaosFS) -> None:
    (fs.data / "partition-0").mkdir()
    with opened(fs.data / "partition-0" / "7.log") as fd:
        os.write(fd, b"durable")
        os.fsync(fd)
        os.write(fd, b" and lost")
        os.pwrite(fd, b"D", 0)
    os.rename(fs.data / "partition-0" / "7.log", fs.data / "partition-0" / "7.log.deleted")
    # A checkpoint as Kafka writes one: a synced temporary file renamed over the old one.
    with opened(fs.data / "checkpoint") as old, opened(fs.data / "checkpoint.tmp") as new:
        os.write(old, b"old, unsynced")
        os.write(new, b"new")
        os.fsync(new)
    assert fs.ok("status")["tracked_files"] == 2
    os.rename(fs.data / "checkpoint.tmp", fs.data / "checkpoint")
    assert fs.ok("status")["tracked_files"] == 1  # the replaced file is gone for good
    reply = fs.ok("crash")
    assert (fs.disk / "partition-0" / "7.log.deleted").read_bytes() == b"durable"
    assert (fs.disk / "checkpoint").read_bytes() == b"new"
    assert [f["path"] for f in reply["files"]] == ["partition-0/7.log.deleted"]


def test_crash_during_concurrent_writes(fs: ChaosFS) -> None:
    """No write lands between the rollback and the crashed state: writers racing the crash
    either finish before it (and are rolled back) or fail."""
    synced = b"durable\n" * 64
    started = threading.Barrier(5)

    def writer(name: str, failures: list[int]) -> None:
        with opened(fs.data / name) as fd:
            os.write(fd, synced)
            os.fsync(fd)
            started.wait()
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"unsynced record\n")
                    os.pwrite(fd, b"X", 3)
            failures.append(1)

    failures: list[int] = []
    threads = [threading.Thread(target=writer, args=(f"w{i}", failures)) for i in range(4)]
    for thread in threads:
        thread.start()
    started.wait()
    poll_until(
        lambda: fs.ok("status")["tracked_files"] == 4, 30, "every writer to write unsynced",
        interval_s=0.01,
    )  # fmt: skip
    reply = fs.ok("crash")
    for thread in threads:
        thread.join(timeout=30)
    assert len(failures) == 4, "a writer did not see the crash"
    for i in range(4):
        assert (fs.disk / f"w{i}").read_bytes() == synced, f"w{i}"
    assert len(reply["files"]) == 4


def test_fsync_error(fs: ChaosFS) -> None:
    with opened(fs.data / "kept.log") as kept, opened(fs.data / "lost.log") as lost:
        os.write(kept, b"kept")
        os.write(lost, b"lost")
        fs.ok("set", "fsync-error", "on")
        fails_with(errno.EIO, os.fsync, kept)
        fails_with(errno.EIO, os.fsync, lost)
        assert fs.ok("status")["failed_ops"] == 2
        fs.ok("set", "fsync-error", "off")
        os.fsync(kept)
        fs.ok("crash")
    assert (fs.disk / "kept.log").read_bytes() == b"kept"
    assert (fs.disk / "lost.log").read_bytes() == b""  # its failed fsync made nothing durable


def test_disk_full(fs: ChaosFS) -> None:
    with opened(fs.data / "full.log") as fd:
        os.write(fd, b"x" * 4096)
        reply = fs.ok("set", "disk-full", "on")
        assert reply["mode"]["disk_full"] is True
        fails_with(errno.ENOSPC, os.write, fd, b"append")
        fails_with(errno.ENOSPC, os.ftruncate, fd, 8192)
        assert os.pwrite(fd, b"inside", 100) == 6  # allocated blocks can still be overwritten
        fails_with(errno.ENOSPC, os.open, fs.data / "new.log", os.O_RDWR | os.O_CREAT)
        fails_with(errno.ENOSPC, os.mkdir, fs.data / "dir")
        stats = os.statvfs(fs.data)
        assert stats.f_bfree == 0 and stats.f_bavail == 0
        reply = fs.ok("heal")
        assert reply["mode"] == {
            "fsync_error": False, "disk_full": False, "write_delay_ms": 0,
            "fsync_delay_ms": 0, "crashed": False, "writeback_s": 0,
        }  # fmt: skip
        os.write(fd, b"append")
        assert os.statvfs(fs.data).f_bavail > 0
    content = (fs.disk / "full.log").read_bytes()
    assert content == b"x" * 100 + b"inside" + b"x" * 3990 + b"append"
    assert not (fs.disk / "new.log").exists()


def test_sync_makes_earlier_writes_durable(fs: ChaosFS) -> None:
    with opened(fs.data / "a.log") as a, opened(fs.data / "b.log") as b:
        os.write(a, b"A" * 5000)
        os.write(b, b"B" * 100)
        os.fsync(b)
        os.pwrite(b, b"b" * 10, 0)  # over synced bytes: a pre-image the sync drops
        status = fs.ok("status")
        assert status["tracked_files"] == 2 and status["unsynced_bytes"] == 5000 + 10
        assert fs.ok("sync") == {"ok": True, "synced_files": 2, "synced_bytes": 5010}
        status = fs.ok("status")
        assert status["tracked_files"] == 0 and status["unsynced_bytes"] == 0
        os.write(a, b"late")  # after the sync: lost
        os.pwrite(b, b"X" * 10, 50)
        reply = fs.ok("crash")
    assert (fs.disk / "a.log").read_bytes() == b"A" * 5000
    assert (fs.disk / "b.log").read_bytes() == b"b" * 10 + b"B" * 90
    assert sorted(f["path"] for f in reply["files"]) == ["a.log", "b.log"]
    assert reply["writeback_s"] == 0
    code, reply = fs.ctl("sync")
    assert code == 1 and "crashed" in reply["error"]


def test_writeback_makes_old_writes_durable(fs: ChaosFS) -> None:
    """With a writeback age of 1 s, a file left alone that long survives a crash; one
    written just before it does not (the age counts from its first write, not from its
    creation, which came before the other file was written back)."""
    assert fs.ok("set", "writeback-s", "1")["mode"]["writeback_s"] == 1
    with opened(fs.data / "old.log") as old, opened(fs.data / "young.log") as young:
        start = time.monotonic()
        os.write(old, b"old enough")
        poll_until(
            lambda: fs.ok("status")["written_back"] >= 1, WRITEBACK_TIMEOUT_S,
            "old.log to be written back", interval_s=0.05,
        )  # fmt: skip
        assert time.monotonic() - start >= 1.0, "written back before it was 1 s old"
        os.write(young, b"too young")
        reply = fs.ok("crash")
    assert (fs.disk / "old.log").read_bytes() == b"old enough"
    assert (fs.disk / "young.log").read_bytes() == b""
    assert [f["path"] for f in reply["files"]] == ["young.log"]
    assert reply["writeback_s"] == 1 and fs.ok("status")["written_back"] == 1


def test_writeback_age_defaults_to_linux(binary: Path, tmp_path: Path) -> None:
    mount = ChaosFS(binary, tmp_path, writeback_s=None)
    mount.start()
    try:
        assert mount.ok("status")["mode"]["writeback_s"] == 30  # dirty_expire_centisecs
        code, reply = mount.ctl("set", "writeback-s", "3601")
        assert code == 1 and "0..3600" in reply["error"]
    finally:
        mount.stop()


def timed(call, *args) -> float:
    """Seconds `call(*args)` took."""
    start = time.monotonic()
    call(*args)
    return time.monotonic() - start


def test_slow_disk(fs: ChaosFS) -> None:
    with opened(fs.data / "slow.log") as fd:
        fs.ok("set", "write-delay", str(DELAY_MS))
        assert timed(os.write, fd, b"slow") >= DELAY_MS / 1000
        fs.ok("set", "write-delay", "0")
        assert timed(os.write, fd, b"fast") < DELAY_MS / 1000
        fs.ok("set", "fsync-delay", str(DELAY_MS))
        assert timed(os.fsync, fd) >= DELAY_MS / 1000
        fs.ok("set", "fsync-delay", "0")
        assert timed(os.fsync, fd) < DELAY_MS / 1000
    assert (fs.disk / "slow.log").read_bytes() == b"slowfast"


def test_ctl_errors(fs: ChaosFS, tmp_path: Path) -> None:
    code, reply = fs.ctl("explode")
    assert code == 1 and reply["ok"] is False
    assert "explode" in reply["error"] and "accepted:" in reply["error"]
    assert "crash torn" in reply["error"] and "set write-delay MS" in reply["error"]
    code, reply = fs.ctl("set", "write-delay", "fast")
    assert code == 1 and "0..60000" in reply["error"]
    missing = subprocess.run(
        [fs.binary, "ctl", "--control", tmp_path / "none.sock", "status"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert missing.returncode == 2 and "cannot reach" in missing.stderr
