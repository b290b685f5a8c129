"""A node's KRaft controller vote, read from its quorum-state file (through a fake container)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from harness.platform.node import KafkaNode


def node_reading(code: int, output: str) -> KafkaNode:
    container = SimpleNamespace(exec_run=lambda argv: SimpleNamespace(
        exit_code=code, output=output.encode()
    ))  # fmt: skip
    wrapper = SimpleNamespace(get_wrapped_container=lambda: container)  # a Testcontainers one
    return KafkaNode(1, 0, wrapper)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("output", "vote"),
    [
        (json.dumps({"data": {"leaderId": 2, "leaderEpoch": 5}}), (5, 2)),
        (json.dumps({"leaderId": 3, "leaderEpoch": 1}), (1, 3)),  # older releases: no "data"
        (json.dumps({"data": {"leaderId": -1, "leaderEpoch": 4}}), None),  # no leader yet
        ("", None),  # read while the file was replaced
        ('{"data": {"leaderId": 2, "lea', None),  # torn
    ],
)
def test_a_vote_is_read_from_the_quorum_state_and_an_unreadable_one_is_none(output, vote):
    assert node_reading(0, output).controller_vote() == vote


def test_a_missing_quorum_state_is_no_vote():
    assert node_reading(1, "cat: no such file").controller_vote() is None
