"""The harness's Java recorder (harness/platform/java_programs/KafkaChaosProducer.java) and
consumer-group member, compiled on demand against kafka-clients at any released version
(harness/platform/jdk.py builds and caches them)."""

from __future__ import annotations

from harness.platform.jdk import (
    PROGRAMS_DIR,
    JavaBuildError,
    compiled_classpath,
    java_tool,
    tools_classpath,
)
from harness.platform.versions import Feature, supports
from harness.rundir.release import KafkaVersion
from harness.settings import Settings
from harness.workload.processes import BuiltProgram

__all__ = ["JavaBuildError", "java_client", "java_member", "tools_classpath"]

RECORDER_SOURCE = PROGRAMS_DIR / "KafkaChaosProducer.java"
RECORDER_CLASS = "KafkaChaosProducer"
# Compiled with the recorder for a client that has transactions (0.11+): its transactional
# mode (--transaction-size).
TRANSACTIONS_SOURCE = PROGRAMS_DIR / "TransactionalSends.java"
# The consumer-group member (workload.consumers with a Java client), built on its own: only
# runs with a group need it.
MEMBER_SOURCE = PROGRAMS_DIR / "KafkaChaosConsumer.java"
MEMBER_CLASS = "KafkaChaosConsumer"


def java_client(version: str, settings: Settings | None = None) -> BuiltProgram:
    """The harness's Java recorder compiled against kafka-clients `version` (cached): `java -cp
    ... KafkaChaosProducer`, the recorder's arguments to follow."""
    transactional = supports(KafkaVersion.parse(version), Feature.TRANSACTIONS)
    companions = [TRANSACTIONS_SOURCE] if transactional else []
    classpath = compiled_classpath(RECORDER_SOURCE, version, settings, companions)
    argv = (java_tool("java"), "-cp", classpath, RECORDER_CLASS)
    return BuiltProgram(version, argv, f"java {version}")


def java_member(version: str, settings: Settings | None = None) -> BuiltProgram:
    """The harness's Java consumer-group member compiled against kafka-clients `version`
    (cached like the recorder)."""
    classpath = compiled_classpath(MEMBER_SOURCE, version, settings)
    argv = (java_tool("java"), "-cp", classpath, MEMBER_CLASS)
    return BuiltProgram(version, argv, f"java {version}")
