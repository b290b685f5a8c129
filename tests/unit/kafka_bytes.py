"""Kafka v2 record batches built byte by byte from Kafka's documented layout (for tests)."""

from __future__ import annotations

import struct


def varint(value: int) -> bytes:
    """Kafka's zigzag varint."""
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    return bytes(out + bytes([raw]))


def record(
    offset_delta: int,
    value: bytes | None,
    key: bytes | None = b"k1",
    headers: tuple[tuple[bytes, bytes], ...] = (),
) -> bytes:
    """One record: attributes, timestamp delta, offset delta, key, value, headers."""
    body = b"\0" + varint(offset_delta * 3) + varint(offset_delta)
    body += varint(-1) if key is None else varint(len(key)) + key
    body += varint(-1) if value is None else varint(len(value)) + value
    body += varint(len(headers))
    for name, data in headers:
        body += varint(len(name)) + name + varint(len(data)) + data
    return varint(len(body)) + body


def value_of(msg_id: int) -> bytes:
    """A harness value as the README defines it."""
    return b"%015d:%012d:...." % (msg_id, msg_id // 8)


def full_batch(
    base: int,
    values: list[bytes | None],
    attributes: int = 0,
    headers: tuple[tuple[bytes, bytes], ...] = (),
    key: bytes | None = b"k1",
) -> bytes:
    """A v2 batch with a complete head (61 bytes) and one record per value."""
    records = b"".join(record(i, v, key, headers) for i, v in enumerate(values))
    head = struct.pack(">ibIhiqq", 0, 2, 0, attributes, len(values) - 1, 1_000, 1_000)
    head += struct.pack(">qhii", -1, -1, -1, len(values))
    rest = head + records
    return struct.pack(">qi", base, len(rest)) + rest
