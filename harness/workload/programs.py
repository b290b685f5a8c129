"""The program a contract client runs in each role: the Java recorder and member compiled
against kafka-clients, a family's program (franz-go, Sarama, KafkaJS, aiokafka, confluent-kafka
at a release) with its role word, or a user's command speaking the contract with the role word.
All of them take the same arguments and print the same lines (docs/clients.md, "The
client-program contract"), so the producer, the transactional producer and the group member
drive any of them alike.
"""

from __future__ import annotations

from harness.experiment.clients import ClientSpec
from harness.platform.client_builds import family_program
from harness.settings import Settings
from harness.workload.java_client import java_client, java_member
from harness.workload.processes import BuiltProgram

__all__ = ["group_member", "producer_program"]


def producer_program(client: ClientSpec, settings: Settings | None = None) -> BuiltProgram:
    """The producer's program of a client that runs one (`client.runs_program`), built if not
    cached."""
    assert client.runs_program, f"{client.label} is not a contract program"
    if client.kind == "java" and client.version:
        return java_client(client.version, settings)
    return _contract_role(client, "produce", settings)


def group_member(client: ClientSpec, settings: Settings | None = None) -> BuiltProgram | None:
    """The program a consumer group's members run with the workload's `client`: the Java
    member, the family's program at the client's version or a contract command; None
    (librdkafka members in the harness) for the in-process librdkafka recorder and a
    verifiable-protocol command."""
    if not client.runs_program:
        return None
    if client.kind == "java" and client.version:
        return java_member(client.version, settings)
    return _contract_role(client, "consume", settings)


def _contract_role(client: ClientSpec, role: str, settings: Settings | None) -> BuiltProgram:
    """A family's program at the client's version, or a contract command's argv, in `role`
    (the argument after the program)."""
    if client.family is None:  # a command speaking the contract: the user's program as is
        assert client.argv, f"{client.label} has no argv"
        return BuiltProgram("-", (*client.argv, role), client.label)
    assert client.version
    argv = (*family_program(client.family.source, client.version, settings), role)
    return BuiltProgram(client.version, argv, client.label)
