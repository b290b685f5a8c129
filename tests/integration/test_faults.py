"""Every fault type injected into and healed on real brokers, judged by its effect.

A fault test asserts what the fault does to Kafka and to the network (replication stops, a
node answers nothing, packets are lost, bandwidth shrinks), measured from outside the fault's
own code, and that the effect is gone after heal; never only that a rule or qdisc is listed.
"""

from __future__ import annotations

import random
import re
import time
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from analysis.model.evidence import RunEvidence
from harness.chaos.faults import FAULT_TYPES, Fault, FaultContext
from harness.chaos.heal import heal_all
from harness.experiment.model import FaultStep
from harness.nemesis.schedule import Nemesis
from harness.nemesis.targets import resolve_target
from harness.platform import admin
from harness.platform.cluster import KafkaCluster
from harness.platform.node import KafkaNode
from harness.platform.topology import INTERNAL_PORT, LOG_DIR
from harness.run.sampler import Sampler
from harness.rundir.events import ConditionMet, EventLog, FaultStart, now_us, read_events
from harness.rundir.segments import batches
from tests.integration.conftest import known_to_every_broker
from tests.integration.support import high_watermarks, read_all, wait_until


def ctx_for(cluster: KafkaCluster, topic: str) -> FaultContext:
    return FaultContext(cluster, topic, random.Random(7))


def reachable_alone(node_port: int, timeout_s: float = 3) -> bool:
    """Whether a client bootstrapped only to this host port gets metadata from it."""
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{node_port}", "log_level": 0})
    try:
        admin.list_topics(timeout=timeout_s)
        return True
    except KafkaException:
        return False


def connects(node: KafkaNode, peer: KafkaNode, timeout_s: int = 1) -> bool:
    """Whether `node` opens a TCP connection to `peer`'s broker port within `timeout_s`."""
    probe = f"exec 3<>/dev/tcp/{peer.hostname}/{INTERNAL_PORT}"
    code, _ = node.exec(["timeout", str(timeout_s), "bash", "-c", probe])
    return code == 0


def producer_for(cluster: KafkaCluster, acks: str, timeout_ms: int) -> Producer:
    """A producer whose sends fail after `timeout_ms` (message.timeout.ms)."""
    return Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": acks,
            "message.timeout.ms": timeout_ms,
            "log_level": 0,
        }
    )


def write_one(producer: Producer, topic: str, partition: int = 0) -> KafkaError | None:
    """Send one record to `partition`; its delivery error (None: acknowledged in time)."""
    outcome: list[KafkaError | None] = []
    producer.produce(
        topic, b"probe", partition=partition, on_delivery=lambda err, msg: outcome.append(err)
    )
    producer.flush(60)
    return outcome[0] if outcome else KafkaError(KafkaError._TIMED_OUT)


def tcp_retransmissions(node: KafkaNode) -> int:
    """Segments the node's kernel retransmitted (its network namespace's TCP counter)."""
    _, snmp = node.exec(["cat", "/proc/net/snmp"])
    names, values = (line.split() for line in snmp.splitlines() if line.startswith("Tcp:"))
    return int(values[names.index("RetransSegs")])


def dropped_by_rules(node: KafkaNode) -> int:
    """Packets the faults' iptables chains (KCHAOS-<id>) dropped in `node` (kernel counters)."""
    _, listing = node.exec(["iptables", "-w", "-L", "-v", "-n", "-x"])
    dropped, chain = 0, ""
    for line in listing.splitlines():
        if line.startswith("Chain "):
            chain = line.split()[1]
        elif chain.startswith("KCHAOS-") and (m := re.match(r"^\s*(\d+)\s+\d+\s+DROP", line)):
            dropped += int(m.group(1))
    return dropped


@pytest.fixture
def new_topic(cluster: KafkaCluster):
    """Makes one-partition topics on exactly the replicas given (first = preferred leader),
    known to every broker; deleted after the test (later tests here read every log dir)."""
    created: list[str] = []

    def make(replicas: list[int], config: dict[str, str]) -> str:
        name = f"f-{uuid.uuid4().hex[:8]}"
        futures = cluster.admin().create_topics(
            [NewTopic(name, num_partitions=1, replica_assignment=[replicas], config=config)]
        )
        futures[name].result(timeout=30)
        created.append(name)
        cluster.wait_full_isr(name, timeout_s=30)
        wait_until(lambda: known_to_every_broker(cluster, name, 1), 30, f"{name} everywhere")
        return name

    yield make
    if created:
        for future in cluster.admin().delete_topics(created, operation_timeout=30).values():
            future.result(timeout=30)


def isr_seen_by(node: KafkaNode, topic: str) -> tuple[int, ...]:
    """Partition 0's ISR in `node`'s own metadata (a cut-off node has a stale view)."""
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{node.host_port}", "log_level": 0})
    return tuple(admin.list_topics(topic, timeout=5).topics[topic].partitions[0].isrs)


def started_at(node: KafkaNode) -> tuple[str, str]:
    """When the engine last started the node's container, as (seconds, nanoseconds) strings
    that sort as time (the engine drops the fraction's trailing zeros)."""
    node.docker.reload()
    stamp = node.docker.attrs["State"]["StartedAt"]  # RFC 3339, e.g. ...T01:21:03.1234567Z
    seconds, _, fraction = stamp.rstrip("Z").partition(".")
    return seconds, fraction.ljust(9, "0")


def fault_of(kind: str, ctx: FaultContext, nodes: list[KafkaNode], **params) -> Fault:
    """Fault type `kind` on `nodes`, its params validated as an experiment file's are."""
    fault_type = FAULT_TYPES[kind]
    return fault_type(ctx, nodes, fault_type.parse_params(params))


def step(fault: str, target: str = "leader", **params) -> FaultStep:
    return FaultStep(at_s=0, fault=fault, target=target, partition=0, duration_s=1, params=params)


@pytest.mark.integration
def test_leader_cut_off_from_brokers_loses_leadership_but_clients_still_reach_it(cluster, topic):
    ctx = ctx_for(cluster, topic)
    (leader,) = resolve_target(ctx, step("partition"))
    fault = fault_of("partition", ctx, [leader], mode="from-brokers")
    fault.inject()
    try:
        new = wait_until(
            lambda: (
                cluster.leader_of_from(topic, 0, exclude=leader.node_id)
                not in (None, leader.node_id)
            ),
            40,
            "a new leader elected by the majority",
        )
        assert new
        assert reachable_alone(leader.host_port)  # the zombie still answers clients
    finally:
        fault.heal()
    cluster.wait_full_isr(topic, timeout_s=90)


@pytest.mark.integration
def test_full_isolation_cuts_clients_too(cluster, topic):
    ctx = ctx_for(cluster, topic)
    node = cluster.node(2)
    fault = fault_of("partition", ctx, [node], mode="full")
    fault.inject()
    try:
        assert not reachable_alone(node.host_port)
    finally:
        fault.heal()
    wait_until(lambda: reachable_alone(node.host_port), 30, "the node to answer again")
    cluster.wait_full_isr(topic, timeout_s=90)


@pytest.mark.integration
def test_groups_partition_cuts_links_across_groups_only(cluster, topic):
    ctx = ctx_for(cluster, topic)
    one, two, three = cluster.nodes
    fault = fault_of("partition", ctx, [], mode="groups", groups=[[1]])
    assert fault.inject()["groups"] == [[1], [2, 3]]
    try:
        assert not connects(one, two) and not connects(one, three)
        assert not connects(two, one) and not connects(three, one)  # both directions
        assert connects(two, three) and connects(three, two)  # within a group: untouched
        assert reachable_alone(one.host_port)  # clients are not part of any group
    finally:
        fault.heal()
    assert connects(one, two) and connects(three, one)
    cluster.wait_full_isr(topic, timeout_s=90)


@pytest.mark.integration
def test_a_cut_healed_leaves_every_other_cut_in_force(cluster, topic):
    # An overlapping schedule heals one fault while others act: each heal takes its own rules
    # away, on its own node (a loss beside a cut) and on another (a second cut).
    ctx = ctx_for(cluster, topic)
    one, two, three = cluster.nodes
    cut = fault_of("partition", ctx, [one], mode="from-brokers")
    isolated = fault_of("partition", ctx, [two], mode="full")
    lossy = fault_of("loss", ctx, [one], percent=10)
    cut.inject()
    try:
        isolated.inject()
        lossy.inject()
        assert not connects(two, three) and not connects(one, three)
        isolated.heal()
        lossy.heal()
        assert connects(two, three) and connects(three, two)  # its own cut is gone
        assert not connects(one, three) and not connects(three, one)  # the other still acts
        assert not connects(one, two)
        assert reachable_alone(one.host_port)  # still the from-brokers cut, clients reach it
    finally:
        cut.heal()
    assert connects(one, three) and connects(two, one)
    _, chains = one.exec(["iptables", "-w", "-S"])
    assert "-N KCHAOS-" not in chains  # no fault's chain left behind
    cluster.wait_full_isr(topic, timeout_s=90)


@pytest.mark.chaos
def test_a_follower_cut_off_from_brokers_stops_replicating_until_healed(cluster, new_topic):
    # min.insync.replicas=3: an acks=all write needs every replica, the cut one included.
    topic = new_topic([1, 2, 3], {"min.insync.replicas": "3"})
    leader = cluster.partition_states(topic)[0].leader
    # A follower that is not the controller, so the cut costs no controller failover.
    controller = cluster.active_controller()
    follower = next(n for n in (1, 2, 3) if n not in (leader, controller))
    producer = producer_for(cluster, "all", 4000)
    # The precondition is waited for, not assumed: a fresh topic's followers may not be
    # fetching yet when its ISR first reads full, and CI's first write can outlast 4 s.
    wait_until(lambda: write_one(producer, topic) is None, 60, "a first acks=all write")
    node = cluster.node(follower)
    fault = fault_of("partition", ctx_for(cluster, topic), [node], mode="from-brokers")
    fault.inject()
    try:
        assert not connects(node, cluster.node(leader))
        error = write_one(producer, topic)  # the leader waits in vain for the cut follower
        assert error is not None and error.code() in (
            KafkaError._MSG_TIMED_OUT,
            KafkaError.NOT_ENOUGH_REPLICAS,
        ), error
        wait_until(
            lambda: follower not in isr_seen_by(cluster.node(leader), topic),
            45,
            f"the leader to drop node {follower} from the ISR",
        )
    finally:
        fault.heal()
    wait_until(
        lambda: follower in isr_seen_by(cluster.node(leader), topic),
        90,
        f"node {follower} to catch up and rejoin the ISR",
    )
    wait_until(lambda: write_one(producer, topic) is None, 30, "an acknowledged acks=all write")


@pytest.mark.integration
def test_a_paused_leader_answers_nothing_and_acknowledges_nothing(cluster, topic):
    ctx = ctx_for(cluster, topic)
    (leader,) = resolve_target(ctx, step("pause"))
    producer = producer_for(cluster, "1", 2500)
    # Connected, metadata known: only the pause differs. Waited for, as above.
    wait_until(lambda: write_one(producer, topic) is None, 60, "a first acks=1 write")
    fault = fault_of("pause", ctx, [leader])
    fault.inject()
    try:
        # Well within a broker session (9 s): the paused node still leads partition 0.
        error = write_one(producer, topic)
        assert error is not None and error.code() == KafkaError._MSG_TIMED_OUT, error
        assert not reachable_alone(leader.host_port, timeout_s=2)
    finally:
        fault.heal()
    wait_until(lambda: write_one(producer, topic) is None, 30, "an acknowledged write again")
    assert reachable_alone(leader.host_port)
    cluster.wait_full_isr(topic, timeout_s=90)


@pytest.mark.integration
def test_packet_loss_drops_packets_and_forces_tcp_retransmissions(cluster, topic):
    ctx = ctx_for(cluster, topic)
    node = cluster.node(3)  # a replica of every partition: replication traffic crosses it
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "1"})

    def traffic() -> None:
        """Some writes to every partition; under loss they may take long, so no waiting."""
        for i in range(50):
            producer.produce(topic, b"x" * 1000, key=b"%d" % i)
        producer.flush(1)

    before = tcp_retransmissions(node)
    traffic()
    baseline = tcp_retransmissions(node) - before
    loss = fault_of("loss", ctx, [node], percent=30)
    loss.inject()
    try:
        start = tcp_retransmissions(node)

        def retransmitted() -> bool:
            traffic()
            return tcp_retransmissions(node) - start >= baseline + 10

        wait_until(retransmitted, 30, "TCP retransmissions from the lossy node")
        assert dropped_by_rules(node) > 0
    finally:
        loss.heal()
    assert dropped_by_rules(node) == 0  # its chain is gone: nothing drops any more
    assert connects(node, cluster.node(1))
    assert producer.flush(60) == 0  # every write got through in the end
    cluster.wait_full_isr(topic, timeout_s=90)


@pytest.mark.integration
def test_a_slow_link_limits_the_bandwidth_out_of_the_node(cluster, topic, new_topic):
    ctx = ctx_for(cluster, topic)
    node = cluster.node(3)
    data = new_topic([3], {})  # on node 3 alone: reading it is node 3's egress
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "1"})
    for _ in range(768):
        producer.produce(data, b"x" * 1024, partition=0)
    assert producer.flush(30) == 0
    producer.close()

    def read_seconds() -> float:
        started = time.monotonic()
        assert len(read_all(cluster.bootstrap_servers, data, 1)) == 768
        return time.monotonic() - started

    unlimited = read_seconds()
    slow = fault_of("slow", ctx, [node], rate_kbit=1024)  # 128 KiB/s
    slow.inject()
    try:
        limited = read_seconds()
    finally:
        slow.heal()
    # 768 KiB at 128 KiB/s take 6 s (plus framing); unlimited, about a second of set-up.
    assert limited >= 4 and unlimited < limited / 2, (limited, unlimited)
    assert read_seconds() < limited / 2  # healed


@pytest.mark.chaos
def test_nemesis_kill_all_then_heal_brings_the_cluster_back(cluster, topic, tmp_path):
    ctx = ctx_for(cluster, topic)
    events = EventLog(tmp_path / "events.jsonl")
    nemesis = Nemesis(
        ctx, [FaultStep(at_s=0, fault="kill-all", target="all", duration_s=2)], events
    )
    nemesis.start(time.monotonic())
    wait_until(lambda: all(n.state() == "exited" for n in cluster.nodes), 20, "all killed")
    nemesis.stop()
    heal_all(ctx)
    assert all(n.state() == "running" for n in cluster.nodes)
    cluster.wait_ready(timeout_s=120)
    cluster.wait_full_isr(topic, timeout_s=90)
    events.close()
    kinds = [line for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert any('"fault_start"' in k for k in kinds) and any('"fault_end"' in k for k in kinds)


@pytest.mark.integration
def test_heal_all_undoes_pause_stop_and_rules(cluster, topic, tmp_path):
    """Also: the sampler records the stopped node, not the paused one, and none once healed
    (the liveness checks count a node's stopped span as fault time)."""
    ctx = ctx_for(cluster, topic)
    events = EventLog(tmp_path / "events.jsonl")
    # A controlled shutdown the quorum can serve ends before the timeout: no SIGKILL.
    assert cluster.node(2).stop(timeout_s=30)
    cluster.node(1).pause()
    Sampler(ctx, events).sample()
    fault_of("partition", ctx, [cluster.node(3)], mode="full").inject()
    heal_all(ctx)
    assert [n.state() for n in cluster.nodes] == ["running"] * 3
    Sampler(ctx, events).sample()
    events.close()
    assert [s.stopped for s in RunEvidence.read(tmp_path).samples] == [["kafka-2"], []]
    assert connects(cluster.node(3), cluster.node(1)) and connects(cluster.node(1), cluster.node(3))
    wait_until(lambda: reachable_alone(cluster.node(1).host_port), 30, "the thawed node to answer")
    cluster.wait_full_isr(topic, timeout_s=90)


def quorum_leader(cluster: KafkaCluster) -> int:
    """The active controller as the quorum itself describes it (DescribeQuorum through the
    Admin API, what `kafka-metadata-quorum describe --status` asks): not the quorum-state
    files the harness's own `active_controller()` reads."""
    return admin.quorum(cluster, via="brokers").leader


@pytest.mark.integration
def test_controller_target_is_the_active_controller(cluster, topic):
    (node,) = resolve_target(ctx_for(cluster, topic), step("kill", target="controller"))
    assert node.node_id == quorum_leader(cluster)


@pytest.mark.chaos
def test_power_loss_of_all_loses_the_unflushed_acked_writes_sigkill_keeps(cluster, topic):
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "log_level": 0}
    )
    for i in range(300):
        producer.produce(topic, b"%d" % i, key=b"%d" % (i % 8))
    assert producer.flush(30) == 0
    producer.close()
    assert sum(high_watermarks(cluster.bootstrap_servers, topic)) == 300
    ctx = ctx_for(cluster, topic)

    kill = fault_of("kill-all", ctx, cluster.nodes)
    kill.inject()
    kill.heal()
    cluster.wait_ready(timeout_s=120)
    cluster.wait_full_isr(topic, timeout_s=90)
    assert (
        sum(high_watermarks(cluster.bootstrap_servers, topic)) == 300
    )  # the page cache survived SIGKILL
    # The segment parser reads real segments: every record of a replica is in some batch.
    files = cluster.node(1).read_files(LOG_DIR)
    segments = [
        data for name, (_, data) in files.items() if f"/{topic}-" in name and name.endswith(".log")
    ]
    assert sum(b.last_offset - b.base_offset + 1 for s in segments for b in batches(s)) == 300

    power = fault_of("power-loss", ctx, cluster.nodes, window_s=None)
    detail = power.inject()
    assert all(n.state() == "exited" for n in cluster.nodes)
    cut = {partition for lost in detail["lost"].values() for partition in lost}
    # Other tests' topics on this cluster may lose data too: only this one's is known here.
    assert {name for name in cut if name.startswith(f"{topic}-")} == {
        f"{topic}-{p}" for p in range(3)
    }
    power.heal()
    cluster.wait_ready(timeout_s=120)
    cluster.wait_full_isr(topic, timeout_s=90)
    # Nothing was fsynced (Kafka flushes on segment roll only): every replica lost it all.
    assert sum(high_watermarks(cluster.bootstrap_servers, topic)) == 0


@pytest.mark.chaos
def test_rolling_restart_restarts_each_node_in_turn_controller_last(cluster, topic):
    ctx = ctx_for(cluster, topic)
    controller = quorum_leader(cluster)
    started_before = {n.node_id: started_at(n) for n in cluster.nodes}
    roll = fault_of("rolling-restart", ctx, cluster.nodes, timeout_s=30, rejoin_timeout_s=60)
    detail = roll.inject()
    assert detail["order"][-1] == controller and sorted(detail["order"]) == [1, 2, 3]
    wait_until(lambda: len(roll.restarted) == 3, 240, "three restarts")
    roll.heal()  # waits for the last node to rejoin or halts the wait
    # The engine's own record, not the fault's list: each container started anew, in the
    # order the fault announced, the controller last.
    started = {n.node_id: started_at(n) for n in cluster.nodes}
    assert all(started[i] > started_before[i] for i in started), (started_before, started)
    assert sorted(started, key=started.__getitem__) == detail["order"]
    assert list(roll.restarted) == detail["order"]
    assert roll.detail() == {"restarted": detail["order"], "completed": True}
    assert [n.state() for n in cluster.nodes] == ["running"] * 3
    cluster.wait_full_isr(topic, timeout_s=90)


@pytest.mark.integration
def test_a_step_waits_for_the_high_watermark_its_condition_names(cluster, topic, tmp_path):
    """The nemesis reads the partition's high watermark (ListOffsets) for a condition that
    names it: the step acts once three messages are committed, not before the first is sent."""
    ctx = ctx_for(cluster, topic)
    events = EventLog(tmp_path / "events.jsonl")
    after = "high_watermark(1) >= 3"
    pause = FaultStep(fault="pause", target="node:3", duration_s=0.2, after=after, timeout_s=60)
    nemesis = Nemesis(ctx, [pause], events)
    nemesis.start(time.monotonic())
    producer = producer_for(cluster, "all", 30_000)
    first_send_us = now_us()
    assert [write_one(producer, topic, partition=1) for _ in range(3)] == [None] * 3
    wait_until(lambda: bool(nemesis.resolved), 30, "the pause to act")
    nemesis.stop()
    heal_all(ctx)
    events.close()
    evidence = read_events(tmp_path)
    (met,) = evidence.of(ConditionMet)
    (start,) = evidence.of(FaultStart)
    assert met.condition == after and met.ts_us >= first_send_us, (met, first_send_us)
    assert start.ts_us >= met.ts_us and start.hosts == ["kafka-3"]
