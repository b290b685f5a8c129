"""An experiment file for one repetition, rebuilt from its spec.json: the cell it ran (Kafka,
topic, producer and workload as resolved), its seed, and a schedule (the shrinker's).

spec.json holds the producer's and topic's settings by Kafka's names, as the client and broker
were given them; they go back to the fields that own them (fields.py), the rest to `config`.
What spec.json does not record takes the file's default (faults.final_heal_timeout_s of a run
from before spec.json held it); a run from before spec.json held faults.after_workload_s gets
the time its schedule acted after the workload.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from harness.experiment.fields import PRODUCER_KEY_FIELDS, TOPIC_KEY_FIELDS
from harness.experiment.load import parse_experiment
from harness.experiment.matrix import Cell, expand
from harness.experiment.model import Experiment, FaultStep, KafkaSpec
from harness.limits import MAX_NAME
from harness.rundir.spec import RunSpec

__all__ = ["cell_of_run", "experiment_document", "steps_of_run"]

_INTEGER_FIELDS = {"max_in_flight", "retries", "linger_ms", "request_timeout_ms"}
_INTEGER_FIELDS |= {"message_timeout_ms", "min_insync_replicas"}
_BOOLEAN_FIELDS = {"enable_idempotence", "unclean_leader_election"}


def _typed(field: str, value: object) -> object:
    """A setting as its field takes it: booleans and whole numbers from Kafka's text."""
    if field in _BOOLEAN_FIELDS and isinstance(value, str):
        return value.strip().lower() == "true"
    if field in _INTEGER_FIELDS and isinstance(value, str):
        return int(value)
    if field == "acks":
        return str(value)
    return value


def _by_field(settings: dict[str, object], fields: dict[str, str]) -> dict[str, Any]:
    """`settings` (Kafka's names) as a section: the owned keys as fields, the rest as config."""
    section: dict[str, Any] = {}
    config: dict[str, object] = {}
    for key, value in settings.items():
        if key in fields:
            section.setdefault(fields[key], _typed(fields[key], value))
        else:
            config[key] = value
    return {**section, "config": config} if config else section


def _after_workload_s(spec: RunSpec, schedule: Sequence[FaultStep]) -> float:
    """faults.after_workload_s as the run had it; for a run from before spec.json held it, the
    whole seconds past the workload's end that its schedule's last start or planned heal lies
    within (0 when none lies past it)."""
    if spec.after_workload_s is not None:
        return spec.after_workload_s
    duration = spec.workload.get("duration_s")
    if not isinstance(duration, int | float):
        return 0.0
    reach = max((s.end_s or s.at_s or 0.0 for s in schedule), default=0.0)
    past = reach - duration
    return float(math.floor(past) + 1) if past >= 0 else 0.0


def experiment_document(
    spec: RunSpec, schedule: Sequence[FaultStep], name: str | None = None
) -> dict[str, Any]:
    """The experiment file (as a mapping) that runs `spec`'s cell once with its seed and
    `schedule`, named `name` (default: the experiment's, '-shrunk' added) in lowercase, each
    run of characters a name may not hold made one '-'."""
    kafka = {k: v for k, v in spec.kafka.model_dump().items() if k in KafkaSpec.model_fields}
    producer = _by_field(dict(spec.producer), PRODUCER_KEY_FIELDS)
    topic = {
        "partitions": spec.topic.partitions,
        "replication_factor": spec.topic.replication_factor,
        **_by_field(dict(spec.topic.config), TOPIC_KEY_FIELDS),
    }
    title = re.sub(r"[^a-z0-9_-]+", "-", (name or f"{spec.experiment or 'run'}-shrunk").lower())
    return {
        "name": title[:MAX_NAME],
        "description": f"cell {spec.cell} of {spec.experiment}, seed {spec.seed}",
        "kafka": kafka,
        "topic": {k: v for k, v in topic.items() if v is not None},
        "producer": producer,
        "workload": dict(spec.workload),
        "faults": {
            "schedule": [s.model_dump(by_alias=True, exclude_none=True) for s in schedule],
            # A generated schedule's replay runs as it did (the nodes held are left out).
            **({"disjoint": True} if spec.disjoint else {}),
            **({"after_workload_s": after} if (after := _after_workload_s(spec, schedule)) else {}),
            **(
                {"final_heal_timeout_s": spec.final_heal_timeout_s}
                if spec.final_heal_timeout_s is not None
                else {}
            ),
        },
        "seed": spec.seed if spec.seed is not None else 42,
        "repetitions": 1,
    }


def steps_of_run(spec: RunSpec) -> list[FaultStep]:
    """The fault steps the repetition ran (spec.json's schedule, validated again)."""
    return [FaultStep.model_validate(step) for step in spec.schedule]


def cell_of_run(spec: RunSpec, schedule: Sequence[FaultStep] | None = None) -> Cell:
    """The one cell of experiment_document(spec, schedule), validated as a file is (SpecError
    naming the field when spec.json cannot make a valid experiment)."""
    steps = steps_of_run(spec) if schedule is None else schedule
    experiment: Experiment = parse_experiment(experiment_document(spec, steps), "spec.json")
    (cell,) = expand(experiment)
    return cell
