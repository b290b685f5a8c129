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


def shaped(dest: str, matches: list[list[str]], skips: list[list[str]]) -> bool:
    """Whether a packet out of eth0 to `dest` reaches the NFQUEUE rule (skips RETURN first)."""

    def hits(rule: list[str]) -> bool:
        pairs = dict(zip(rule[::2], rule[1::2], strict=True))
        return pairs.get("-o", "eth0") == "eth0" and pairs.get("-d", dest) == dest

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


@given(clusters(), st.data())
def test_the_rules_shape_exactly_the_packets_to_the_chosen_peers(cluster, data):
    addresses, brokers, quorum = cluster
    own = data.draw(st.sampled_from(sorted(addresses)))
    peers = data.draw(
        st.just(["all"])
        | st.lists(st.sampled_from(["brokers", "controllers", "clients"]), min_size=1, unique=True)
    )
    matches, skips = match_rules(peers, own, addresses, brokers, quorum)
    for name, ip in addresses.items():
        if name == own:
            continue  # its own traffic stays on lo
        wanted = "all" in peers or (
            ("brokers" in peers and name in brokers) or ("controllers" in peers and name in quorum)
        )
        assert shaped(ip, matches, skips) == wanted, (name, peers)
    assert shaped(CLIENT, matches, skips) == ("all" in peers or "clients" in peers)


@pytest.mark.parametrize(
    "fault,params,shape",
    [
        ("delay", {}, Shape(delay_ms=100)),
        ("delay", {"delay_ms": 250, "jitter_ms": 20.5}, Shape(delay_ms=250, jitter_ms=20.5)),
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
        ("duplicate", {"percent": 150}, "params.percent"),
        ("duplicate", {"delay_ms": 5}, "unknown param 'delay_ms' for fault duplicate"),
        ("delay", {"delay_ms": "fast"}, "params.delay_ms"),
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
    from harness.chaos.faults.shape import DropParams

    loss = FAULT_TYPES["loss"]
    assert loss.parse_params({}).to == ["all"]
    parsed = loss.parse_params({"percent": 50, "to": ["brokers", "clients"]})
    assert parsed.to == ["brokers", "clients"]
    peers = DropParams(percent=parsed.percent, to=parsed.to)
    assert Shape(**shape_of("loss", peers)) == Shape(drop_percent=50)
    with pytest.raises(ValueError, match="unknown peer"):
        loss.parse_params({"to": "zookeeper"})
