"""Segment parsing and the power-loss cut, on crafted record batches."""

from __future__ import annotations

import struct

import pytest

from harness.rundir.segments import batches, read_checkpoint, read_records, surviving_length
from tests.unit.kafka_bytes import full_batch, value_of


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


# --- records of v2 batches ----------------------------------------------------------------


def located(found) -> list[tuple[int, int, int | None]]:
    return [(r.partition, r.offset, r.msg_id) for r in found.records]


def test_records_of_uncompressed_batches_carry_partition_offset_and_msg_id():
    segment = full_batch(0, [value_of(7), value_of(8)]) + full_batch(2, [value_of(300_000)])
    found = read_records(segment, partition=2)
    assert located(found) == [(2, 0, 7), (2, 1, 8), (2, 2, 300_000)]
    assert found.complete and found.records_read == 3


def test_values_not_written_by_the_harness_have_no_msg_id():
    segment = full_batch(5, [b"hello", None, b"12:3:", b"00000000000000x:1:"])
    assert located(read_records(segment, 0)) == [
        (0, 5, None),
        (0, 6, None),
        (0, 7, None),
        (0, 8, None),
    ]


def test_wanted_keeps_only_those_msg_ids_but_counts_every_record():
    segment = full_batch(0, [value_of(i) for i in range(10)])
    found = read_records(segment, 1, wanted={3, 42})
    assert located(found) == [(1, 3, 3)] and found.records_read == 10


def test_long_varints_and_many_records_in_one_batch():
    segment = full_batch(1_000_000, [value_of(i) for i in range(200)])  # deltas past 63
    assert [r.offset for r in read_records(segment, 0).records][-1] == 1_000_199


def test_record_headers_and_null_keys_are_skipped():
    with_headers = full_batch(3, [value_of(1)], headers=((b"trace", b"abc"), (b"x", b"")))
    assert located(read_records(with_headers, 0)) == [(0, 3, 1)]
    null_key = full_batch(4, [value_of(2)], key=None)
    assert located(read_records(null_key, 0)) == [(0, 4, 2)]


def test_compressed_and_control_batches_are_counted_never_guessed():
    segment = full_batch(0, [value_of(1)], attributes=1)  # gzip
    segment += full_batch(1, [value_of(2)], attributes=0x20)  # a transaction marker
    segment += full_batch(2, [value_of(3)])
    found = read_records(segment, 0)
    assert located(found) == [(0, 2, 3)]
    assert (found.compressed_batches, found.control_batches) == (1, 1)
    assert not found.complete  # a compressed batch may hold anything


def test_a_batch_whose_records_do_not_fill_it_is_unparseable():
    good = full_batch(0, [value_of(1)])
    damaged = bytearray(full_batch(1, [value_of(2), value_of(3)]))
    damaged[61] = 0x7E  # the first record's length now runs past the batch
    found = read_records(bytes(damaged) + good, 0)
    assert found.unparseable_batches == 1 and not found.complete
    assert located(found) == [(0, 0, 1)]  # the later batch is still read


def test_a_record_count_larger_than_the_records_is_unparseable():
    batch_bytes = bytearray(full_batch(0, [value_of(1)]))
    batch_bytes[57:61] = struct.pack(">i", 2)
    assert read_records(bytes(batch_bytes), 0).unparseable_batches == 1


def test_bytes_after_the_last_complete_batch_are_reported_unread():
    segment = full_batch(0, [value_of(1)])
    found = read_records(segment + segment[:30], 0)
    assert located(found) == [(0, 0, 1)] and found.unread_bytes == 30 and not found.complete
    assert read_records(b"", 0).complete
