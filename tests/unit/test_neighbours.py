"""The neighbour load's pure parts: the groups' placement on `__consumer_offsets` (Java's
String.hashCode) and the hand-written OffsetFetch and OffsetCommit requests, read back by a
decoder written here from Kafka's protocol guide; answers decoded the same way. No Docker."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st

from harness.chaos.coordinators import java_string_hash
from harness.chaos.coordinators import partition_for as offsets_partition
from harness.workload import kafka_wire
from harness.workload.neighbours import Broker, NeighbourLoad, neighbour_ids

names = st.text(min_size=0, max_size=40)


def java_hash_oracle(text: str) -> int:
    """s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, wrapped to a signed int."""
    units = [
        int.from_bytes(text.encode("utf-16-be")[i : i + 2], "big")
        for i in range(0, len(text.encode("utf-16-be")), 2)
    ]
    total = sum(unit * 31 ** (len(units) - 1 - i) for i, unit in enumerate(units)) % 2**32
    return total - 2**32 if total >= 2**31 else total


class Reader:
    """A cursor over bytes, reading the protocol guide's primitive types."""

    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return int(value)

    def uvarint(self) -> int:
        value, shift = 0, 0
        while True:
            byte = self.data[self.at]
            self.at += 1
            value += (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7

    def compact_string(self) -> str | None:
        length = self.uvarint()
        if length == 0:
            return None
        text = self.data[self.at : self.at + length - 1].decode()
        self.at += length - 1
        return text

    def header(self) -> tuple[int, int, int, str]:
        """Size prefix checked, then request header v2: key, version, correlation, client."""
        assert self.take(">i") == len(self.data) - 4
        key, version, correlation = self.take(">h"), self.take(">h"), self.take(">i")
        size = self.take(">h")
        client = self.data[self.at : self.at + size].decode()
        self.at += size
        assert self.uvarint() == 0  # no tagged fields
        return key, version, correlation, client


def test_java_hash_of_known_strings() -> None:
    assert java_string_hash("abc") == 96354
    assert java_string_hash("") == 0
    assert offsets_partition("abc", 50) == 4
    # a negative hash: Math.abs places it, not the producer's & 0x7fffffff
    assert java_string_hash("kchaos-neighbour-31112") < 0


@given(names)
def test_java_hash_matches_its_definition(text: str) -> None:
    assert java_string_hash(text) == java_hash_oracle(text)


@given(names, st.integers(1, 60), st.integers(1, 5))
def test_neighbours_share_the_group_partition(group: str, partitions: int, count: int) -> None:
    ids = neighbour_ids(group, partitions, count)
    assert len(ids) == len(set(ids)) == count

    def placed(name: str) -> int:  # Kafka's Utils.abs: MIN_VALUE to 0, else Math.abs
        code = java_hash_oracle(name)
        return (0 if code == -(2**31) else abs(code)) % partitions

    assert all(placed(name) == placed(group) for name in ids)


@given(st.integers(0, 2**63))
def test_uvarint_reads_back(value: int) -> None:
    encoded = kafka_wire.uvarint(value)
    assert Reader(encoded).uvarint() == value
    assert all(byte & 0x80 for byte in encoded[:-1]) and encoded[-1] < 0x80


@given(st.lists(names, min_size=1, max_size=6), st.integers(0, 2**31 - 1))
def test_offset_fetch_all_reads_back(groups: list[str], correlation: int) -> None:
    reader = Reader(kafka_wire.offset_fetch_all(groups, correlation, "kchaos"))
    assert reader.header() == (9, 8, correlation, "kchaos")
    assert reader.uvarint() == len(groups) + 1
    for group in groups:
        assert reader.compact_string() == group
        assert reader.uvarint() == 0  # topics null: all of them
        assert reader.uvarint() == 0
    assert reader.take(">b") == 0  # require_stable
    assert reader.uvarint() == 0
    assert reader.at == len(reader.data)


@given(
    names,
    names,
    st.lists(st.integers(0, 2**31 - 1), max_size=50),
    st.integers(0, 2**62),
    st.integers(0, 2**31 - 1),
)
def test_offset_commit_reads_back(
    group: str, topic: str, partitions: list[int], offset: int, correlation: int
) -> None:
    reader = Reader(kafka_wire.offset_commit(group, topic, partitions, offset, correlation, "k"))
    assert reader.header() == (8, 8, correlation, "k")
    assert reader.compact_string() == group
    assert reader.take(">i") == -1  # generation: no member
    assert reader.compact_string() == ""
    assert reader.compact_string() is None  # group instance id
    assert reader.uvarint() == 2
    assert reader.compact_string() == topic
    assert reader.uvarint() == len(partitions) + 1
    for index in partitions:
        assert (reader.take(">i"), reader.take(">q"), reader.take(">i")) == (index, offset, -1)
        assert reader.compact_string() is None
        assert reader.uvarint() == 0
    assert reader.uvarint() == 0 and reader.uvarint() == 0
    assert reader.at == len(reader.data)


def commit_answer(correlation: int, errors: list[int]) -> bytes:
    """An OffsetCommit v8 response (no size prefix): one topic, these partition errors."""
    body = struct.pack(">i", correlation) + b"\x00" + struct.pack(">i", 0) + b"\x02\x02t"
    body += kafka_wire.uvarint(len(errors) + 1)
    for index, error in enumerate(errors):
        body += struct.pack(">ih", index, error) + b"\x00"
    return body + b"\x00\x00"


def fetch_answer(correlation: int, group: str, error: int, with_offsets: bool) -> bytes:
    """An OffsetFetch v8 response for one group: its offsets of one partition, or none."""
    body = struct.pack(">i", correlation) + b"\x00" + struct.pack(">i", 0) + b"\x02"
    body += kafka_wire.compact_string(group)
    if with_offsets:
        body += b"\x02" + kafka_wire.compact_string("t") + b"\x02"
        body += struct.pack(">iqi", 0, 5, -1) + b"\x01" + struct.pack(">h", 0) + b"\x00\x00"
    else:
        body += b"\x01"
    return body + struct.pack(">h", error) + b"\x00" + b"\x00"


@given(st.integers(0, 2**31 - 1), st.lists(st.sampled_from([0, 15, 16, 25]), max_size=4))
def test_commit_error_is_the_first_partition_s(correlation: int, errors: list[int]) -> None:
    answer = commit_answer(correlation, errors)
    assert struct.unpack_from(">i", answer)[0] == correlation
    assert kafka_wire.commit_error(answer) == (errors[0] if errors else 0)


@given(names, st.sampled_from([0, 15, 16]))
def test_fetch_error_of_a_refusal_and_of_an_answer(group: str, error: int) -> None:
    assert kafka_wire.fetch_error(fetch_answer(1, group, error, with_offsets=False)) == error
    assert kafka_wire.fetch_error(fetch_answer(1, group, 0, with_offsets=True)) == 0


def test_load_round_trips_through_its_argument() -> None:
    load = NeighbourLoad((Broker(1, "h", 9092),), ("a", "b"), 10, 2, 0.5, "/tmp/x.jsonl")
    assert NeighbourLoad.from_json(load.to_json()) == load
