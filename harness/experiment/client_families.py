"""The client families the harness runs, each a library at any release, and the roles each
plays: the table `kafka-chaos list clients` prints and validation refuses a role against.

A role is what the workload asks of its client: `producer` (plain sends, idempotent or not),
`transactions` (workload.transactions: the transactional producer following the harness's
plan) and `member` (workload.consumers: the consumer group's members). The Java client and the
family programs all speak one command-line contract (docs/clients.md, "The client-program
contract"); the in-process librdkafka recorder and a user's `command` are the other two kinds.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from harness.platform.client_builds import ProgramSource

__all__ = ["FAMILIES", "PROGRAM_FAMILIES", "ClientFamily", "Role"]


class Role(StrEnum):
    """What the workload asks of its client."""

    PRODUCER = "producer"
    TRANSACTIONS = "transactions"
    MEMBER = "member"


ALL_ROLES: Final = frozenset(Role)


@dataclass(frozen=True)
class ClientFamily:
    """One client library the harness builds at any release and runs as a program."""

    name: str  # as workload.client names it: `franz-go:1.22.3`
    language: str  # the toolchain that builds it: go, node, python, java
    package: str  # the library as its registry names it
    current: str  # the release a file that names no version runs
    roles: frozenset[Role]
    transaction_protocol: str  # which transaction protocol the client speaks
    program: str  # its program's folder under harness/platform/client_programs

    @property
    def source(self) -> ProgramSource:
        """What builds its program (harness/platform/client_builds.py)."""
        return ProgramSource(self.name, self.language, self.package, self.program)

    @property
    def role_names(self) -> str:
        """Its roles in the fixed order producer, transactions, member."""
        return ", ".join(role.value for role in Role if role in self.roles)


# The families built from a registry and run as a program of the client-program contract.
# `librdkafka` with a version is confluent-kafka at that release in its own virtualenv, so
# librdkafka's own history is an axis; without one it is the harness's in-process recorder.
PROGRAM_FAMILIES: Final[dict[str, ClientFamily]] = {
    family.name: family
    for family in (
        ClientFamily(
            "franz-go", "go", "github.com/twmb/franz-go", "1.22.3", ALL_ROLES,
            "version 2 (KIP-890) where the brokers offer it", "franz_go",
        ),
        ClientFamily(
            "sarama", "go", "github.com/IBM/sarama", "1.61.1", ALL_ROLES,
            "version 1 only (no KIP-890 client side)", "sarama",
        ),
        ClientFamily(
            "kafkajs", "node", "kafkajs", "2.2.4", ALL_ROLES,
            "version 1 only (no KIP-890 client side)", "kafkajs",
        ),
        ClientFamily(
            "aiokafka", "python", "aiokafka", "0.14.0", ALL_ROLES,
            "version 1 only (no KIP-890 client side)", "aiokafka",
        ),
        ClientFamily(
            "librdkafka", "python", "confluent-kafka", "2.16.1", ALL_ROLES,
            "version 1 only (no KIP-890 client side)", "confluent_kafka",
        ),
    )
}  # fmt: skip

# Every kind workload.client names, for `kafka-chaos list clients`: the program families, and
# the three kinds built into the harness.
FAMILIES: Final[dict[str, ClientFamily]] = {
    "java": ClientFamily(
        "java", "java", "org.apache.kafka:kafka-clients", "4.3.1", ALL_ROLES,
        "version 2 (KIP-890) from 4.0 where the brokers offer it", "java_programs",
    ),
    **PROGRAM_FAMILIES,
    "command": ClientFamily(
        "command", "any", "your program", "-", frozenset({Role.PRODUCER}),
        "-", "-",
    ),
}  # fmt: skip
