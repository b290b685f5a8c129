"""chaosfs against an oracle: random writes, truncates and fsyncs on real files through a
real mount, then a crash (plain or torn), and each file on "disk" as the oracle says."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.examples import examples
from tests.integration.diskfs.support import ChaosFS, torn_cut

pytestmark = pytest.mark.integration


# The property: random pwrite/append/ftruncate/fsync on 1-3 files, then a crash, against an
# oracle. Each write is issued in pieces that cross no page boundary: the kernel may split
# a write that starts inside a page at that page's end (see
# test_crash_torn_tears_the_last_write), and chaosfs would then tear a piece the oracle
# does not know of; a write within one page reaches chaosfs whole.
def page_pieces(offset: int, data: bytes) -> list[tuple[int, bytes]]:
    """`data` at `offset` cut at every 4096-byte page boundary it crosses."""
    pieces = []
    while data:
        length = min(len(data), 4096 - offset % 4096)
        pieces.append((offset, data[:length]))
        offset, data = offset + length, data[length:]
    return pieces


# Contents are patterns of any length (not mostly short, as random binaries are), often of
# 2 or 3 bytes or whole sectors (so a cut may fall on a sector boundary), and offsets often
# repeat a few places, so overwrites of synced bytes overlap one another.
def pattern(length: int, seed: int) -> bytes:
    """`length` bytes that differ from their neighbours and from other seeds' patterns."""
    return bytes((seed + 7 * n) % 251 for n in range(length))


LENGTHS = st.sampled_from([2, 3, 512, 1024, 2048]) | st.integers(1, 3000)
CONTENT = st.builds(pattern, LENGTHS, st.integers(0, 250))
FILE = st.none() | st.builds(pattern, st.integers(0, 8000), st.integers(0, 250))
OFFSETS = st.sampled_from([0, 100, 511, 1000, 4096]) | st.integers(0, 9000)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("pwrite"), st.integers(0, 2), OFFSETS, CONTENT),
        st.tuples(st.just("append"), st.integers(0, 2), CONTENT),
        st.tuples(st.just("truncate"), st.integers(0, 2), st.integers(0, 12000)),
        st.tuples(st.just("fsync"), st.integers(0, 2)),
    ),
    max_size=25,
)


@settings(
    max_examples=examples(0.3),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    initial=st.lists(FILE, min_size=1, max_size=3),
    ops=OPS,
    torn=st.sampled_from([True, True, False]),  # torn crashes, which check more, twice as often
)
# Torn cuts on a sector boundary (equal appends of two sectors: 1535; an append of 2 bytes
# at 511: lost whole), in a write from inside the synced part (1100), clamped by a later
# shrink to a sector boundary (1023), before a later extending truncate (300), and a file
# grown by a truncate alone (100).
@example(
    initial=[None, pattern(1000, 6), None],
    ops=[
        ("append", 0, pattern(1024, 1)), ("append", 0, pattern(1024, 2)),
        ("pwrite", 1, 900, pattern(300, 3)),
        ("append", 2, pattern(511, 4)), ("append", 2, pattern(2, 5)),
    ],
    torn=True,
)  # fmt: skip
@example(
    initial=[None, None, pattern(100, 3)],
    ops=[
        ("append", 0, pattern(3000, 1)), ("truncate", 0, 1024),
        ("append", 1, pattern(600, 2)), ("truncate", 1, 4096),
        ("fsync", 2), ("truncate", 2, 8192),
    ],
    torn=True,
)  # fmt: skip
def test_crash_matches_oracle(
    binary: Path, tmp_path_factory: pytest.TempPathFactory, initial, ops, torn: bool
) -> None:
    """Each file ends as the oracle says: its bytes at its last fsync (b"" if the test
    created it and never synced it), plus for a torn crash what was written past them up to
    the documented cut in the last write that ended past them."""
    base = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp(), prefix="oracle-"))
    mount = ChaosFS(binary, base)
    current: list[bytearray] = []
    synced: list[bytes] = []
    last: list[tuple[int, int] | None] = []  # the last write past the synced size, if any
    for i, content in enumerate(initial):
        if content is not None:  # on the disk before the mount: durable
            (mount.disk / f"f{i}").write_bytes(content)
        current.append(bytearray(content or b""))
        synced.append(bytes(content or b""))
        last.append(None)
    mount.start()
    try:
        fds = [
            os.open(mount.data / f"f{i}", os.O_RDWR | os.O_CREAT, 0o644)
            for i in range(len(initial))
        ]
        for op in ops:
            i = op[1] % len(fds)
            if op[0] in ("pwrite", "append"):
                start, whole = (op[2], op[3]) if op[0] == "pwrite" else (len(current[i]), op[2])
                for offset, data in page_pieces(start, whole):
                    os.pwrite(fds[i], data, offset)
                    current[i].extend(bytes(max(0, offset + len(data) - len(current[i]))))
                    current[i][offset : offset + len(data)] = data
                    if offset + len(data) > len(synced[i]):
                        last[i] = (offset, len(data))
            elif op[0] == "truncate":
                os.ftruncate(fds[i], op[2])
                del current[i][op[2] :]
                current[i].extend(bytes(op[2] - len(current[i])))
            else:
                os.fsync(fds[i])
                synced[i] = bytes(current[i])
                last[i] = None
        for i in range(len(fds)):
            assert (mount.disk / f"f{i}").read_bytes() == current[i], "not write-through"
        reply = mount.ok(*(["crash", "torn"] if torn else ["crash"]))
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
    finally:
        mount.stop()
    sizes = {f["path"]: f["size_after"] for f in reply["files"]}
    for i in range(len(initial)):
        want = synced[i]
        if torn:
            cut = torn_cut(len(want), len(current[i]), last[i])
            want += bytes(current[i][len(want) : cut])
        assert (mount.disk / f"f{i}").read_bytes() == want, f"f{i}"
        assert sizes.get(f"f{i}", len(want)) == len(want), f"f{i}: {reply}"
    shutil.rmtree(base)
