"""Unit tests for harness.experiment: shipped experiment files, validation rules, loading
(tests/unit/test_spec_matrix.py: the matrix, schedules and what a cell becomes)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from harness.experiment.load import load_experiment, parse_experiment
from harness.experiment.matrix import expand
from harness.experiment.model import FaultStep
from harness.experiment.plan import (
    cell_config,
    schedule_for,
)
from harness.experiment.problems import SpecError
from tests.unit.spec_documents import EXPERIMENTS, doc, one_cell, rejects, step

# --- shipped experiments -----------------------------------------------------------------------


def test_default_experiment_expands_to_six_named_cells():
    cells = expand(load_experiment(EXPERIMENTS / "default.yaml"))
    assert [cell.name for cell in cells] == [
        "config=ap__fault=leader-kill",
        "config=ap__fault=leader-partition",
        "config=cp__fault=leader-kill",
        "config=cp__fault=leader-partition",
        "config=acks0__fault=leader-kill",
        "config=acks0__fault=leader-partition",
    ]
    by_name = {cell.name: cell for cell in cells}
    cp_kill = by_name["config=cp__fault=leader-kill"]
    assert cp_kill.axes == {"config": "cp", "fault": "leader-kill"}
    assert cell_config(cp_kill, schedule_for(cp_kill, 42)).fault_class == "leader-kill"
    ap_cut = by_name["config=ap__fault=leader-partition"]
    config = cell_config(ap_cut, schedule_for(ap_cut, 42))
    assert (config.acks, config.min_insync_replicas) == ("1", 1)
    assert config.fault_class == "leader-partition"
    assert [cell.index for cell in cells] == list(range(6))
    assert all(cell.spec.matrix == {} for cell in cells)


def test_quick_experiment_expands_to_two_cells():
    cells = expand(load_experiment(EXPERIMENTS / "quick.yaml"))
    assert [cell.name for cell in cells] == [
        "config=ap__fault=leader-partition",
        "config=cp__fault=leader-partition",
    ]
    (cut,) = schedule_for(cells[0], 0)
    assert (cut.at_s, cut.duration_s, cut.params.mode) == (5, 20, "from-brokers")
    assert cells[0].spec.workload.duration_s == 30


@pytest.mark.parametrize("path", sorted(EXPERIMENTS.glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_experiment_loads_and_expands(path):
    cells = expand(load_experiment(path))
    assert cells and len({cell.name for cell in cells}) == len(cells)


# --- validation rules --------------------------------------------------------------------------


def test_minimal_document_uses_defaults():
    spec = parse_experiment({"name": "minimal"})
    assert spec.producer.acks == "all"
    assert spec.kafka.brokers == 3
    assert [cell.name for cell in expand(spec)] == ["base"]


@pytest.mark.parametrize(
    ("given", "normalised"),
    [(0, "0"), (1, "1"), (-1, "all"), ("-1", "all"), ("all", "all"), ("ALL", "all"), ("1", "1")],
)
def test_acks_is_normalised(given: Any, normalised: str):
    assert parse_experiment(doc(producer={"acks": given})).producer.acks == normalised


@pytest.mark.parametrize("bad", [2, "two", True, None])
def test_bad_acks_names_field(bad: Any):
    rejects(doc(producer={"acks": bad}), "producer.acks")


def test_idempotence_requires_acks_all():
    rejects(
        doc(producer={"acks": "1", "enable_idempotence": True}),
        "producer.enable_idempotence",
        "enable_idempotence requires producer.acks: all",
    )


def test_idempotence_limits_in_flight():
    rejects(
        doc(producer={"enable_idempotence": True, "max_in_flight": 6}), "producer.max_in_flight"
    )


def test_idempotence_needs_retries():
    rejects(doc(producer={"enable_idempotence": True, "retries": 0}), "producer.retries")


def test_message_timeout_must_exceed_linger():
    rejects(
        doc(producer={"linger_ms": 100, "message_timeout_ms": 50}),
        "producer.message_timeout_ms",
        "linger_ms",
    )


def test_min_insync_above_replication_factor():
    rejects(doc(topic={"min_insync_replicas": 4}), "topic.min_insync_replicas", "1..3")


def test_replication_factor_above_brokers():
    rejects(
        doc(topic={"replication_factor": 4, "min_insync_replicas": 1}),
        "topic.replication_factor",
        "kafka.brokers",
    )


@pytest.mark.parametrize("brokers", [2, 6])
def test_broker_count_bounds(brokers: int):
    rejects(doc(kafka={"brokers": brokers}), "kafka.brokers")


def test_version_read_as_number_asks_for_quotes():
    rejects(doc(kafka={"version": 4.1}), "kafka.version", 'version: "4.1"')


def test_needs_version_or_image():
    rejects(doc(kafka={"version": None}), "kafka.version", "kafka.image")
    cell = one_cell(doc(kafka={"version": None, "image": "apache/kafka:4.3.1"}))
    assert cell_config(cell, []).kafka_version == "apache/kafka:4.3.1"


@pytest.mark.parametrize(
    ("workload", "fragment"),
    [
        ({"duration_s": 30, "count": 10}, "exactly one"),
        ({"duration_s": None}, "exactly one"),
        ({"message_bytes": 31}, "workload.message_bytes"),
        ({"keys": 0}, "workload.keys"),
        ({"rate": 0}, "workload.rate"),
    ],
)
def test_workload_rules(workload: dict[str, Any], fragment: str):
    rejects(doc(workload=workload), "workload.", fragment)


@pytest.mark.parametrize(
    ("key", "field"),
    [
        ("acks", "producer.acks"),
        ("enable.idempotence", "producer.enable_idempotence"),
        ("max.in.flight.requests.per.connection", "producer.max_in_flight"),
        ("linger.ms", "producer.linger_ms"),
        ("delivery.timeout.ms", "producer.message_timeout_ms"),
    ],
)
def test_producer_config_must_not_duplicate_fields(key: str, field: str):
    rejects(doc(producer={"config": {key: "1"}}), "producer.config", f"'{key}'", f"use {field}")


def test_producer_config_must_not_set_bootstrap_servers():
    rejects(doc(producer={"config": {"bootstrap.servers": "x:9092"}}), "producer.config", "harness")


@pytest.mark.parametrize(
    ("key", "field"),
    [
        ("min.insync.replicas", "topic.min_insync_replicas"),
        ("unclean.leader.election.enable", "topic.unclean_leader_election"),
    ],
)
def test_topic_config_must_not_duplicate_fields(key: str, field: str):
    rejects(doc(topic={"config": {key: "2"}}), "topic.config", field)


def test_nested_config_mapping_asks_for_dotted_keys():
    rejects(doc(topic={"config": {"retention": {"ms": 1000}}}), "topic.config", "retention.<name>")


def test_bad_experiment_name():
    rejects(doc(name="Has Spaces"), "name", "lowercase")


def test_unknown_top_level_key_is_named():
    rejects(doc(faultz=[]), "faultz", "unknown key 'faultz'", "did you mean 'faults'")


def test_unknown_nested_key_is_named():
    rejects(doc(producer={"ackss": "all"}), "producer.ackss", "did you mean 'acks'")


def test_unknown_key_in_a_fault_step_is_named():
    rejects(doc(faults={"schedule": [step(targt="leader")]}), "faults.schedule[0].targt")


def test_missing_required_step_field():
    bad = step()
    del bad["target"]
    rejects(doc(faults={"schedule": [bad]}), "faults.schedule[0].target", "required")


def test_step_must_end_before_workload():
    rejects(
        doc(faults={"schedule": [step(), step(at_s=20, duration_s=10)]}),
        "faults.schedule[1]",
        "step 1 ends at 30 s",
        "workload.duration_s",
    )


@pytest.mark.parametrize("target", ["leadr", "node:x", "node:0", ""])
def test_bad_target_syntax(target: str):
    rejects(doc(faults={"schedule": [step(target=target)]}), "faults.schedule[0].target")


def test_node_target_beyond_brokers():
    rejects(
        doc(faults={"schedule": [step(target="node:4")]}),
        "faults.schedule[0].target",
        "node:1..node:3",
    )


@pytest.mark.parametrize("fault", ["lose-unsynced", "torn-write", "disk-full", "slow-disk"])
def test_disk_faults_refuse_zookeeper_servers_which_have_no_disk_layer(fault: str):
    zookeeper = {"version": "3.9.1", "mode": "zookeeper", "brokers": 3}
    for target in ("zookeeper", "zookeeper:1"):
        rejects(
            doc(kafka=zookeeper, faults={"schedule": [step(fault=fault, target=target)]}),
            "faults.schedule[0].target",
            "no disk layer",
        )
    generated = {"generate": {"faults": [fault], "targets": ["zookeeper"], "duration_s": [5, 9]}}
    rejects(doc(kafka=zookeeper, faults=generated), "faults.generate.targets", "no disk layer")
    one_cell(doc(kafka=zookeeper, faults={"schedule": [step(fault=fault, target="leader")]}))


def test_leader_partition_beyond_topic():
    rejects(doc(faults={"schedule": [step(partition=3)]}), "faults.schedule[0].partition", "0..2")


def test_unknown_fault_kind():
    rejects(doc(faults={"schedule": [step(fault="reboot")]}), "faults.schedule[0].fault")


@pytest.mark.parametrize(
    ("fault", "params", "fragment"),
    [
        ("loss", {"percent": 150}, "params.percent"),
        ("loss", {"percent": 0}, "params.percent"),
        ("slow", {"rate_kbit": -1}, "params.rate_kbit"),
        ("slow", {"rate_kbit": 0.5}, "whole number"),
        ("stop", {"timeout_s": 0}, "params.timeout_s"),
        ("kill", {"signal": 9}, "no params"),
        ("partition", {"mode": "half"}, "params.mode"),
        ("partition", {"mode": "groups"}, "params.groups"),
        ("partition", {"mode": "groups", "groups": [[1, 2], [2, 3]]}, "node 2 appears"),
        ("partition", {"mode": "full", "groups": [[1], [2]]}, "only used with"),
        ("power-loss", {"window_s": -1}, "params.window_s"),
        ("power-loss", {"window_s": "1m"}, "null = all since the last flush): must be a number"),
        ("power-loss", {"at": 3}, "it takes window_s"),
        ("rolling-restart", {"rejoin_timeout_s": 0}, "params.rejoin_timeout_s"),
        ("rolling-restart", {"timeout_s": 0}, "params.timeout_s"),
    ],
)
def test_bad_fault_params(fault: str, params: dict[str, Any], fragment: str):
    rejects(
        doc(faults={"schedule": [step(fault=fault, params=params)]}),
        "faults.schedule[0].params",
        fragment,
    )


def test_power_loss_window_defaults_to_the_kernel_write_back_and_may_be_null():
    cell = one_cell(doc(faults={"schedule": [step(fault="power-loss", target="all")]}))
    assert schedule_for(cell, 0)[0].model_dump()["params"] == {"window_s": 30}
    cell = one_cell(
        doc(
            faults={"schedule": [step(fault="power-loss", target="all", params={"window_s": None})]}
        )
    )
    assert schedule_for(cell, 0)[0].model_dump()["params"] == {"window_s": None}


def test_groups_must_cut_something():
    params = {"mode": "groups", "groups": [[1, 2, 3]]}
    rejects(
        doc(faults={"schedule": [step(fault="partition", params=params)]}),
        "faults.schedule[0].params.groups",
        "one group",
    )
    params = {"mode": "groups", "groups": [[1]]}  # nodes 2 and 3 form the other side
    assert one_cell(doc(faults={"schedule": [step(fault="partition", params=params)]}))


def test_group_node_beyond_brokers():
    params = {"mode": "groups", "groups": [[1], [2, 7]]}
    rejects(
        doc(faults={"schedule": [step(fault="partition", params=params)]}),
        "faults.schedule[0].params.groups",
        "node 7",
    )


def test_param_defaults_are_filled_in():
    kinds = ["partition", "loss", "slow", "stop"]
    steps = [step(at_s=1 + 6 * i, fault=kind) for i, kind in enumerate(kinds)]
    cell = one_cell(doc(faults={"schedule": steps}))
    # As spec.json writes them: defaults filled in, optional params nobody set left out.
    assert [s.model_dump()["params"] for s in schedule_for(cell, 0)] == [
        {"mode": "from-brokers"},
        {"percent": 30, "to": ["all"]},
        {"rate_kbit": 256},
        {"timeout_s": 60},
    ]


def test_whole_cluster_faults_target_all():
    kill_all = FaultStep.model_validate({"at_s": 1, "fault": "kill-all", "duration_s": 2})
    assert kill_all.target == "all"
    groups = FaultStep(
        at_s=1,
        fault="partition",
        target="leader",
        duration_s=2,
        params={"mode": "groups", "groups": [[1], [2, 3]]},
    )
    assert groups.target == "all"


def test_schedule_and_generate_are_exclusive():
    generate = {
        "mean_interval_s": 5,
        "faults": ["kill"],
        "targets": ["leader"],
        "duration_s": [1, 2],
    }
    rejects(doc(faults={"schedule": [step()], "generate": generate}), "faults.generate", "not both")


def test_generator_needs_a_time_bound():
    generate = {
        "mean_interval_s": 5,
        "faults": ["kill"],
        "targets": ["leader"],
        "duration_s": [1, 2],
    }
    rejects(
        doc(
            workload={"duration_s": None, "count": 1000, "rate": None},
            faults={"generate": generate},
        ),
        "faults.generate",
        "time bound",
    )


def test_generator_duration_order():
    generate = {
        "mean_interval_s": 5,
        "faults": ["kill"],
        "targets": ["leader"],
        "duration_s": [5, 2],
    }
    rejects(doc(faults={"generate": generate}), "faults.generate.duration_s", "min <= max")


# --- loading -----------------------------------------------------------------------------------


def test_yaml_syntax_error_names_file_and_line(tmp_path: Path):
    path = tmp_path / "broken.yaml"
    path.write_text("name: broken\nproducer:\n  acks: [all\n")
    with pytest.raises(SpecError) as caught:
        load_experiment(path)
    message = str(caught.value)
    assert str(path) in message
    assert "YAML syntax error" in message
    assert re.search(r":\d+:\d+: ", message)


def test_missing_file(tmp_path: Path):
    with pytest.raises(SpecError, match="no such file"):
        load_experiment(tmp_path / "absent.yaml")


@pytest.mark.parametrize(
    ("text", "fragment"), [("- a\n- b\n", "not a list"), ("", "empty"), ("42\n", "not a int")]
)
def test_document_must_be_a_mapping(tmp_path: Path, text: str, fragment: str):
    path = tmp_path / "odd.yaml"
    path.write_text(text)
    with pytest.raises(SpecError, match=fragment):
        load_experiment(path)


def test_duplicate_yaml_key_is_rejected(tmp_path: Path):
    path = tmp_path / "dup.yaml"
    path.write_text("name: dup\nproducer:\n  acks: all\nproducer:\n  acks: '1'\n")
    with pytest.raises(SpecError, match="duplicate key 'producer'"):
        load_experiment(path)


def test_yaml_merge_keys_may_be_overridden(tmp_path: Path):
    path = tmp_path / "merge.yaml"
    path.write_text(
        "name: merge\n"
        "kafka: {broker_config: &common {num.io.threads: 8, num.network.threads: 3}}\n"
        "topic:\n  config:\n    <<: *common\n    num.io.threads: 4\n"
    )
    spec = load_experiment(path)
    assert spec.topic.config == {"num.io.threads": 4, "num.network.threads": 3}


def test_every_problem_is_reported_as_path_and_reason(tmp_path: Path):
    path = tmp_path / "two.yaml"
    path.write_text("name: two\nproducer: {acks: 2}\ntopic: {partitions: 0}\n")
    with pytest.raises(SpecError) as caught:
        load_experiment(path)
    assert sorted(path for path, _ in caught.value.problems) == [
        "producer.acks",
        "topic.partitions",
    ]
    assert "\n  producer.acks: " in str(caught.value)
