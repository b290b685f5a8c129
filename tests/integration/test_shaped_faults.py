"""The shaped network faults (delay, reorder, duplicate) on real brokers, judged by their effect.

Each effect is measured outside the shaper: the produce latency a client sees, and the TCP
counters of the peer that receives the shaped packets (out-of-order segments queued,
duplicate segments answered with a D-SACK). After heal the effect is gone and no helper
container or rule is left.
"""

from __future__ import annotations

import random
import statistics
import time

import docker
import pytest
from confluent_kafka import Producer

from harness.chaos.coordinators import TRANSACTION_STATE, coordinator_of
from harness.chaos.faults import FAULT_TYPES, FaultContext
from harness.chaos.heal import heal_all
from harness.platform.cluster import KafkaCluster
from harness.platform.node import KafkaNode
from harness.platform.sidecar import HELPER_LABEL_SUFFIX


def fault(cluster: KafkaCluster, topic: str, name: str, node: KafkaNode, **params):
    ctx = FaultContext(cluster, topic, random.Random(11))
    return FAULT_TYPES[name](ctx, [node], FAULT_TYPES[name].parse_params(params))


def produce_latencies_ms(producer: Producer, topic: str, n: int = 15, size: int = 100) -> list:
    """The acknowledgement latency of `n` sends to partition 0, one at a time, in ms."""
    latencies = []
    outcomes: list = []
    for _ in range(n):
        started = time.monotonic()
        producer.produce(
            topic, b"x" * size, partition=0, on_delivery=lambda e, m: outcomes.append(e)
        )
        producer.flush(30)
        latencies.append((time.monotonic() - started) * 1000)
    assert outcomes == [None] * n, outcomes
    return latencies


def leader_of_0(cluster: KafkaCluster, topic: str) -> KafkaNode:
    return cluster.node(cluster.partition_states(topic)[0].leader)


def follower_of_0(cluster: KafkaCluster, topic: str) -> KafkaNode:
    state = cluster.partition_states(topic)[0]
    return cluster.node(next(r for r in state.replicas if r != state.leader))


def tcp_ext(node: KafkaNode, counter: str) -> int:
    """One TcpExt counter of the node's network namespace (/proc/net/netstat)."""
    _, text = node.exec(["cat", "/proc/net/netstat"])
    names, values = (line.split() for line in text.splitlines() if line.startswith("TcpExt:"))
    return int(values[names.index(counter)])


def helpers_left(cluster: KafkaCluster) -> list:
    label = cluster.settings.label
    return docker.from_env().containers.list(
        all=True, filters={"label": [f"{label}={cluster.cluster_id}", label + HELPER_LABEL_SUFFIX]}
    )


def shaper_chains(node: KafkaNode) -> list[str]:
    _, rules = node.exec(["iptables", "-w", "-S"])
    return [line for line in rules.splitlines() if "KCHAOS_Q" in line]


def producer(cluster: KafkaCluster, acks: str) -> Producer:
    return Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": acks,
                     "linger.ms": 0, "log_level": 0})  # fmt: skip


@pytest.mark.integration
@pytest.mark.parametrize(
    ("direction", "peers", "hook"),
    [("out", {"to": "clients"}, "OUTPUT"), ("in", {"from": "clients"}, "INPUT")],
    ids=["answers-leave-late", "requests-arrive-late"],
)
def test_a_delay_between_clients_and_the_leader_is_the_latency_a_client_sees(
    cluster, topic, direction, peers, hook
):
    """Out: the leader's answers leave late; in: the clients' requests reach it late. Either
    way a client waits the delay on every send, and only the chosen side's chain is hooked."""
    client = producer(cluster, "all")
    before = statistics.median(produce_latencies_ms(client, topic))
    leader = leader_of_0(cluster, topic)
    delay = fault(cluster, topic, "delay", leader, delay_ms=300, direction=direction, **peers)
    detail = delay.inject()
    try:
        assert detail["shaper"] == "nfqueue" and leader.hostname in detail["rules"]
        jumps = [
            line for line in shaper_chains(leader) if line.startswith("-A ") and " -j " in line
        ]
        other = "INPUT" if hook == "OUTPUT" else "OUTPUT"
        assert any(line.startswith(f"-A {hook} -j KCHAOS_Q") for line in jumps), jumps
        assert not any(line.startswith(f"-A {other}") for line in jumps), jumps
        during = statistics.median(produce_latencies_ms(client, topic))
    finally:
        delay.heal()
    after = statistics.median(produce_latencies_ms(client, topic))
    assert 250 <= during - before <= 700, (before, during)
    assert after - before < 100, (before, after)
    figures = delay.detail()["shaper"][leader.hostname]
    assert figures["packets"] > 0 and 295 <= figures["hold_ms_p50"] <= 450, figures
    assert helpers_left(cluster) == [] and shaper_chains(leader) == []


@pytest.mark.chaos
def test_a_delay_to_brokers_slows_replication_but_not_a_leader_only_ack(cluster, topic):
    leader = leader_of_0(cluster, topic)
    acks_1, acks_all = producer(cluster, "1"), producer(cluster, "all")
    before_1 = statistics.median(produce_latencies_ms(acks_1, topic))
    before_all = statistics.median(produce_latencies_ms(acks_all, topic))
    delay = fault(cluster, topic, "delay", leader, delay_ms=300, to=["brokers"])
    delay.inject()
    try:
        during_1 = statistics.median(produce_latencies_ms(acks_1, topic))
        during_all = statistics.median(produce_latencies_ms(acks_all, topic))
    finally:
        delay.heal()
    assert during_1 - before_1 < 100, (before_1, during_1)  # clients' packets are not held
    assert during_all - before_all >= 250, (before_all, during_all)  # followers' fetches are


def _replicate_while(cluster: KafkaCluster, topic: str, seconds: float) -> None:
    """Produce big records to partition 0 for `seconds` (multi-segment fetch responses)."""
    client = producer(cluster, "all")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for _ in range(20):
            client.produce(topic, random.randbytes(20_000), partition=0)
        client.flush(30)


@pytest.mark.parametrize(
    "name,params,counter",
    [
        pytest.param(
            "reorder",
            {"percent": 50, "delay_ms": 30, "to": "brokers"},
            "TCPOFOQueue",
            marks=pytest.mark.integration,
        ),
        pytest.param(
            "duplicate",
            {"percent": 50, "to": "brokers"},
            "TCPDSACKOldSent",
            marks=pytest.mark.chaos,
        ),
    ],
)
def test_reordered_and_duplicated_segments_reach_the_follower(
    cluster, topic, name, params, counter
):
    leader, follower = leader_of_0(cluster, topic), follower_of_0(cluster, topic)
    quiet_start = tcp_ext(follower, counter)
    _replicate_while(cluster, topic, 4)
    unshaped = tcp_ext(follower, counter) - quiet_start
    shaped = fault(cluster, topic, name, leader, **params)
    shaped.inject()
    start = tcp_ext(follower, counter)
    try:
        _replicate_while(cluster, topic, 4)
    finally:
        shaped.heal()
    seen = tcp_ext(follower, counter) - start
    figures = shaped.detail()["shaper"][leader.hostname]
    assert seen > max(10, 3 * unshaped), (counter, unshaped, seen, figures)
    key = "reordered" if name == "reorder" else "duplicated"
    assert figures[key] > 0, figures


@pytest.mark.integration
def test_the_final_heal_removes_a_shaper_whose_heal_never_ran(cluster, topic):
    client = producer(cluster, "all")
    before = statistics.median(produce_latencies_ms(client, topic, n=5))
    leader = leader_of_0(cluster, topic)
    ctx = FaultContext(cluster, topic, random.Random(3))
    delay = FAULT_TYPES["delay"]
    delay(ctx, [leader], delay.parse_params({"delay_ms": 400})).inject()
    assert len(helpers_left(cluster)) == 1
    actions = heal_all(ctx)  # as after Ctrl-C: the fault object is gone, its helper is not
    assert any("helper" in action for action in actions), actions
    assert helpers_left(cluster) == [] and shaper_chains(leader) == []
    after = statistics.median(produce_latencies_ms(client, topic, n=5))
    assert after - before < 100, (before, after)


@pytest.mark.integration
def test_loss_to_clients_only_cuts_clients_off_and_leaves_the_brokers_linked(cluster, topic):
    from tests.integration.test_faults import connects, reachable_alone

    node, peer = cluster.nodes[0], cluster.nodes[1]
    assert reachable_alone(node.host_port)
    loss = fault(cluster, topic, "loss", node, percent=100, to="clients")
    loss.inject()
    try:
        assert not reachable_alone(node.host_port)
        assert connects(node, peer) and connects(peer, node)
    finally:
        loss.heal()
    assert reachable_alone(node.host_port)
    figures = loss.detail()["shaper"][node.hostname]
    assert figures["dropped"] > 0 and figures["dropped"] == figures["packets"], figures
    assert helpers_left(cluster) == []


@pytest.mark.integration
def test_a_delay_of_end_txn_holds_the_commit_from_the_end_txn_on_and_not_the_sends(cluster, topic):
    """requests: [EndTxn] holds the transaction coordinator's connection from the EndTxn on:
    the transaction's sends to a leader elsewhere are not slowed, its commit waits the delay,
    and the shaper names the connection by the request that started the hold (EndTxn, 26)."""
    txn_id = "kchaos-endtxn-test"
    client = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": txn_id,
                       "linger.ms": 0, "log_level": 0})  # fmt: skip
    client.init_transactions(30)
    coordinator = cluster.node(coordinator_of(cluster, TRANSACTION_STATE, txn_id))
    elsewhere = next(
        s.partition for s in cluster.partition_states(topic) if s.leader != coordinator.node_id
    )

    def one_transaction() -> tuple[float, float]:
        """(seconds to send and deliver 5 messages, seconds to commit)."""
        client.begin_transaction()
        started = time.monotonic()
        for _ in range(5):
            client.produce(topic, b"x", partition=elsewhere)
        assert client.flush(30) == 0
        sent = time.monotonic()
        client.commit_transaction(30)
        return sent - started, time.monotonic() - sent

    _, commit_before = one_transaction()
    delay = fault(cluster, topic, "delay", coordinator, delay_ms=1500, direction="in",
                  **{"from": "clients"}, requests=["EndTxn"])  # fmt: skip
    delay.inject()
    try:
        send_during, commit_during = one_transaction()
    finally:
        delay.heal()
    _, commit_after = one_transaction()
    assert commit_during >= 1.4 and commit_during - commit_before >= 1.2, (
        commit_before, commit_during,
    )  # fmt: skip
    assert send_during < 1.0 and commit_after < 1.0, (send_during, commit_after)
    held = delay.detail()["shaper"][coordinator.hostname]["held_connections"]
    assert [h["api_key"] for h in held.values()] == [26], held
    assert helpers_left(cluster) == [] and shaper_chains(coordinator) == []


@pytest.mark.integration
def test_faults_on_one_node_compose_two_delays_add_and_a_cut_drops_what_they_let_go(cluster, topic):
    """Two delays of the leader's answers to clients (one hook, two shapers) add up: each lets
    a packet go through the node's rules again, its own bit set. A follower cut off from the
    brokers and then given delays both ways to them stays cut off: the cut drops what the
    delays let go (were their packets to skip the rest of their hooks, it would connect
    again); healed, the cut leaves the delays acting, and healed too, nothing is left."""
    from tests.integration.test_faults import connects

    client = producer(cluster, "all")
    before = statistics.median(produce_latencies_ms(client, topic, n=9))
    leader = leader_of_0(cluster, topic)
    delays = [
        fault(cluster, topic, "delay", leader, delay_ms=150, direction="out", to="clients")
        for _ in range(2)
    ]
    for delay in delays:
        delay.inject()
    try:
        both = statistics.median(produce_latencies_ms(client, topic, n=9))
    finally:
        for delay in delays:
            delay.heal()
    assert 270 <= both - before <= 800, (before, both)
    holds = [delay.detail()["shaper"][leader.hostname]["hold_ms_p50"] for delay in delays]
    assert all(145 <= hold <= 300 for hold in holds), holds

    node = follower_of_0(cluster, topic)
    peer = next(n for n in cluster.nodes if n.hostname != node.hostname)
    cut = fault(cluster, topic, "partition", node, mode="from-brokers")
    cut.inject()  # its rules first: the shapers' chains are jumped to ahead of them
    slowed = [
        fault(cluster, topic, "delay", node, delay_ms=20, direction="out", to="brokers"),
        fault(cluster, topic, "delay", node, delay_ms=20, direction="in", **{"from": "brokers"}),
    ]
    try:
        for delay in slowed:
            delay.inject()
        assert not connects(node, peer) and not connects(peer, node)
        cut.heal()
        assert connects(node, peer) and connects(peer, node)
    finally:
        cut.heal()
        for delay in slowed:
            delay.heal()
    for delay in slowed:
        assert delay.detail()["shaper"][node.hostname]["packets"] > 0
    assert helpers_left(cluster) == [] and shaper_chains(leader) == [] == shaper_chains(node)
    cluster.wait_full_isr(topic, timeout_s=90)
