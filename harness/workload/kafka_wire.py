"""Two group-coordinator requests in Kafka's wire format, written by hand because no client
sends them the way the neighbour load needs: OffsetFetch for every offset of many groups in
one request (KIP-709, version 8), and OffsetCommit of a group that has no members (generation
-1), each to a broker named by the caller rather than the one a client would find.

Only what the neighbour load reads back is decoded: the first error code of a response.
Formats: Kafka's protocol guide (flexible versions: compact strings and arrays, unsigned
varints, tagged fields); request header version 2, response header version 1.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

OFFSET_COMMIT = 8  # API keys
OFFSET_FETCH = 9
COMMIT_VERSION = 8  # the first flexible OffsetCommit; brokers from 2.4 to 4.x answer it
FETCH_VERSION = 8  # the first OffsetFetch that carries many groups (KIP-709, Kafka 3.0)
NO_TAGS = b"\x00"


def uvarint(value: int) -> bytes:
    """`value` (>= 0) as an unsigned varint: 7 bits a byte, low first, high bit = more."""
    if value < 0:
        raise ValueError(f"an unsigned varint cannot hold {value}")
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        if not value:
            out.append(low)
            return bytes(out)
        out.append(low | 0x80)


def compact_string(text: str | None) -> bytes:
    """A compact (nullable) string: length + 1 as a varint (0: null), then UTF-8."""
    if text is None:
        return uvarint(0)
    raw = text.encode()
    return uvarint(len(raw) + 1) + raw


def _request(api_key: int, version: int, correlation: int, client_id: str, body: bytes) -> bytes:
    """A size-prefixed request: header version 2 (the client id a plain nullable string)."""
    cid = client_id.encode()
    header = struct.pack(">hhih", api_key, version, correlation, len(cid)) + cid + NO_TAGS
    message = header + body
    return struct.pack(">i", len(message)) + message


def offset_fetch_all(groups: Sequence[str], correlation: int, client_id: str) -> bytes:
    """OffsetFetch v8 asking for every committed offset of each of `groups` (topics null)."""
    body = bytearray(uvarint(len(groups) + 1))
    for group in groups:
        body += compact_string(group) + uvarint(0) + NO_TAGS  # topics: null, i.e. all
    body += b"\x00" + NO_TAGS  # require_stable false: read the last committed state
    return _request(OFFSET_FETCH, FETCH_VERSION, correlation, client_id, bytes(body))


def offset_commit(
    group: str,
    topic: str,
    partitions: Sequence[int],
    offset: int,
    correlation: int,
    client_id: str,
) -> bytes:
    """OffsetCommit v8 of `offset` for these `partitions` of `topic`, by no member (generation
    -1, empty member id): a group with no members accepts it, as from an admin."""
    body = bytearray(compact_string(group))
    body += struct.pack(">i", -1) + compact_string("") + compact_string(None)
    body += uvarint(2) + compact_string(topic) + uvarint(len(partitions) + 1)
    for index in partitions:
        body += struct.pack(">iqi", index, offset, -1) + compact_string(None) + NO_TAGS
    body += NO_TAGS + NO_TAGS
    return _request(OFFSET_COMMIT, COMMIT_VERSION, correlation, client_id, bytes(body))


def read_uvarint(data: bytes, at: int) -> tuple[int, int]:
    """The unsigned varint at `at` and the position after it."""
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


def _after_first_name(response: bytes) -> int | None:
    """In a response (response header 1, then throttle_time_ms and a compact array whose
    entries begin with a compact string: topics, groups), the position after the first
    entry's name; None when the array is empty."""
    _, at = read_uvarint(response, 4)  # header tags
    at += 4  # throttle_time_ms
    entries, at = read_uvarint(response, at)
    if entries <= 1:
        return None
    length, at = read_uvarint(response, at)
    return at + length - 1


def commit_error(response: bytes) -> int:
    """The first partition's error code of an OffsetCommit v8 response (0: committed)."""
    at = _after_first_name(response)  # past the first topic's name
    if at is None:
        return 0
    count, at = read_uvarint(response, at)
    if count <= 1:
        return 0
    return int(struct.unpack_from(">h", response, at + 4)[0])


def fetch_error(response: bytes) -> int:
    """The first group's error code of an OffsetFetch v8 response: 0 when the group's offsets
    came back (not walked: a coordinator's answer holds them all), else the group's error,
    e.g. 16 when this broker is not the group's coordinator."""
    at = _after_first_name(response)  # past the first group's id
    if at is None:
        return 0
    topics, at = read_uvarint(response, at)
    if topics > 1:
        return 0
    return int(struct.unpack_from(">h", response, at)[0])
