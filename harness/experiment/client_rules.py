"""The rules of workload.client: what each kind of client can be asked to do (its settings,
the roles harness/experiment/client_families.py gives it, how many processes run it)."""

from __future__ import annotations

from collections.abc import Iterator

from harness.experiment.client_config import librdkafka_refusal
from harness.experiment.client_families import FAMILIES, Role
from harness.experiment.model import Experiment
from harness.experiment.problems import Problem
from harness.platform.versions import Feature, lacks
from harness.rundir.release import KafkaVersion

__all__ = ["client_problems"]


def client_problems(spec: Experiment) -> Iterator[Problem]:
    """What the workload's client cannot do as the file asks: its settings, its roles, its
    process count, its ending."""
    client, workload = spec.workload.client, spec.workload
    if client.kind == "librdkafka" and not client.runs_program:
        if refused := librdkafka_refusal(spec.producer.config):
            key, why = refused
            yield f"producer.config.{key}", f"librdkafka refuses it: {why}"
        return
    yield from _role_rules(spec)
    java_version = client.version if client.kind == "java" and client.version else None
    if (
        workload.transactions is not None
        and java_version is not None
        and (lacking := lacks(KafkaVersion.parse(java_version), Feature.TRANSACTIONS))
    ):
        reason = f"the java client {java_version}: {lacking} Fix: use java:0.11.0.0 or later"
        yield "workload.client", reason
    verifiable = client.kind == "command" and not client.runs_program
    if workload.producers != 1 and verifiable:
        reason = (
            "a verifiable-protocol command runs as one producer process (its message ids "
            "would collide); Fix: set workload.producers: 1, or give it protocol: contract"
        )
        yield "workload.producers", reason
    if verifiable and workload.duration_s is None and workload.count is None:
        yield "workload.count", "a command client needs workload.count or duration_s"


def _role_rules(spec: Experiment) -> Iterator[Problem]:
    """Each role the workload asks of its client must be one the client plays
    (harness/experiment/client_families.py); the problem names the client, the role and the
    clients that play it."""
    client, workload = spec.workload.client, spec.workload
    if client.kind == "librdkafka" and not client.runs_program:
        return  # the in-process recorder plays every role
    asked = [
        (Role.TRANSACTIONS, "workload.transactions", workload.transactions is not None),
        # A command's group members are the harness's librdkafka ones.
        (Role.MEMBER, "workload.consumers", bool(workload.consumers) and client.runs_program),
    ]
    for role, where, wanted in asked:
        if wanted and role not in client.roles:
            players = (
                ", ".join(
                    dict.fromkeys(
                        ["librdkafka", *(n for n, f in FAMILIES.items() if role in f.roles)]
                    )
                )
                + ", or a command with protocol: contract"
            )
            yield (
                "workload.client",
                (
                    f"{client.label} does not play the {role.value} role that {where} asks for; "
                    f"Fix: drop {where} or use a client that plays it: {players}"
                ),
            )
