"""The shaped faults' parameters and the packets their rules pick, against an oracle that walks
the rules as iptables does (no Docker)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.chaos.faults import FAULT_TYPES, HelperSite
from harness.chaos.faults.shape import PEERS, match_rules, shape_of
from harness.chaos.shaper.policy import Shape

CLIENT = "172.18.0.1"  # the network's gateway: what the host's clients come from


def shaped(
    peer: str, matches: list[list[str]], skips: list[list[str]], direction: str = "out"
) -> bool:
    """Whether a packet out of eth0 to `peer` (direction out), or into eth0 from `peer`
    (direction in), reaches the NFQUEUE rule (skips RETURN first), walked as iptables does:
    a rule matches when every match it names fits the packet."""
    packet = (
        {"-o": "eth0", "-d": peer, "-i": None, "-s": None}
        if direction == "out"
        else {"-i": "eth0", "-s": peer, "-o": None, "-d": None}
    )

    def hits(rule: list[str]) -> bool:
        pairs = dict(zip(rule[::2], rule[1::2], strict=True))
        return all(packet[flag] == value for flag, value in pairs.items())

    if any(hits(skip) for skip in skips):
        return False
    return any(hits(match) for match in matches)


@st.composite
def clusters(draw):
    """(addresses, brokers, quorum): a cluster's nodes, combined or with dedicated quorums."""
    brokers = [f"kafka-{i}" for i in range(1, draw(st.integers(1, 5)) + 1)]
    kind = draw(st.sampled_from(["combined", "dedicated", "zookeeper"]))
    extra = {"combined": [], "dedicated": ["controller-1", "controller-2", "controller-3"],
             "zookeeper": ["zookeeper-1"]}[kind]  # fmt: skip
    names = brokers + extra
    addresses = {name: f"172.18.0.{i + 2}" for i, name in enumerate(names)}
    quorum = set(brokers) if kind == "combined" else set(extra)
    return addresses, set(brokers), quorum


@given(clusters(), st.data(), st.sampled_from(["out", "in"]))
def test_the_rules_shape_exactly_the_packets_to_the_chosen_peers(cluster, data, direction):
    addresses, brokers, quorum = cluster
    own = data.draw(st.sampled_from(sorted(addresses)))
    peers = data.draw(
        st.just(["all"])
        | st.lists(st.sampled_from(["brokers", "controllers", "clients"]), min_size=1, unique=True)
    )
    matches, skips = match_rules(peers, own, addresses, brokers, quorum, direction)
    for name, ip in addresses.items():
        if name == own:
            continue  # its own traffic stays on lo
        wanted = "all" in peers or (
            ("brokers" in peers and name in brokers) or ("controllers" in peers and name in quorum)
        )
        assert shaped(ip, matches, skips, direction) == wanted, (name, peers)
        # The other direction is never shaped: a rule of one side never matches the other.
        assert not shaped(ip, matches, skips, "in" if direction == "out" else "out")
    wanted = "all" in peers or "clients" in peers
    assert shaped(CLIENT, matches, skips, direction) == wanted


@pytest.mark.parametrize("fault", ["delay", "reorder"])
def test_direction_in_shapes_what_the_target_receives_from_its_from_peers(fault):
    from harness.chaos.faults.shape import peers_and_direction

    parsed = FAULT_TYPES[fault].parse_params({"direction": "in", "from": ["clients"]})
    assert peers_and_direction(parsed) == (["clients"], "in")
    assert parsed.model_dump()["from"] == ["clients"] and "to" not in parsed.model_dump()
    everyone = FAULT_TYPES[fault].parse_params({"direction": "in"})
    assert peers_and_direction(everyone) == (["all"], "in")
    # Today's files keep their meaning: no direction is out, to its `to`.
    default = FAULT_TYPES[fault].parse_params({"to": "brokers"})
    assert peers_and_direction(default) == (["brokers"], "out")
    assert "from" not in default.model_dump()


@pytest.mark.parametrize(
    "fault,params,shape",
    [
        ("delay", {}, Shape(delay_ms=100)),
        ("delay", {"delay_ms": 250, "jitter_ms": 20.5}, Shape(delay_ms=250, jitter_ms=20.5)),
        (
            "delay",
            {"direction": "in", "delay_ms": 7000, "connections_percent": 40},
            Shape(delay_ms=7000, connections_percent=40),
        ),
        (
            "delay",
            {"direction": "in", "requests": ["EndTxn", "Produce"], "connections_percent": 50},
            Shape(delay_ms=100, connections_percent=50, request_keys=(26, 0)),
        ),
        ("reorder", {}, Shape(reorder_percent=25, delay_ms=50)),
        ("duplicate", {"percent": 3}, Shape(duplicate_percent=3)),
    ],
)
def test_each_fault_becomes_the_shape_it_names(fault, params, shape):
    parsed = FAULT_TYPES[fault].parse_params(params)
    assert Shape(**shape_of(fault, parsed)) == shape
    assert FAULT_TYPES[fault].helper_site is HelperSite.SIDECAR
    assert FAULT_TYPES[fault].class_kind(parsed) == fault


@pytest.mark.parametrize(
    "fault,params,problem",
    [
        ("delay", {"delay_ms": -5}, "params.delay_ms"),
        ("delay", {"delay_ms": 60_001}, "a minute"),
        ("delay", {"to": "everyone"}, "unknown peer 'everyone'"),
        ("delay", {"to": ["all", "clients"]}, "all already covers every peer"),
        ("delay", {"to": []}, "must be one of all, brokers, controllers, clients"),
        ("reorder", {"percent": 0}, "params.percent"),
        ("delay", {"connections_percent": 0}, "params.connections_percent"),
        ("delay", {"requests": ["EndTxn"]}, "requests applies to direction: in"),
        ("delay", {"direction": "in", "requests": ["Commit"]}, "unknown request 'Commit'"),
        ("reorder", {"connections_percent": 50}, "unknown param 'connections_percent'"),
        ("duplicate", {"percent": 150}, "params.percent"),
        ("duplicate", {"delay_ms": 5}, "unknown param 'delay_ms' for fault duplicate"),
        ("delay", {"delay_ms": "fast"}, "params.delay_ms"),
        ("delay", {"direction": "up"}, "params.direction"),
        ("delay", {"direction": "in", "to": "brokers"}, "for direction: in use from"),
        ("reorder", {"from": "clients"}, "for direction: out use to"),
        ("reorder", {"direction": "in", "from": "nobody"}, "unknown peer 'nobody'"),
        ("duplicate", {"direction": "in"}, "unknown param 'direction' for fault duplicate"),
    ],
)
def test_bad_params_are_refused_naming_the_param(fault, params, problem):
    with pytest.raises(ValueError, match=problem):
        FAULT_TYPES[fault].parse_params(params)


@given(st.lists(st.sampled_from(PEERS[1:]), min_size=1))
def test_to_takes_one_peer_or_a_list_and_keeps_each_once(peers):
    parsed = FAULT_TYPES["delay"].parse_params({"to": peers})
    assert parsed.to == list(dict.fromkeys(peers))
    assert FAULT_TYPES["delay"].parse_params({"to": peers[0]}).to == [peers[0]]


def test_loss_to_peers_is_dropped_by_the_shaper_and_to_all_by_iptables():
    from harness.chaos.faults.shape import LossParams

    loss = FAULT_TYPES["loss"]
    assert loss.parse_params({}).to == ["all"]
    parsed = loss.parse_params({"percent": 50, "to": ["brokers", "clients"]})
    assert parsed.to == ["brokers", "clients"]
    peers = LossParams(percent=parsed.percent, to=parsed.to)
    assert Shape(**shape_of("loss", peers)) == Shape(drop_percent=50)
    with pytest.raises(ValueError, match="unknown peer"):
        loss.parse_params({"to": "zookeeper"})
