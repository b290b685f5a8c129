"""The pre-flight check that the broker image has what the experiment's faults run."""

from __future__ import annotations

import pytest

from harness.chaos.faults import FAULT_TYPES, FaultError, check_tools


class FakeNode:
    """Answers `sh -c 'command -v ...'` as an image with only `present` would."""

    def __init__(self, present: set[str]):
        self.present = present
        self.commands: list[str] = []

    def exec(self, argv: list[str]) -> tuple[int, str]:
        script = argv[-1]
        self.commands.append(script)
        wanted = [part.split()[-1] for part in script.split(" && ")]
        return (0 if all(tool in self.present for tool in wanted) else 1), ""

    net_exec = exec  # the node's network namespace: the node itself, in these fakes


def test_faults_without_tools_ask_nothing():
    node = FakeNode(set())
    check_tools(node, [FAULT_TYPES[k] for k in ("kill", "stop", "pause", "power-loss")], "img")
    assert node.commands == []


def test_an_image_with_the_tools_passes():
    node = FakeNode({"iptables", "tc"})
    check_tools(node, [FAULT_TYPES["partition"], FAULT_TYPES["slow"]], "img")
    assert node.commands == ["command -v iptables && command -v tc"]


def test_a_missing_tool_is_named_with_the_faults_and_the_fix():
    node = FakeNode({"tc"})
    with pytest.raises(FaultError) as caught:
        check_tools(node, [FAULT_TYPES["partition"], FAULT_TYPES["kill"]], "apache/kafka:4.3.1")
    message = str(caught.value)
    assert "apache/kafka:4.3.1 lacks iptables" in message
    assert "partition faults" in message and "locally built image" in message
