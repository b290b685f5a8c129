"""Segment parsing and the power-loss cut, on crafted record batches."""

from __future__ import annotations

import struct

import pytest

from harness.segments import batches, read_checkpoint, surviving_length


def batch(base_offset: int, records: int, max_ts_ms: int, payload: int = 20) -> bytes:
    """A v2 record batch head plus `payload` filler bytes (only the head is parsed)."""
    rest = struct.pack(">ibIhiqq", 0, 2, 0, 0, records - 1, max_ts_ms - 5, max_ts_ms)
    rest += b"\0" * payload
    return struct.pack(">qi", base_offset, len(rest)) + rest


SEGMENT = batch(0, 10, 1_000) + batch(10, 5, 2_000) + batch(15, 5, 3_000)


def test_batches_are_read_in_order_with_their_offsets_and_times():
    found = list(batches(SEGMENT))
    assert [(b.base_offset, b.last_offset, b.max_timestamp_ms) for b in found] == [
        (0, 9, 1_000),
        (10, 14, 2_000),
        (15, 19, 3_000),
    ]
    assert found[1].position == found[0].size and sum(b.size for b in found) == len(SEGMENT)


def test_a_torn_last_batch_is_not_a_batch():
    assert len(list(batches(SEGMENT[:-3]))) == 2
    assert list(batches(b"")) == []


@pytest.mark.parametrize(
    ("recovery_point", "lost_after_ms", "batches_kept"),
    [
        (0, None, 0),  # nothing flushed, no write-back: all lost
        (10, None, 1),  # the first batch (offsets 0-9) was flushed
        (12, None, 1),  # a batch survives only if wholly below the recovery point
        (100, None, 3),  # everything flushed
        (0, 2_500, 2),  # the kernel wrote back the batches older than 2.5 s
        (15, 1_500, 2),  # either reason keeps a batch
        (0, 0, 0),
    ],
)
def test_surviving_length_cuts_at_the_first_lost_batch(recovery_point, lost_after_ms, batches_kept):
    sizes = [b.size for b in batches(SEGMENT)]
    assert surviving_length(SEGMENT, recovery_point, lost_after_ms) == sum(sizes[:batches_kept])


def test_a_lost_batch_takes_everything_after_it():
    # The middle batch is new, the last one old: recovery stops at the first damaged batch.
    segment = batch(0, 10, 1_000) + batch(10, 5, 9_000) + batch(15, 5, 1_500)
    assert surviving_length(segment, 0, 5_000) == len(batch(0, 10, 1_000))


def test_checkpoint_files_parse_and_empty_ones_hold_nothing():
    text = "0\n2\nevents 0 120\n__consumer_offsets 7 3\n"
    assert read_checkpoint(text) == {"events-0": 120, "__consumer_offsets-7": 3}
    assert read_checkpoint("") == {}
    with pytest.raises(ValueError, match="not an offset checkpoint"):
        read_checkpoint("7\n0\n")
