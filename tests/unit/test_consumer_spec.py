"""workload.consumers and the consumer faults in experiment files: validation messages, fault
classes and the flat config (no Docker)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from harness.experiment.load import parse_experiment
from harness.experiment.matrix import expand
from harness.experiment.plan import (
    NEIGHBOURS_RATE,
    cell_config,
    fault_class,
    repetition_seconds,
    schedule_for,
)
from harness.rundir.records import CommitMode
from harness.workload.consumer_group.java import member_argv
from harness.workload.consumer_group.librdkafka import (
    SESSION_TIMEOUT_MS,
    ConsumerTask,
    consumer_config,
)
from harness.workload.processes import BuiltProgram
from tests.unit.spec_documents import doc, rejects, step

GROUP = {"rate": 100, "duration_s": 30, "consumers": 3, "consumer_commit": "before-process"}


def consumer_step(**fields: Any) -> dict[str, Any]:
    return step(**{"fault": "consumer-kill", "target": "consumer-1", **fields})


def test_a_consumer_fault_needs_a_group():
    rejects(
        doc(faults={"schedule": [consumer_step()]}),
        "faults.schedule[0].fault",
        "workload.consumers is 0",
    )


def test_a_consumer_fault_targets_members_only():
    rejects(
        doc(workload=GROUP, faults={"schedule": [consumer_step(target="leader")]}),
        "faults.schedule[0].target",
        "target `consumer` or consumer-<i>, not 'leader'",
    )


def test_a_broker_fault_cannot_target_a_member():
    rejects(
        doc(workload=GROUP, faults={"schedule": [step(target="consumer-0")]}),
        "faults.schedule[0].target",
        "only the consumer faults",
        "kill acts on brokers",
    )


def test_a_member_beyond_the_group_does_not_exist():
    rejects(
        doc(workload=GROUP, faults={"schedule": [consumer_step(target="consumer-3")]}),
        "'consumer-3' does not exist: workload.consumers is 3",
    )


def test_an_unknown_commit_mode_names_the_modes():
    rejects(doc(workload={**GROUP, "consumer_commit": "sometimes"}), "workload.consumer_commit")


def test_a_generator_may_not_mix_member_and_broker_targets():
    generate = {
        "mean_interval_s": 5,
        "faults": ["consumer-pause"],
        "targets": ["consumer", "leader"],
        "duration_s": [1, 2],
    }
    rejects(doc(workload=GROUP, faults={"generate": generate}), "faults.generate.targets")


def test_consumer_faults_make_consumer_fault_classes_and_the_config_names_the_mode():
    schedule = [
        consumer_step(at_s=2, target="consumer"),
        step(at_s=9, fault="consumer-rebalance", target="consumer-2"),
    ]
    experiment = parse_experiment(doc(workload=GROUP, faults={"schedule": schedule}))
    (cell,) = expand(experiment)
    steps = schedule_for(cell, 1)
    assert fault_class(steps[:1]) == "consumer-kill"
    assert fault_class(steps[1:]) == "consumer-rebalance"
    assert fault_class(steps) == "consumer-kill"  # never "mixed": no broker was hit
    leader_kill = parse_experiment(doc(faults={"schedule": [step()]})).faults.schedule
    assert fault_class([*steps, *leader_kill]) == "leader-kill"
    config = cell_config(cell, steps)
    assert (config.consumers, config.consumer_commit) == (3, "before-process")


def test_a_run_without_a_group_keeps_its_config_as_before():
    (cell,) = expand(parse_experiment(doc()))
    assert "consumers" not in cell_config(cell, []).as_json()


def test_the_shipped_experiment_crosses_three_modes_with_two_faults():
    from harness.experiment.load import load_experiment
    from tests.unit.spec_documents import EXPERIMENTS

    cells = expand(load_experiment(EXPERIMENTS / "consumer-commit-modes.yaml"))
    modes = {cell.spec.workload.consumer_commit for cell in cells}
    assert modes == {"auto", "after-process", "before-process"}
    classes = {fault_class(schedule_for(cell, 0)) for cell in cells}
    assert classes == {"consumer-kill", "leader-kill"}


NEIGHBOURS = {"groups": 50, "partitions": 10, "monitors": 2, "commit_interval_s": 0.5}


def test_neighbours_need_a_group():
    rejects(
        doc(workload={"rate": 100, "duration_s": 30, "neighbours": NEIGHBOURS}),
        "workload.neighbours",
        "set workload.consumers",
    )


def test_neighbours_are_bounded_and_counted_in_the_estimate():
    rejects(
        doc(workload={**GROUP, "neighbours": {**NEIGHBOURS, "monitors": 17}}),
        "workload.neighbours.monitors",
        "16",
    )
    plain = parse_experiment(doc(workload=GROUP))
    busy = parse_experiment(doc(workload={**GROUP, "neighbours": {**NEIGHBOURS, "groups": 700}}))
    [plain_cell], [busy_cell] = expand(plain), expand(busy)
    assert repetition_seconds(busy_cell) - repetition_seconds(plain_cell) == pytest.approx(
        700 / NEIGHBOURS_RATE
    )


def test_the_members_session_timeout_reaches_both_clients():
    task = ConsumerTask(0, 0, "b:9092", "t", "g", CommitMode.AUTO, Path("/r"), 1, 20)
    assert consumer_config(task)["session.timeout.ms"] == SESSION_TIMEOUT_MS
    longer = dataclasses.replace(task, session_timeout_ms=60_000)
    assert consumer_config(longer)["session.timeout.ms"] == 60_000
    argv = member_argv(BuiltProgram("4.3.1", ("java", "-jar", "m.jar")), longer)
    assert argv[argv.index("--session-timeout-ms") + 1] == "60000"
    rejects(
        doc(workload={**GROUP, "consumer_session_timeout_ms": 5_000}),
        "workload.consumer_session_timeout_ms",
        "6000",
    )
