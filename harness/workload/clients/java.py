"""The harness's Java recorder (java/KafkaChaosProducer.java) compiled on demand against
kafka-clients at any released version (harness/platform/java.py builds and caches it)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.platform.java import JavaBuildError, compiled_classpath, java_tool, tools_classpath
from harness.settings import Settings

__all__ = ["JAVA_DIR", "JavaBuildError", "JavaClient", "java_client", "tools_classpath"]

JAVA_DIR = Path(__file__).resolve().parent / "java"
RECORDER_SOURCE = JAVA_DIR / "KafkaChaosProducer.java"
RECORDER_CLASS = "KafkaChaosProducer"


@dataclass(frozen=True)
class JavaClient:
    """A built Java recorder: the `java` command line that runs it (arguments follow)."""

    version: str
    classpath: str

    def argv(self) -> list[str]:
        """`java -cp ... KafkaChaosProducer`: the recorder's arguments go after it."""
        return [java_tool("java"), "-cp", self.classpath, RECORDER_CLASS]


def java_client(version: str, settings: Settings | None = None) -> JavaClient:
    """The harness's Java recorder compiled against kafka-clients `version` (cached)."""
    return JavaClient(version, compiled_classpath(RECORDER_SOURCE, version, settings))
