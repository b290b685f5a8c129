"""Experiment validation against what each Kafka version has: modes, idempotence, ELR, targets."""

from __future__ import annotations

import pytest

from harness.experiment.load import parse_experiment
from harness.experiment.matrix import expand
from harness.experiment.plan import cell_config, schedule_for
from tests.unit.spec_documents import doc, one_cell, rejects


def kafka(**fields) -> dict:
    return doc(kafka=fields, producer={"enable_idempotence": False})


def test_mode_defaults_by_version_and_is_recorded_in_the_config():
    old = one_cell(kafka(version="0.11.0.3"))
    new = one_cell(kafka(version="4.3.1"))
    assert cell_config(old, []).kafka_mode == "zookeeper"
    assert cell_config(new, []).kafka_mode == "kraft"


@pytest.mark.parametrize(
    ("fields", "fragments"),
    [
        ({"version": "0.10.2.2", "mode": "kraft"}, ["kafka.mode", "lacks KRaft mode"]),
        ({"version": "3.2.3", "mode": "kraft-dedicated"}, ["kafka.mode", "3.3.0"]),
        ({"version": "4.0.0", "mode": "zookeeper"}, ["kafka.mode", "lacks ZooKeeper mode"]),
        ({"version": "0.10.1.1"}, ["kafka.version", "older than the oldest"]),
        ({"version": "4.3.1", "zookeeper_nodes": 3}, ["kafka.zookeeper_nodes", "zookeeper only"]),
        ({"version": "3.9.1", "mode": "zookeeper", "zookeeper_nodes": 2}, ["zookeeper_nodes"]),
    ],
)
def test_a_setting_the_version_lacks_is_refused_with_the_reason(fields, fragments):
    rejects(kafka(**fields), *fragments)


def test_idempotence_before_0_11_is_refused():
    data = doc(kafka={"version": "0.10.2.2"}, producer={"acks": "all", "enable_idempotence": True})
    rejects(data, "producer.enable_idempotence", "lacks the idempotent producer", "0.11.0.0")


def test_elr_settings_before_4_0_are_refused():
    data = kafka(version="3.9.1", broker_config={"eligible.leader.replicas.version": 1})
    rejects(data, "eligible.leader.replicas", "lacks eligible leader replicas")


def test_version_can_be_a_matrix_axis_and_each_cell_is_checked():
    data = kafka(version="4.3.1")
    data["matrix"] = {"kafka.version": ["0.11.0.3", "3.9.1", "4.3.1"]}
    cells = expand(parse_experiment(data))
    assert [cell_config(c, []).kafka_mode for c in cells] == ["zookeeper", "kraft", "kraft"]


@pytest.mark.parametrize(
    ("fields", "target", "fragment"),
    [
        ({"version": "4.3.1"}, "zookeeper", "needs kafka.mode zookeeper"),
        ({"version": "3.9.1", "mode": "zookeeper"}, "zookeeper:2", "does not exist"),
        ({"version": "3.9.1", "mode": "zookeeper"}, "controllers", "one elected controller"),
    ],
)
def test_role_targets_must_exist_in_the_mode(fields, target, fragment):
    data = kafka(**fields)
    data["faults"] = {"schedule": [{"at_s": 1, "fault": "kill", "target": target, "duration_s": 5}]}
    rejects(data, "target", fragment)


@pytest.mark.parametrize(
    ("fields", "target", "expected"),
    [
        ({"version": "4.3.1", "mode": "kraft-dedicated"}, "controllers", "controllers-kill"),
        ({"version": "4.3.1"}, "controllers", "all-kill"),  # combined nodes are the brokers
        (
            {"version": "3.9.1", "mode": "zookeeper", "zookeeper_nodes": 3},
            "zookeeper:3",
            "zookeeper-kill",
        ),
        ({"version": "4.3.1"}, "brokers", "all-kill"),
    ],
)
def test_fault_class_of_role_targets(fields, target, expected):
    data = kafka(**fields)
    data["faults"] = {"schedule": [{"at_s": 1, "fault": "kill", "target": target, "duration_s": 5}]}
    cell = one_cell(data)
    assert cell_config(cell, schedule_for(cell, 1)).fault_class == expected


def test_power_loss_before_message_format_v2_is_refused():
    data = kafka(version="0.10.2.2")
    data["faults"] = {
        "schedule": [{"at_s": 1, "fault": "power-loss", "target": "all", "duration_s": 5}]
    }
    rejects(data, "faults.schedule[0].fault", "v2 record batches", "0.11")
