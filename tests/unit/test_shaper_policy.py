"""The shaper's policy against an oracle: holds, order, reordering, drops and duplicates."""

from __future__ import annotations

import math
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.chaos.shaper.policy import Policy, Shape, flow_of, request_key
from tests.examples import examples

arrivals = st.lists(
    st.floats(min_value=0, max_value=1000, allow_nan=False), min_size=1, max_size=200
).map(sorted)
milliseconds = st.floats(min_value=0, max_value=5000, allow_nan=False)
percent = st.floats(min_value=0, max_value=100, allow_nan=False)


@given(arrivals, milliseconds, milliseconds, percent, percent, percent, st.integers(0, 99))
def test_every_packet_leaves_no_earlier_than_it_came_and_held_ones_keep_their_order(
    times, delay, jitter, reorder, duplicate, drop, seed
):
    policy = Policy(Shape(delay, jitter, reorder, duplicate, drop), seed)
    decisions = [policy.decide(t) for t in times]
    held = [(t, d) for t, d in zip(times, decisions, strict=True) if not (d.drop or d.reordered)]
    for t, d in zip(times, decisions, strict=True):
        assert d.release_at >= t
        if d.drop or d.reordered:
            assert d.release_at == t
    # The oracle: a held packet leaves no sooner than delay - jitter after it came, and no
    # later than the latest delay + jitter of any packet that came before it (it waits for them).
    latest_due = -math.inf
    previous = -math.inf
    for t, d in held:
        latest_due = max(latest_due, t + (delay + jitter) / 1000)
        assert d.release_at >= t + max(0.0, delay - jitter) / 1000 - 1e-9
        assert d.release_at <= latest_due + 1e-9
        assert d.release_at >= previous
        previous = d.release_at


@given(arrivals, milliseconds)
def test_without_jitter_each_packet_is_held_exactly_the_delay(times, delay):
    policy = Policy(Shape(delay_ms=delay), seed=1)
    for t in times:
        assert policy.decide(t).release_at == pytest.approx(t + delay / 1000, abs=1e-9)


@given(percent, percent, percent, st.integers(0, 10))
@settings(max_examples=examples(0.15))
def test_shares_match_the_percentages(reorder, duplicate, drop, seed):
    n = 4000
    policy = Policy(Shape(delay_ms=10, reorder_percent=reorder, duplicate_percent=duplicate,
                          drop_percent=drop), seed)  # fmt: skip
    decisions = [policy.decide(float(i)) for i in range(n)]
    dropped = sum(d.drop for d in decisions)
    kept = [d for d in decisions if not d.drop]

    def close(count: int, total: int, p: float) -> bool:
        # Six standard deviations of a binomial count: a false alarm is never seen.
        return abs(count - total * p) <= 6 * math.sqrt(total * p * (1 - p)) + 1

    assert close(dropped, n, drop / 100)
    assert close(sum(d.reordered for d in kept), len(kept), reorder / 100)
    assert close(sum(d.duplicate for d in kept), len(kept), duplicate / 100)


def test_a_seed_gives_the_same_decisions():
    shape = Shape(delay_ms=50, jitter_ms=40, reorder_percent=30, duplicate_percent=20)
    first, second = Policy(shape, 5), Policy(shape, 5)
    assert [first.decide(i / 10) for i in range(100)] == [second.decide(i / 10) for i in range(100)]


@pytest.mark.parametrize(
    "fields",
    [{"delay_ms": -1}, {"jitter_ms": -0.5}, {"drop_percent": 101}, {"reorder_percent": -3}],
)
def test_a_shape_out_of_range_is_refused(fields):
    with pytest.raises(ValueError, match=next(iter(fields))):
        Shape(**fields)


def test_only_duplicates_and_a_share_of_connections_need_whole_packets():
    assert Shape(duplicate_percent=1).needs_payload
    assert Shape(delay_ms=100, connections_percent=50).needs_payload
    assert not Shape(delay_ms=100, jitter_ms=5, reorder_percent=50).needs_payload


flows = st.lists(st.integers(0, 7), min_size=1, max_size=200)  # which connection each packet is on


@given(
    arrivals, flows, st.floats(1, 5000), st.floats(0, 0.99), st.floats(1, 99), st.integers(0, 99)
)
def test_a_share_of_connections_is_held_whole_and_in_order_the_rest_go_at_once(
    times, on, delay, jitter_share, share, seed
):
    jitter = delay * jitter_share  # below the delay: a held packet always leaves later
    packets = list(zip(times, on, strict=False))
    policy = Policy(Shape(delay_ms=delay, jitter_ms=jitter, connections_percent=share), seed)
    decisions = [policy.decide(t, _flow(f)) for t, f in packets]
    # The oracle: a connection is held or not as a whole; a held one's packets each wait at
    # least delay - jitter and leave in the order they came; the rest leave when they came.
    held: dict[int, bool] = {}
    last: dict[int, float] = {}
    for (t, f), d in zip(packets, decisions, strict=True):
        assert not (d.drop or d.duplicate or d.reordered)
        assert held.setdefault(f, d.release_at > t) == (d.release_at > t), "fate changed"
        if held[f]:
            assert d.release_at >= t + (delay - jitter) / 1000 - 1e-9
            assert d.release_at >= last.get(f, -math.inf)
            last[f] = d.release_at
        else:
            assert d.release_at == t
    assert policy.held_connections == sum(held.values())
    assert policy.passed_connections == len(held) - sum(held.values())


def _flow(port: int) -> tuple[bytes, int, bytes, int]:
    return b"\x0a\0\0\1", 40000 + port, b"\x0a\0\0\2", 9092


def test_the_held_share_of_connections_matches_the_percentage():
    policy = Policy(Shape(delay_ms=7000, connections_percent=30), seed=3)
    for port in range(3000):
        policy.decide(0.0, _flow(port))
        policy.decide(0.1, _flow(port))  # decided once
    assert policy.held_connections + policy.passed_connections == 3000
    assert abs(policy.held_connections - 900) <= 6 * math.sqrt(3000 * 0.3 * 0.7)


def test_packets_of_no_flow_go_at_once_when_connections_are_chosen():
    policy = Policy(Shape(delay_ms=7000, connections_percent=100 - 1e-9), seed=0)
    assert policy.decide(1.0, None).release_at == 1.0


def _ipv4(protocol: int, options: int = 0, ports: bytes = b"\x9c\x40\x23\x84") -> bytes:
    version_ihl = bytes([0x40 | (5 + options)])
    header = (
        version_ihl + bytes(8) + bytes([protocol]) + bytes(2) + bytes([10, 0, 0, 1, 10, 0, 0, 2])
    )
    return header + bytes(4 * options) + ports


@pytest.mark.parametrize("options", [0, 2])
def test_a_tcp_or_udp_packet_names_its_flow_after_the_ip_options(options):
    for protocol in (6, 17):
        assert flow_of(_ipv4(protocol, options)) == (
            bytes([10, 0, 0, 1]),
            40000,
            bytes([10, 0, 0, 2]),
            9092,
        )


@pytest.mark.parametrize(
    "packet",
    [b"", _ipv4(1), _ipv4(6)[:22], b"\x60" + _ipv4(6)[1:]],
    ids=["empty", "icmp", "cut short", "ipv6"],
)
def test_anything_else_has_no_flow(packet):
    assert flow_of(packet) is None


def _tcp(payload: bytes, ip_options: int = 0, tcp_options: int = 0) -> bytes:
    """An IPv4 TCP packet carrying `payload`, with the given option words."""
    ip = bytes([0x40 | (5 + ip_options)]) + bytes(8) + b"\x06" + bytes(2) + bytes(8)
    tcp = struct.pack("!HH", 40000, 9094) + bytes(8) + bytes([(5 + tcp_options) << 4]) + bytes(7)
    return ip + bytes(4 * ip_options) + tcp + bytes(4 * tcp_options) + payload


def _request(key: int, version: int = 3, size: int = 60) -> bytes:
    return struct.pack("!ihhi", size, key, version, 7) + b"client"


@given(st.integers(0, 99), st.integers(0, 29), st.integers(0, 3), st.integers(0, 10))
def test_a_packet_starting_a_request_names_its_api_key(key, version, ip_options, tcp_options):
    assert request_key(_tcp(_request(key, version), ip_options, tcp_options)) == key


@pytest.mark.parametrize(
    "packet",
    [
        _tcp(b""),
        _tcp(b"\x00\x00"),
        _tcp(_request(26, size=0)),
        _tcp(_request(26, size=-5)),
        _tcp(_request(26, version=400)),
        _tcp(_request(1000)),
        _ipv4(17, ports=b"\x9c\x40\x23\x84" + _request(26)),
    ],
    ids=["no payload", "short", "size 0", "negative size", "version", "key", "udp"],
)
def test_a_packet_that_starts_no_plausible_request_names_none(packet):
    assert request_key(packet) is None


@given(
    st.lists(st.tuples(st.integers(0, 3), st.sampled_from([None, 0, 26])), max_size=150),
    st.floats(1, 99),
    st.integers(0, 99),
)
def test_a_connection_is_held_from_a_chosen_request_on_and_never_before(packets, share, seed):
    policy = Policy(Shape(delay_ms=7000, connections_percent=share, request_keys=(26,)), seed)
    held_from: dict[int, int] = {}
    for i, (f, key) in enumerate(packets):
        d = policy.decide(float(i), _flow(f), key)
        if d.release_at > i:
            held_from.setdefault(f, i)
            # The oracle: the hold starts at a packet starting an EndTxn, and never ends.
            assert packets[held_from[f]][1] == 26
        else:
            assert f not in held_from, "a held connection let a packet go"
    assert policy.held_connections == len(held_from)


def test_every_chosen_request_draws_anew_until_its_connection_is_held():
    policy = Policy(Shape(delay_ms=7000, connections_percent=20, request_keys=(26,)), seed=0)
    decisions = [policy.decide(float(i), _flow(0), 26) for i in range(200)]
    first = next(i for i, d in enumerate(decisions) if d.release_at > i)
    assert 0 < first < 60  # not held at the first EndTxn, held at a later one (seed 0: the 26th)
    assert all(d.release_at > i for i, d in enumerate(decisions[first:], first))


@given(
    st.lists(st.tuples(st.integers(0, 3), st.sampled_from([None, 0, 22, 26])), max_size=150),
    st.sets(st.sampled_from([22, 26]), min_size=1),
)
def test_a_dropped_request_takes_the_rest_of_its_connection_and_nothing_else(packets, keys):
    policy = Policy(Shape(request_keys=tuple(sorted(keys)), drop_held=True), seed=1)
    # The oracle (every chosen request drawn: connections_percent 100): a flow's packets are
    # dropped from its first packet starting a chosen request on, and pass before it.
    lost: set[int] = set()
    for i, (f, key) in enumerate(packets):
        if key in keys:
            lost.add(f)
        decision = policy.decide(float(i), _flow(f), key)
        assert decision.drop is (f in lost), (i, f, key)
        assert decision.release_at == i  # nothing is delayed
    assert policy.held_connections == len(lost)
