"""The record value every kafka-chaos writer puts on the topic, and how every reader (the
read-back, the consumer group, the transactions' reads, a client's report) finds the message in
it.

Each value starts with `<msg_id>:<key_seq>:`, zero-padded to 15 and 12 digits (a fixed width
lets the journal parse ids column-wise); the id is unique in the run, the sequence counts sends
per key, so the read-back can spot losses, duplicates and reordering.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["VALUE_HEAD_BYTES", "Decoder", "decode_value", "encode_value"]

VALUE_HEAD_BYTES = 29  # b"%015d:%012d:"
# How a reader finds the message in a record value (decode_value, or a client's format):
# (msg_id, key_seq), Nones for a value that names no message.
Decoder = Callable[[bytes | None], tuple[int | None, int | None]]


def encode_value(msg_id: int, key_seq: int, size: int) -> bytes:
    """The record value: `<msg_id>:<key_seq>:` (15 and 12 digits) padded with '.' to `size`."""
    return b"%015d:%012d:%s" % (msg_id, key_seq, b"." * (size - VALUE_HEAD_BYTES))


def decode_value(value: bytes | None) -> tuple[int | None, int | None]:
    """(msg_id, key_seq) from a value written by `encode_value`; Nones if it is not ours."""
    if not value:
        return None, None
    parts = value.split(b":", 2)
    if len(parts) < 3:
        return None, None
    try:
        return int(parts[0]), int(parts[1])
    except ValueError:
        return None, None
