"""NFQUEUE's netlink messages against an oracle built here from the kernel's header layout,
and the shaper program's plan and figures (no kernel, no Docker)."""

from __future__ import annotations

import contextlib
import errno
import json
import struct
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.chaos.faults.slots import MARK_BITS
from harness.chaos.shaper import nfqueue
from harness.chaos.shaper.main import DUPLICATE_MARK, Figures, Plan

NATIVE = "<" if sys.byteorder == "little" else ">"


def nla(kind: int, data: bytes) -> bytes:
    """A netlink attribute as include/uapi/linux/netlink.h lays it out (4-byte aligned)."""
    raw = struct.pack(f"{NATIVE}HH", 4 + len(data), kind) + data
    return raw + bytes(-len(raw) % 4)


def netlink(kind: int, body: bytes, seq: int = 0) -> bytes:
    raw = struct.pack(f"{NATIVE}IHHII", 16 + len(body), kind, 0, seq, 0) + body
    return raw + bytes(-len(raw) % 4)


def kernel_packet(queue: int, packet_id: int, payload: bytes, mark: int | None = None) -> bytes:
    """An NFQNL_MSG_PACKET as the kernel sends it: header attr, maybe a mark, the payload."""
    attrs = nla(1, struct.pack(">IHB", packet_id, 0x0800, 3))
    if mark is not None:
        attrs += nla(3, struct.pack(">I", mark))
    if payload:
        attrs += nla(10, payload)
    return netlink((3 << 8) | 0, bytes([2, 0]) + queue.to_bytes(2, "big") + attrs)


packets = st.lists(
    st.tuples(
        st.integers(0, 2**32 - 1), st.binary(max_size=80), st.none() | st.integers(0, 2**32 - 1)
    ),
    max_size=20,
)


@given(st.integers(0, 65535), packets)
def test_the_packets_of_a_datagram_come_out_in_order_with_their_payloads_and_marks(queue, sent):
    datagram = b"".join(kernel_packet(queue, pid, payload, mark) for pid, payload, mark in sent)
    parsed = list(nfqueue.parse(datagram))
    assert [(p.packet_id, p.payload, p.mark) for p in parsed] == [
        (pid, payload, mark or 0) for pid, payload, mark in sent
    ]


def test_an_ack_is_passed_over_and_a_refusal_raises_with_its_errno():
    ack = netlink(2, struct.pack(f"{NATIVE}i", 0) + bytes(16))
    refused = netlink(2, struct.pack(f"{NATIVE}i", -errno.EPERM) + bytes(16))
    packet = kernel_packet(1, 42, b"")
    assert [p.packet_id for p in nfqueue.parse(ack + packet)] == [42]
    with pytest.raises(nfqueue.NetlinkError) as refusal:
        list(nfqueue.parse(refused))
    assert refusal.value.errno == errno.EPERM and "EPERM" in str(refusal.value)


@given(st.binary(max_size=300))
def test_any_bytes_parse_without_crashing(datagram):
    with contextlib.suppress(nfqueue.NetlinkError):
        list(nfqueue.parse(datagram))


@given(
    st.integers(0, 65535),
    st.integers(0, 2**32 - 1),
    st.sampled_from([nfqueue.NF_ACCEPT, nfqueue.NF_DROP, nfqueue.NF_REPEAT]),
    st.none() | st.integers(0, 2**32 - 1),
)
def test_a_verdict_names_its_queue_packet_verdict_and_mark(queue, packet_id, verdict, mark):
    raw = nfqueue.verdict_message(queue, packet_id, verdict, mark)
    length, kind, flags, _, _ = struct.unpack_from(f"{NATIVE}IHHII", raw)
    assert (length, kind, flags) == (len(raw), (3 << 8) | 1, 1)
    assert raw[16:20] == bytes([0, 0]) + queue.to_bytes(2, "big")
    marked = b"" if mark is None else nla(3, struct.pack(">I", mark))
    assert raw[20:] == nla(2, struct.pack(">II", verdict, packet_id)) + marked


@pytest.mark.parametrize("copy_payload,mode", [(False, 1), (True, 2)])
def test_binding_asks_for_the_queue_its_copy_mode_and_fail_open(copy_payload, mode):
    bind, params, maxlen, flags = nfqueue.bind_messages(9, copy_payload, 1000)
    for raw in (bind, params, maxlen, flags):
        assert struct.unpack_from(f"{NATIVE}H", raw, 4)[0] == (3 << 8) | 2
        assert struct.unpack_from(f"{NATIVE}H", raw, 6)[0] == 1 | 4  # request, ack
        assert raw[18:20] == (9).to_bytes(2, "big")
    assert nfqueue.attributes(bind[20:]) == {1: bytes([1, 0, 0, 0])}
    assert nfqueue.attributes(params[20:]) == {2: struct.pack(">IB", 0xFFFF, mode)}
    assert nfqueue.attributes(maxlen[20:]) == {3: struct.pack(">I", 1000)}
    assert nfqueue.attributes(flags[20:]) == {4: b"\0\0\0\1", 5: b"\0\0\0\1"}


@given(
    st.lists(st.lists(st.sampled_from(["-o", "eth0", "-d", "10.0.0.2"]), max_size=4), min_size=1),
    st.lists(st.lists(st.sampled_from(["-o", "eth0", "-d", "10.0.0.3"]), max_size=4)),
    st.integers(1, 65535),
    st.sampled_from([0, *MARK_BITS]),
)
def test_a_plan_lets_copies_and_skips_through_before_it_queues_with_bypass(matches, skips, q, mark):
    """With a mark bit, what it already let go (its bit set) returns first."""
    text = json.dumps(
        {"queue": q, "chain": f"KCHAOS_Q{q}", "matches": matches, "skips": skips,
         "shape": {"delay_ms": 5}, "mark": mark}
    )  # fmt: skip
    rules = Plan.from_json(text).rules()
    if mark:
        assert rules.pop(0) == ["-m", "mark", "--mark", f"{mark:#x}/{mark:#x}", "-j", "RETURN"]
    assert rules[0] == ["-m", "mark", "--mark", hex(DUPLICATE_MARK), "-j", "RETURN"]
    assert rules[1 : 1 + len(skips)] == [[*s, "-j", "RETURN"] for s in skips]
    queued = rules[1 + len(skips) :]
    assert [r[: len(m)] for r, m in zip(queued, matches, strict=True)] == matches
    for rule in queued:
        assert rule[-5:] == ["-j", "NFQUEUE", "--queue-num", str(q), "--queue-bypass"]


@given(st.lists(st.floats(min_value=0, max_value=10, allow_nan=False), max_size=300))
def test_the_figures_give_the_hold_percentiles_of_what_was_held(holds):
    figures = Figures(seen=len(holds))
    for seconds in holds:
        figures.add_hold(seconds)
    summary = figures.summary()
    if not holds:
        assert summary["hold_ms_p50"] is None and summary["hold_ms_max"] is None
        return
    ms = sorted(h * 1000 for h in holds)
    assert summary["hold_ms_max"] == pytest.approx(ms[-1], abs=1e-3)
    below = sum(h <= summary["hold_ms_p50"] + 1e-3 for h in ms)
    assert below >= len(ms) / 2
    assert summary["hold_ms_p50"] <= summary["hold_ms_p99"] <= summary["hold_ms_max"]


@given(st.sets(st.sampled_from(MARK_BITS)))
def test_no_set_of_shaper_bits_reads_as_a_copys_mark(bits):
    """A packet let go by any shapers carries the OR of their bits: never a copy's mark, which
    every shaper lets through unshaped."""
    mark = 0
    for bit in bits:
        mark |= bit
    assert mark & DUPLICATE_MARK == 0 and mark != DUPLICATE_MARK
    assert all(bit & (bit - 1) == 0 for bit in bits)  # one bit each
