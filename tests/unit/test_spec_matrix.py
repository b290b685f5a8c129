"""Unit tests for harness.experiment: matrix expansion and cell names, generated and explicit
schedules, fault classes, a cell's config and the producer and topic settings."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.experiment.load import parse_experiment
from harness.experiment.matrix import Cell, expand
from harness.experiment.model import Experiment, FaultStep
from harness.experiment.plan import (
    cell_config,
    fault_class,
    producer_settings,
    schedule_for,
    topic_settings,
)
from tests.unit.spec_documents import SAFE_NAME, doc, one_cell, rejects, step

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


@pytest.mark.parametrize("seed", range(5))
def test_generated_steps_carry_the_params_of_their_kind_and_draw_as_without(seed: int):
    params = {"pause": {}, "partition": {"mode": "full"}}
    with_params = one_cell(
        doc(workload={"duration_s": 120}, faults={"generate": {**GENERATE, "params": params}})
    )
    drawn, plain = schedule_for(with_params, seed), schedule_for(generated_cell(), seed)
    # The same draws: params change what a step does, never when or where it runs.
    assert [(f.at_s, f.fault, f.target, f.duration_s) for f in drawn] == [
        (f.at_s, f.fault, f.target, f.duration_s) for f in plain
    ]
    for fault in drawn:
        if fault.fault == "partition":
            assert fault.params.model_dump()["mode"] == "full"
        else:
            assert fault.params == type(fault.params)()  # its kind's defaults


@pytest.mark.parametrize(
    ("params", "problem"),
    [
        ({"delay": {"delay_ms": 10}}, "params for delay, which faults does not draw"),
        ({"partition": {"mode": "sideways"}}, "params of partition: "),
    ],
)
def test_generator_params_are_checked_as_a_steps_are(params, problem):
    rejects(doc(faults={"generate": {**GENERATE, "params": params}}), problem)


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


@given(st.lists(st.tuples(st.integers(0, 30), st.integers(1, 10)), min_size=2, max_size=5))
def test_a_step_starting_while_the_one_before_is_in_force_is_refused_with_the_fix(timed):
    """Oracle: steps run one after another, each healed after its duration_s, so a start time
    inside the previous step's [at_s, at_s + duration_s) is refused; one in order is not."""
    starts = sorted(at for at, _ in timed)
    lengths = [length for _, length in timed]
    steps = [step(at_s=at, duration_s=n) for at, n in zip(starts, lengths, strict=True)]
    overlapping = [i for i in range(1, len(steps)) if starts[i] < starts[i - 1] + lengths[i - 1]]
    data = doc(workload={"duration_s": 60}, faults={"schedule": steps})
    if not overlapping:
        one_cell(data)
        return
    first = overlapping[0]
    rejects(
        data, f"faults.schedule[{first}].at_s", f"while step {first - 1} is in force", "as: name"
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


@pytest.mark.parametrize(
    ("topic_config", "broker_config", "fsynced"),
    [
        ({"flush.messages": 1}, {}, True),
        ({"flush.messages": "1"}, {}, True),
        ({}, {"log.flush.interval.messages": 1}, True),
        # The topic's own setting overrides the brokers' default, either way.
        ({"flush.messages": 1000}, {"log.flush.interval.messages": 1}, False),
        ({"flush.messages": 1}, {"log.flush.interval.messages": 1000}, True),
        ({"flush.messages": 2}, {}, False),
        ({}, {}, False),
    ],
)
def test_fsync_each_message_in_the_config_only_when_every_append_is_fsynced(
    topic_config: dict[str, Any], broker_config: dict[str, Any], fsynced: bool
):
    cell = one_cell(
        doc(
            topic={"config": topic_config},
            kafka={"version": "4.3.1", "broker_config": broker_config},
        )
    )
    config = cell_config(cell, []).as_json()
    # Absent unless true: the spec.json of every other cell keeps its keys.
    assert config.get("fsync_each_message") is (True if fsynced else None)


@pytest.mark.parametrize(
    "faults",
    [
        {"schedule": [step(fault="power-loss", target="all")]},
        {"generate": {**GENERATE, "faults": ["kill", "power-loss"]}},
    ],
)
def test_the_power_loss_model_is_refused_where_every_append_is_fsynced(faults):
    # The model cuts past the last recovery-point checkpoint: writes fsynced since would be
    # lost, and the cell is held to "none". The disk layer's lose-unsynced is the real one.
    fsynced = doc(topic={"config": {"flush.messages": 1}}, faults=faults)
    rejects(fsynced, "the power-loss model cuts writes", "use the disk layer's lose-unsynced")
    one_cell(doc(faults=faults))  # Kafka's default flushing: the model is what it models
    lose = {"schedule": [step(fault="lose-unsynced", target="all")]}
    one_cell(doc(topic={"config": {"flush.messages": 1}}, faults=lose))


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
