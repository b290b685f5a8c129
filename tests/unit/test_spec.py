"""Unit tests for harness.experiment: experiment files, validation, matrix, schedules."""

from __future__ import annotations

import copy
import itertools
import re
from pathlib import Path
from typing import Any

import pytest

from harness.experiment.load import load_experiment, parse_experiment
from harness.experiment.matrix import Cell, expand
from harness.experiment.plan import (
    cell_config,
    fault_class,
    producer_settings,
    schedule_for,
    topic_settings,
)
from harness.experiment.problems import SpecError
from harness.experiment.spec import Experiment, FaultStep

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
SAFE_NAME = re.compile(r"^[A-Za-z0-9=._-]+$")

BASE: dict[str, Any] = {
    "name": "t",
    "topic": {"partitions": 3, "replication_factor": 3, "min_insync_replicas": 2},
    "producer": {"acks": "all"},
    "workload": {"rate": 100, "duration_s": 30},
}


def doc(**sections: Any) -> dict[str, Any]:
    """BASE with the given top-level sections merged in (one level deep)."""
    data = copy.deepcopy(BASE)
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return data


def rejects(data: dict[str, Any], *fragments: str) -> str:
    """Assert parsing fails with a message containing every fragment; return the message."""
    with pytest.raises(SpecError) as caught:
        parse_experiment(data, source="exp.yaml")
    message = str(caught.value)
    assert message.startswith("exp.yaml"), message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in:\n{message}"
    return message


def step(**fields: Any) -> dict[str, Any]:
    return {"at_s": 5, "fault": "kill", "target": "leader", "duration_s": 5, **fields}


def one_cell(data: dict[str, Any]) -> Cell:
    (cell,) = expand(parse_experiment(data))
    return cell


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


# --- matrix ------------------------------------------------------------------------------------


def test_list_axes_name_cells_by_last_component_in_order():
    data = doc(matrix={"producer.acks": [0, 1, -1], "topic.min_insync_replicas": [1, 2]})
    names = [cell.name for cell in expand(parse_experiment(data))]
    assert names == [
        "acks=0__min_insync_replicas=1",
        "acks=0__min_insync_replicas=2",
        "acks=1__min_insync_replicas=1",
        "acks=1__min_insync_replicas=2",
        "acks=all__min_insync_replicas=1",
        "acks=all__min_insync_replicas=2",
    ]


def test_named_variants_apply_overrides():
    data = doc(
        matrix={
            "config": {
                "ap": {"producer.acks": "1", "topic.min_insync_replicas": 1},
                "cp": {"producer.acks": "all", "topic.min_insync_replicas": 2},
            }
        }
    )
    ap, cp = expand(parse_experiment(data))
    assert (ap.name, ap.axes) == ("config=ap", {"config": "ap"})
    assert (ap.spec.producer.acks, ap.spec.topic.min_insync_replicas) == ("1", 1)
    assert (cp.spec.producer.acks, cp.spec.topic.min_insync_replicas) == ("all", 2)


def test_override_into_config_map_and_section_merge():
    data = doc(
        producer={"linger_ms": 7},
        matrix={
            "topic.config.retention.ms": [60000],
            "variant": {"v": {"producer": {"acks": "1"}}},
        },
    )
    (cell,) = expand(parse_experiment(data))
    assert cell.name == "retention.ms=60000__variant=v"
    assert topic_settings(cell.spec)["retention.ms"] == "60000"
    assert (cell.spec.producer.acks, cell.spec.producer.linger_ms) == ("1", 7)


def test_matrix_override_of_missing_path():
    rejects(
        doc(matrix={"producer.ack": ["1"]}),
        "matrix.producer.ack",
        "'producer.ack' does not exist",
        "did you mean 'producer.acks'",
    )
    rejects(
        doc(matrix={"config": {"ap": {"topik.partitions": 1}}}),
        "matrix.config.ap",
        "'topik.partitions' does not exist",
    )
    rejects(
        doc(matrix={"producer.acks.value": ["1"]}), "matrix.producer.acks.value", "single value"
    )


@pytest.mark.parametrize(
    "matrix",
    [
        {"producer.acks": []},
        {"config": {}},
        {"config": "ap"},
        {"name": ["x"]},
        {"config": {"ap": ["producer.acks"]}},
    ],
)
def test_malformed_matrix(matrix: dict[str, Any]):
    rejects(doc(matrix=matrix), "matrix.")


def test_bad_override_names_axis_variant_and_field():
    data = doc(matrix={"config": {"ok": {}, "broken": {"producer.acks": 2}}})
    message = rejects(
        data,
        "matrix cell 'config=broken'",
        "producer.acks",
        "matrix axis 'config', variant 'broken'",
    )
    assert "config=ok" not in message


def test_cross_field_rule_after_override_names_axis():
    data = doc(producer={"enable_idempotence": True}, matrix={"producer.acks": ["all", "1"]})
    rejects(
        data,
        "matrix cell 'acks=1'",
        "producer.enable_idempotence",
        "matrix axis 'producer.acks', value '1'",
    )


def test_fault_partition_checked_after_expansion():
    data = doc(faults={"schedule": [step(partition=2)]}, matrix={"topic.partitions": [3, 1]})
    rejects(data, "matrix cell 'partitions=1'", "faults.schedule[0].partition")


def test_cell_names_are_filesystem_safe_and_unique():
    data = doc(
        matrix={
            "description": ["a b/c", "x:y*z", ""],
            "odd axis/name": {"v 1": {}, "v/2": {}},
            "topic.config.cleanup.policy": ["delete"],
            "producer.config.client.rack": ["r1"],
        }
    )
    cells = expand(parse_experiment(data))
    names = [cell.name for cell in cells]
    assert len(names) == len(set(names)) == 6
    assert all(SAFE_NAME.match(name) and len(name) <= 200 for name in names)
    assert names[0] == (
        "description=a-b-c__odd-axis-name=v-1__cleanup.policy=delete__client.rack=r1"
    )


def test_axes_sharing_a_last_component_use_full_paths():
    data = doc(
        matrix={
            "topic.config.compression.type": ["lz4"],
            "producer.config.compression.type": ["zstd"],
        }
    )
    (cell,) = expand(parse_experiment(data))
    assert cell.name == ("topic.config.compression.type=lz4__producer.config.compression.type=zstd")


def test_values_that_collapse_to_one_name_are_rejected():
    rejects(doc(matrix={"producer.acks": [-1, "all"]}), "two cells are named 'acks=all'")


def test_structured_list_values_are_numbered():
    schedules = [[step()], [step(fault="pause")]]
    cells = expand(parse_experiment(doc(matrix={"faults.schedule": schedules})))
    assert [cell.name for cell in cells] == ["schedule=v1", "schedule=v2"]


# --- schedules ---------------------------------------------------------------------------------


GENERATE = {
    "mean_interval_s": 4,
    "faults": ["kill", "pause", "kill-all", "partition"],
    "targets": ["leader", "follower", "node:2"],
    "duration_s": [1, 3],
    "partition": 1,
}


def generated_cell(duration_s: float = 120) -> Cell:
    return one_cell(doc(workload={"duration_s": duration_s}, faults={"generate": GENERATE}))


def test_generated_schedule_is_deterministic_per_seed():
    cell = generated_cell()
    first = schedule_for(cell, 7)
    assert first == schedule_for(cell, 7)
    assert first != schedule_for(cell, 8)
    assert len(first) > 5


@pytest.mark.parametrize("seed", range(20))
def test_generated_schedule_fits_and_never_overlaps(seed: int):
    steps = schedule_for(generated_cell(60), seed)
    for before, after in itertools.pairwise(steps):
        assert after.at_s >= before.end_s - 1e-9
    for fault in steps:
        assert fault.end_s < 60
        assert 1 <= fault.duration_s <= 3
        assert fault.fault in GENERATE["faults"]
        assert fault.partition == 1
        expected = ["all"] if fault.fault == "kill-all" else GENERATE["targets"]
        assert fault.target in expected


def test_generated_schedule_from_count_and_rate():
    cell = one_cell(
        doc(
            workload={"duration_s": None, "count": 3000, "rate": 100}, faults={"generate": GENERATE}
        )
    )
    steps = schedule_for(cell, 1)
    assert steps and all(fault.end_s < 30 for fault in steps)


def test_explicit_schedule_is_returned_in_file_order():
    cell = one_cell(doc(faults={"schedule": [step(at_s=2, fault="pause"), step(at_s=12)]}))
    assert [fault.fault for fault in schedule_for(cell, 99)] == ["pause", "kill"]


def test_start_times_out_of_file_order_are_refused():
    rejects(
        doc(faults={"schedule": [step(at_s=12), step(at_s=2, fault="pause")]}),
        "faults.schedule[1].at_s",
        "steps run in file order",
    )


# --- fault classes, config and settings --------------------------------------------------------


def fault(**fields: Any) -> FaultStep:
    return FaultStep.model_validate(step(**fields))


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        ([], "none"),
        ([fault()], "leader-kill"),
        ([fault(), fault(at_s=20)], "leader-kill"),
        ([fault(fault="partition")], "leader-partition"),
        ([fault(fault="partition", params={"mode": "full"})], "leader-isolate"),
        (
            [fault(fault="partition", params={"mode": "groups", "groups": [[1], [2, 3]]})],
            "all-partition-groups",
        ),
        ([fault(fault="kill-all")], "all-kill"),
        ([fault(target="node:2")], "node-kill"),
        ([fault(target="follower", fault="loss")], "follower-loss"),
        ([fault(target="controller", fault="stop")], "controller-stop"),
        ([fault(target="random", fault="pause")], "random-pause"),
        ([fault(fault="power-loss", target="all")], "all-power-loss"),
        ([fault(fault="power-loss")], "leader-power-loss"),
        ([fault(fault="rolling-restart", target="all")], "all-rolling-restart"),
        ([fault(), fault(at_s=20, fault="power-loss", target="all")], "all-power-loss"),
        ([fault(), fault(fault="stop")], "mixed"),
        ([fault(), fault(target="follower")], "mixed"),
        ([fault(fault="partition"), fault(fault="partition", params={"mode": "full"})], "mixed"),
    ],
)
def test_fault_class(steps: list[FaultStep], expected: str):
    assert fault_class(steps) == expected


def test_cell_config_is_flat_and_complete():
    cell = one_cell(
        doc(
            producer={"acks": -1, "enable_idempotence": True, "max_in_flight": 3},
            topic={"unclean_leader_election": True},
        )
    )
    assert cell_config(cell, []).as_json() == {
        "acks": "all",
        "min_insync_replicas": 2,
        "unclean_leader_election": True,
        "enable_idempotence": True,
        "max_in_flight": 3,
        "replication_factor": 3,
        "partitions": 3,
        "fault_class": "none",
        "kafka_version": "4.3.1",
        "kafka_mode": "kraft",
        "rate": 100,
        "message_bytes": 100,
    }


def test_producer_settings_mapping():
    spec = parse_experiment(
        doc(
            producer={
                "acks": 1,
                "max_in_flight": 1,
                "retries": 3,
                "linger_ms": 0,
                "request_timeout_ms": 2000,
                "message_timeout_ms": 9000,
                "config": {"compression.type": "lz4", "socket.nagle.disable": True},
            }
        )
    )
    assert producer_settings(spec) == {
        "acks": "1",
        "enable.idempotence": False,
        "max.in.flight.requests.per.connection": 1,
        "retries": 3,
        "linger.ms": 0,
        "request.timeout.ms": 2000,
        "message.timeout.ms": 9000,
        "compression.type": "lz4",
        "socket.nagle.disable": True,
    }
    assert "retries" not in producer_settings(parse_experiment(doc()))


def test_topic_settings_are_strings():
    spec = parse_experiment(
        doc(
            topic={
                "min_insync_replicas": 1,
                "unclean_leader_election": True,
                "config": {"retention.ms": 600000, "preallocate": False},
            }
        )
    )
    assert topic_settings(spec) == {
        "min.insync.replicas": "1",
        "unclean.leader.election.enable": "true",
        "retention.ms": "600000",
        "preallocate": "false",
    }


def test_experiment_models_are_immutable():
    spec = parse_experiment(doc())
    assert isinstance(spec, Experiment)
    with pytest.raises(ValueError):
        spec.producer.acks = "0"  # type: ignore[misc]
