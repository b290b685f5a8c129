"""Kafka log segments on disk, as far as a simulated power loss needs them.

A segment file (`<base offset>.log`) is a sequence of record batches (message format v2):
base offset int64, batch length int32, then the rest of the batch; the header holds the
last offset delta and the largest record timestamp. A partition directory is named
`<topic>-<partition>`; `recovery-point-offset-checkpoint` in the log dir records, per
partition, the offset below which the broker has flushed (fsynced) its log.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

# base offset, batch length, partition leader epoch, magic, crc, attributes, last offset
# delta, base timestamp, max timestamp: the fixed head of a v2 record batch (big-endian).
_HEAD = struct.Struct(">qiibIhiqq")
_LENGTH_PREFIX = 12  # base offset + batch length: not counted in the batch length


@dataclass(frozen=True)
class Batch:
    """One record batch of a segment: where it sits and what it covers."""

    position: int
    size: int
    base_offset: int
    last_offset: int
    max_timestamp_ms: int


def batches(data: bytes) -> Iterator[Batch]:
    """The complete batches of a segment file's bytes, in order; a torn tail is skipped."""
    position = 0
    while position + _HEAD.size <= len(data):
        base, length, _, magic, _, _, delta, _, max_ts = _HEAD.unpack_from(data, position)
        size = _LENGTH_PREFIX + length
        if magic != 2 or length <= 0 or position + size > len(data):
            return
        yield Batch(position, size, base, base + delta, max_ts)
        position += size


def read_checkpoint(text: str) -> dict[str, int]:
    """`<topic>-<partition>` -> offset from a Kafka offset checkpoint file (version 0).

    An empty file (seen on brokers killed soon after start) holds no offsets: Kafka recovers
    such a log from offset 0, and so does the model.
    """
    if not text.strip():
        return {}
    lines = text.split("\n")
    if len(lines) < 2 or lines[0].strip() != "0":
        raise ValueError(f"not an offset checkpoint file (version line {lines[0]!r})")
    offsets = {}
    for line in lines[2 : 2 + int(lines[1])]:
        topic, partition, offset = line.split()
        offsets[f"{topic}-{partition}"] = int(offset)
    return offsets


def surviving_length(data: bytes, recovery_point: int, lost_after_ms: int | None) -> int:
    """How many leading bytes of a segment survive the loss of its unflushed batches.

    A batch is flushed when its last offset is below `recovery_point`; an unflushed batch
    still survives when `lost_after_ms` is given and all its records are older than that
    (the kernel wrote the page back). The first batch that does not survive and everything
    after it are lost: recovery stops at the first damaged batch anyway.
    """
    kept = 0
    for batch in batches(data):
        flushed = batch.last_offset < recovery_point
        written_back = lost_after_ms is not None and batch.max_timestamp_ms < lost_after_ms
        if not (flushed or written_back):
            break
        kept = batch.position + batch.size
    return kept
