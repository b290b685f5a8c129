"""The rules of a dynamic KRaft quorum (KIP-853) and of the faults that change its voters
(harness.chaos.faults.remove_controller), each yielding (field path, problem) pairs like
rules.py."""

from __future__ import annotations

from collections.abc import Iterator

from harness.chaos.faults import FAULT_TYPES
from harness.experiment.fields import BOUND_TARGET, QUORUM_TARGETS
from harness.experiment.model import Experiment
from harness.experiment.problems import Problem
from harness.limits import shown
from harness.platform.versions import Feature, Mode


def controller_config_problems(spec: Experiment) -> Iterator[Problem]:
    """kafka.controller_config configures controller-only nodes, which kraft-dedicated has."""
    mode = spec.kafka.effective_mode()
    if spec.kafka.controller_config and mode not in (Mode.KRAFT_DEDICATED, None):
        reason = (
            f"configures controller-only nodes, which this cell ({mode}) has none of. Fix: set "
            "kafka.mode: kraft-dedicated, or move the settings to kafka.broker_config."
        )
        yield "kafka.controller_config", reason


def dynamic_quorum_problems(spec: Experiment) -> Iterator[Problem]:
    """A dynamic quorum is formatted by the harness's image on dedicated controllers (3.9+)."""
    kafka = spec.kafka
    if kafka.effective_mode() is not Mode.KRAFT_DEDICATED:
        reason = (
            "a dynamic quorum needs dedicated controllers: set kafka.mode kraft-dedicated "
            f"(this cell runs {kafka.effective_mode()})"
        )
        yield "kafka.quorum", reason
    if kafka.image:
        reason = (
            "a dynamic quorum is formatted by the harness's own image (its entrypoint passes "
            "--initial-controllers to the storage tool); remove kafka.image"
        )
        yield "kafka.quorum", reason
    if lacking := kafka.lacks(Feature.DYNAMIC_QUORUM):
        yield "kafka.quorum", f"{lacking} Fix: kafka.version 3.9.0 or later, or quorum static."


def quorum_fault_problems(
    spec: Experiment, faults: list[str], targets: list[str], fault_at: str, target_at: str
) -> Iterator[Problem]:
    """A change of the quorum's voters needs a dynamic quorum, and a schedule's step aims it
    at one dedicated controller."""
    changes = [f for f in faults if f in FAULT_TYPES and FAULT_TYPES[f].needs_dynamic_quorum]
    if not changes:
        return
    if spec.kafka.quorum != "dynamic":
        reason = (
            f"{changes[0]} changes the KRaft quorum's voters, which only a dynamic quorum allows: "
            "set kafka.quorum dynamic (with kafka.mode kraft-dedicated, Kafka 3.9+)"
        )
        yield fault_at, reason
    if len(faults) == 1 and targets[0] not in QUORUM_TARGETS and not BOUND_TARGET.match(targets[0]):
        reason = (
            f"{changes[0]} takes out one dedicated KRaft controller: target "
            f"{' or '.join(QUORUM_TARGETS)}, not {shown(targets[0])}"
        )
        yield target_at, reason
