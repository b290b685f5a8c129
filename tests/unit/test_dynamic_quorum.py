"""A dynamic KRaft quorum (KIP-853) and the remove-controller fault, without Docker: what each
node is configured and formatted with, the directory ids the harness derives, validation,
the fault's parameters, and how the checker reads a quorum change."""

from __future__ import annotations

import base64
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis.judge.outcomes import Verdict
from harness.chaos.faults import FAULT_TYPES, HelperSite
from harness.experiment.plan import cell_config, schedule_for
from harness.platform.cluster import KafkaCluster
from harness.platform.topology import (
    ClusterError,
    Role,
    Topology,
    directory_id,
    new_cluster_id,
    plan_nodes,
)
from harness.platform.versions import Mode
from harness.rundir.release import KafkaVersion
from tests.unit.spec_documents import doc, one_cell, rejects, step
from tests.unit.test_cluster_env import PORTS, properties
from tests.unit.test_mechanisms import ROLES, judged, start
from tests.unit.verdict_runs import AP, CP

DEDICATED_391 = {"version": "3.9.1", "mode": "kraft-dedicated", "quorum": "dynamic"}
UUID_TEXT = re.compile(r"^[A-Za-z0-9_-]{22}$")


def dynamic(version: str = "4.3.1", mode: Mode = Mode.KRAFT_DEDICATED) -> Topology:
    return Topology(mode, KafkaVersion.parse(version), dynamic_quorum=True)


def test_controllers_are_formatted_with_the_voter_set_and_everyone_bootstraps_from_them():
    plans = plan_nodes(dynamic(), "cid", PORTS)
    controllers = [p for p in plans if p.role is Role.CONTROLLER]
    brokers = [p for p in plans if p.role is Role.BROKER]
    addresses = "controller-101:9093,controller-102:9093,controller-103:9093"
    voters = ",".join(f"{i}@controller-{i}:9093:{directory_id('cid', i)}" for i in (101, 102, 103))
    for plan in controllers:
        props = properties(plan.env)
        assert props["controller.quorum.bootstrap.servers"] == addresses
        # Kafka refuses a dynamic quorum where controller.quorum.voters is set.
        assert "controller.quorum.voters" not in props
        assert plan.env["KCHAOS_FORMAT_ARGS"] == f"--initial-controllers {voters}"
    for plan in brokers:
        props = properties(plan.env)
        assert props["controller.quorum.bootstrap.servers"] == addresses
        assert "controller.quorum.voters" not in props
        assert "KCHAOS_FORMAT_ARGS" not in plan.env  # brokers are formatted plainly
    static = plan_nodes(Topology(Mode.KRAFT_DEDICATED), "cid", PORTS)
    assert all("KCHAOS_FORMAT_ARGS" not in p.env for p in static)


@given(st.text(min_size=1, max_size=30), st.integers(1, 10_000), st.integers(1, 10_000))
def test_directory_ids_are_kafka_uuids_fixed_per_node_and_distinct(cluster_id, node, other):
    text = directory_id(cluster_id, node)
    assert UUID_TEXT.match(text) and not text.startswith("-")
    raw = base64.urlsafe_b64decode(text + "==")
    assert len(raw) == 16
    assert int.from_bytes(raw) >= 100  # Kafka reserves the first hundred ids
    assert directory_id(cluster_id, node) == text
    assert (directory_id(cluster_id, other) == text) == (node == other)


def test_a_new_cluster_gives_its_controllers_new_directory_ids():
    first, second = new_cluster_id(), new_cluster_id()
    assert directory_id(first, 101) != directory_id(second, 101)


@pytest.mark.parametrize(
    ("topology", "message"),
    [
        (dynamic(mode=Mode.KRAFT), "needs dedicated controllers"),
        (dynamic(version="3.8.1"), "KIP-853"),
    ],
)
def test_a_dynamic_quorum_the_cluster_cannot_have_is_refused(topology, message):
    assert message in (topology.refusal() or "")
    cluster = KafkaCluster(
        image="unused",
        mode=topology.mode,
        version=str(topology.version),
        dynamic_quorum=True,
    )
    with pytest.raises(ClusterError, match=message):
        cluster.start()
    assert cluster.all_nodes == []


def remove(target: str = "controller", **fields) -> dict:
    return step(fault="remove-controller", target=target, **fields)


def test_controller_config_reaches_the_controllers_only_on_top_of_broker_config():
    plans = plan_nodes(
        Topology(Mode.KRAFT_DEDICATED, KafkaVersion.parse("4.2.0")),
        "cid",
        PORTS,
        {"unclean.leader.election.enable": "true", "num.io.threads": "4"},
        controller_extra={"controller.quorum.auto.join.enable": "true", "num.io.threads": "2"},
    )
    for plan in plans:
        props = properties(plan.env)
        assert props["unclean.leader.election.enable"] == "true"
        if plan.role is Role.CONTROLLER:
            assert props["controller.quorum.auto.join.enable"] == "true"
            assert props["num.io.threads"] == "2"
        else:
            assert "controller.quorum.auto.join.enable" not in props
            assert props["num.io.threads"] == "4"


def test_controller_config_without_controller_only_nodes_is_refused():
    auto_join = {"controller_config": {"controller.quorum.auto.join.enable": True}}
    rejects(
        doc(kafka={"version": "4.2.0", **auto_join}, faults={"schedule": []}),
        "kafka.controller_config",
        "set kafka.mode: kraft-dedicated",
    )
    one_cell(doc(kafka={"version": "4.2.0", "mode": "kraft-dedicated", **auto_join}))


def test_validation_names_what_a_quorum_change_needs():
    rejects(
        doc(kafka={"mode": "kraft-dedicated"}, faults={"schedule": [remove()]}),
        "faults.schedule[0].fault",
        "set kafka.quorum dynamic",
    )
    rejects(
        doc(kafka={"quorum": "dynamic"}, faults={"schedule": []}),
        "kafka.quorum",
        "set kafka.mode kraft-dedicated",
    )
    rejects(
        doc(kafka={**DEDICATED_391, "version": "3.8.1"}, faults={"schedule": []}),
        "kafka.quorum",
        "Kafka >= 3.9.0",
    )
    rejects(
        doc(kafka={**DEDICATED_391, "image": "apache/kafka:4.3.1"}, faults={"schedule": []}),
        "kafka.quorum",
        "remove kafka.image",
    )
    rejects(
        doc(kafka=DEDICATED_391, faults={"schedule": [remove(target="leader")]}),
        "faults.schedule[0].target",
        "controller or controller-follower, not 'leader'",
    )
    generated = {"generate": {"faults": ["kill", "remove-controller"], "targets": ["leader"],
                              "duration_s": [5, 9]}}  # fmt: skip
    rejects(doc(faults=generated), "faults.generate.faults", "set kafka.quorum dynamic")
    rejects(
        doc(kafka={"version": "3.9.1", "mode": "zookeeper"},
            faults={"schedule": [step(target="controller-follower")]}),
        "faults.schedule[0].target",
        "one elected controller",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("target", "fault_class"),
    [
        ("controller", "controller-quorum-change"),
        ("controller-follower", "controllers-quorum-change"),
    ],
)
def test_a_valid_quorum_change_is_judged_as_a_fault_on_the_quorum_alone(target, fault_class):
    cell = one_cell(doc(kafka=DEDICATED_391, faults={"schedule": [remove(target=target)]}))
    config = cell_config(cell, schedule_for(cell, 1))
    assert config.fault_class == fault_class
    from analysis.judge.guarantees import guarantee_for

    for acks in ("1", "all"):
        assert guarantee_for(config.model_copy(update={"acks": acks})).loss == "forbidden"


def test_a_standby_controller_in_kraft_mode_is_one_broker():
    cell = one_cell(doc(faults={"schedule": [step(target="controller-follower")]}))
    assert cell_config(cell, schedule_for(cell, 1)).fault_class == "node-kill"


def test_remove_controller_is_an_admin_action_with_bounded_params():
    fault = FAULT_TYPES["remove-controller"]
    assert fault.helper_site is HelperSite.ADMIN_CLIENT and fault.needs_dynamic_quorum
    assert fault.class_kinds == ("quorum-change",)
    assert fault.parse_params({}).model_dump() == {"via": "controllers", "timeout_s": 60}
    refused = [
        ({"timeout_s": 0}, "params.timeout_s"),
        ({"timeout_s": 601}, "10 minutes"),
        ({"mode": "drop"}, "it takes via, timeout_s"),
        ({"via": "zookeeper"}, "params.via"),
    ]
    for bad, problem in refused:
        with pytest.raises(ValueError, match=problem):
            fault.parse_params(bad)


def test_a_loss_during_a_quorum_change_names_it():
    change = start(
        12, [], fault="remove-controller", class_kind="quorum-change", target="controller",
        fault_id=2, partitions=ROLES, hosts=["controller-102"],
    )  # fmt: skip
    kill = start(10, [1], fault="kill")
    rep = judged({**CP, "fault_class": "mixed"}, [kill, change], p0=40)
    assert rep.verdict == Verdict.VIOLATION
    (violation,) = rep.violations
    assert (
        "during a controller quorum change (fault 2 (remove-controller) taking controller(s) "
        "[102] out of the voters at t=12.0 s)" in violation
    )
    # The quorum change hit no replica: with acks=1 the leader kill alone decides, named too.
    rep = judged({**AP, "fault_class": "mixed"}, [kill, change], p0=40)
    assert rep.verdict == Verdict.EXPECTED_LOSS
    assert any("acks=1 truncation during a controller quorum change" in r for r in rep.reasons)
