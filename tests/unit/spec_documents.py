"""Experiment documents for the unit tests of harness.experiment: a valid base, merged
sections, steps, one-cell expansion, and the assertion that a document is refused."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest

from harness.experiment.load import parse_experiment
from harness.experiment.matrix import Cell, expand
from harness.experiment.problems import SpecError

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
