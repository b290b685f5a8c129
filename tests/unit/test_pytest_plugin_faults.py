"""The pytest plugin's faults and verdicts without a cluster: an inject call is checked as a
schedule step of an experiment file, its handle heals once, and a judgement that cannot be
made is UNKNOWN."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.experiment.model import FaultStep
from harness.platform.topology import Role
from kafka_chaos.testing.chaos import with_steps
from kafka_chaos.testing.errors import ChaosUsageError
from kafka_chaos.testing.faults import FaultHandle, call_text, step_document
from kafka_chaos.testing.options import ChaosOptions
from kafka_chaos.testing.verdict import ChaosVerdict, Judge, Verdict


def inject(
    fault: Any, target: Any, partition: Any = 0, params: Any = None, duration_s: Any = None
) -> FaultStep:
    """The step an inject call on a 3-broker, 3-partition cluster stands for."""
    call = call_text(fault, target, partition, params, duration_s)
    steps = [step_document(fault, target, partition, params, duration_s)]
    return with_steps(ChaosOptions(brokers=3), "t", None, None, steps, call).faults.schedule[-1]


def test_a_valid_call_is_the_schedule_step() -> None:
    step = inject("partition", "leader", 2, {"mode": "from-brokers"}, 5)
    assert (step.fault, step.target, step.partition, step.duration_s) == (
        "partition",
        "leader",
        2,
        5,
    )
    assert step.params.model_dump()["mode"] == "from-brokers"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (("kill", "the-leader"), "  target: unknown target 'the-leader'; use leader, follower"),
        (("pause", "node:7"), "  target: 'node:7' does not exist: kafka.brokers is 3"),
        (("kill", "leader", 3), "  partition: partition 3 does not exist: topic.partitions is 3"),
        (("kil", "leader"), "  fault: "),
        (("slow", "leader", 0, {"delay": 5}), "  params: unknown param 'delay' for fault slow"),
        (("kill", "leader", 0, None, -1), "  duration_s: "),
    ],
)
def test_an_invalid_call_names_the_problem_and_the_fix(call: tuple, message: str) -> None:
    with pytest.raises(ChaosUsageError) as refused:
        inject(*call)
    text = str(refused.value)
    full = (*call, *(0, None, None)[len(call) - 2 :])
    assert text.startswith(f"{call_text(*full)} is invalid:\n")
    assert message in text


def test_heal_steps_and_bound_targets_are_the_handles_job() -> None:
    with pytest.raises(ChaosUsageError, match=r"\.heal\(\)"):
        step_document("heal", "@old", 0, None, None)
    with pytest.raises(ChaosUsageError, match="keep the handle instead"):
        step_document("kill", "@old", 0, None, None)


def test_faults_on_the_harness_consumer_group_are_refused() -> None:
    with pytest.raises(ChaosUsageError, match="consumer-kill acts on the members"):
        step_document("consumer-kill", "consumer", 0, None, None)


class FakeNemesis:
    def __init__(self) -> None:
        self.healed: list[Any] = []
        self.lock = threading.Lock()

    def heal(self, active: Any) -> None:
        with self.lock:
            self.healed.append(active)


def handle(nemesis: FakeNemesis) -> FaultHandle:
    nodes = [
        SimpleNamespace(node_id=2, hostname="kafka-2", role=Role.COMBINED),
        SimpleNamespace(node_id=101, hostname="controller-101", role=Role.CONTROLLER),
    ]
    step = SimpleNamespace(fault="pause", target="leader")
    active = SimpleNamespace(fault_id=3, step=step, fault=SimpleNamespace(nodes=nodes))
    return FaultHandle(nemesis, active, 0)  # type: ignore[arg-type]


def test_a_handle_heals_once_and_names_what_it_hit() -> None:
    nemesis = FakeNemesis()
    fault = handle(nemesis)
    assert (fault.fault, fault.target, fault.fault_id) == ("pause", "leader", 3)
    assert fault.nodes == (2,)
    assert fault.hosts == ("kafka-2", "controller-101")
    with fault:
        assert not fault.healed
    fault.heal()
    assert fault.healed and len(nemesis.healed) == 1
    assert "healed" in repr(fault)


def test_a_handle_heals_after_its_duration() -> None:
    nemesis = FakeNemesis()
    fault = handle(nemesis)
    fault.heal_after(0.05)
    assert fault._timer is not None
    fault._timer.join(5)
    fault.heal()
    assert fault.healed and len(nemesis.healed) == 1


def test_a_judgement_that_fails_is_unknown(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    judge = Judge("local[1]")

    def broken(*_: Any) -> Any:
        raise RuntimeError("no Java")

    monkeypatch.setattr(judge, "_analyse", broken)
    verdict = judge.verdict(tmp_path, tmp_path / "report", "t")
    assert verdict.verdict == Verdict.UNKNOWN and not verdict.ok
    assert verdict.reasons == ("the analysis failed: RuntimeError: no Java",)
    assert verdict.loss is None
    judge.close()


def test_a_verdict_reads_as_one_paragraph(tmp_path: Path) -> None:
    verdict = ChaosVerdict(Verdict.PASS, True, 0, 10, ("kept",), tmp_path, tmp_path / "r.html")
    assert str(verdict).splitlines() == [
        "PASS (the documented guarantee held): loss 0 of 10 acked",
        "  kept",
        f"  run directory: {tmp_path}",
        f"  report: {tmp_path / 'r.html'}",
    ]
    assert verdict.meaning == "the documented guarantee held"
