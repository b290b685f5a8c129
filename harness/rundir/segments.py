"""Kafka log segments on disk: batches for a simulated power loss, records for attribution.

A segment file (`<base offset>.log`) is a sequence of record batches (message format v2):
base offset int64, batch length int32, then the rest of the batch; the header holds the
attributes (compression, control flag), the last offset delta and the largest record
timestamp, and after a fixed 61-byte head come the records. A partition directory is named
`<topic>-<partition>`; `recovery-point-offset-checkpoint` in the log dir records, per
partition, the offset below which the broker has flushed (fsynced) its log.
"""

from __future__ import annotations

import struct
from collections.abc import Container, Iterator
from dataclasses import dataclass, field

# base offset, batch length, partition leader epoch, magic, crc, attributes, last offset
# delta, base timestamp, max timestamp: the fixed head of a v2 record batch (big-endian).
_HEAD = struct.Struct(">qiibIhiqq")
_LENGTH_PREFIX = 12  # base offset + batch length: not counted in the batch length
# ... then producer id int64, producer epoch int16, base sequence int32, record count int32.
_TAIL = struct.Struct(">qhii")
_RECORDS_AT = _HEAD.size + _TAIL.size  # 61: where the first record of a batch starts
_COMPRESSION_MASK = 0x07
_CONTROL_FLAG = 0x20
MSG_ID_DIGITS = 15  # a harness value starts with the zero-padded msg_id, then ':'


@dataclass(frozen=True)
class Batch:
    """One record batch of a segment: where it sits and what it covers."""

    position: int
    size: int
    base_offset: int
    last_offset: int
    max_timestamp_ms: int
    attributes: int = 0

    @property
    def compressed(self) -> bool:
        """True when the records are compressed (this parser reads only uncompressed ones)."""
        return bool(self.attributes & _COMPRESSION_MASK)

    @property
    def control(self) -> bool:
        """True for a control batch (transaction markers): it holds no producer records."""
        return bool(self.attributes & _CONTROL_FLAG)


def batches(data: bytes) -> Iterator[Batch]:
    """The complete batches of a segment file's bytes, in order; a torn tail is skipped."""
    position = 0
    while position + _HEAD.size <= len(data):
        base, length, _, magic, _, attrs, delta, _, max_ts = _HEAD.unpack_from(data, position)
        size = _LENGTH_PREFIX + length
        if magic != 2 or length <= 0 or position + size > len(data):
            return
        yield Batch(position, size, base, base + delta, max_ts, attrs)
        position += size


@dataclass(frozen=True)
class LogRecord:
    """One record of a partition log; msg_id None when its value is not a harness value."""

    partition: int
    offset: int
    msg_id: int | None


@dataclass
class SegmentRecords:
    """What one segment file holds, and how much of it could not be read."""

    records: list[LogRecord] = field(default_factory=list)
    records_read: int = 0  # every parsed record, kept in `records` or not
    compressed_batches: int = 0
    unparseable_batches: int = 0  # records that do not fit their batch: not guessed
    control_batches: int = 0
    unread_bytes: int = 0  # after the last complete batch: a torn tail or a damaged head

    @property
    def complete(self) -> bool:
        """True when every producer record of the file was read."""
        return not (self.compressed_batches or self.unparseable_batches or self.unread_bytes)


def read_records(
    data: bytes, partition: int, wanted: Container[int] | None = None
) -> SegmentRecords:
    """The records of a segment file's uncompressed v2 batches (those whose msg_id is in
    `wanted`, when given); compressed, control and unparseable batches are only counted."""
    found = SegmentRecords()
    end = 0
    for batch in batches(data):
        end = batch.position + batch.size
        if batch.control:
            found.control_batches += 1
        elif batch.compressed:
            found.compressed_batches += 1
        else:
            try:
                records = _batch_records(data, batch, partition)
            except ValueError:
                found.unparseable_batches += 1
                continue
            found.records_read += len(records)
            found.records += [r for r in records if wanted is None or r.msg_id in wanted]
    found.unread_bytes = len(data) - end
    return found


def _batch_records(data: bytes, batch: Batch, partition: int) -> list[LogRecord]:
    """Every record of an uncompressed batch; ValueError unless they exactly fill it."""
    end = batch.position + batch.size
    if batch.size < _RECORDS_AT:
        raise ValueError("batch shorter than its head")
    count = _TAIL.unpack_from(data, batch.position + _HEAD.size)[3]
    position = batch.position + _RECORDS_AT
    records = []
    for _ in range(count):
        length, position = _varint(data, position, end)
        record_end = position + length
        if length <= 0 or record_end > end:
            raise ValueError("record length outside its batch")
        offset_delta, value = _record_fields(data, position + 1, record_end)
        if not 0 <= offset_delta <= batch.last_offset - batch.base_offset:
            raise ValueError("record offset outside its batch")
        records.append(LogRecord(partition, batch.base_offset + offset_delta, _msg_id(value)))
        position = record_end
    if position != end:
        raise ValueError("records do not fill their batch")
    return records


def _record_fields(data: bytes, position: int, end: int) -> tuple[int, bytes | None]:
    """(offset delta, value) of a record whose attributes byte precedes `position`."""
    _, position = _varint(data, position, end)  # timestamp delta
    offset_delta, position = _varint(data, position, end)
    key_length, position = _varint(data, position, end)
    position += max(key_length, 0)
    value_length, position = _varint(data, position, end)
    if value_length < 0:
        return offset_delta, None
    if position + value_length > end:
        raise ValueError("value beyond its record")
    return offset_delta, data[position : position + value_length]


def _varint(data: bytes, position: int, end: int) -> tuple[int, int]:
    """A zigzag varint (Kafka's varint and varlong) at `position`; (value, next position)."""
    raw, shift = 0, 0
    while True:
        if position >= end or shift > 63:
            raise ValueError("varint beyond its record")
        byte = data[position]
        position += 1
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (raw >> 1) ^ -(raw & 1), position
        shift += 7


def _msg_id(value: bytes | None) -> int | None:
    """The msg_id a harness value starts with (15 digits, then ':'), else None."""
    if value is None or len(value) <= MSG_ID_DIGITS or value[MSG_ID_DIGITS] != ord(":"):
        return None
    head = value[:MSG_ID_DIGITS]
    return int(head) if head.isdigit() else None


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
