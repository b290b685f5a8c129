"""Java programs built on demand: kafka-clients (or kafka-tools, for Kafka's own verifiable
clients) at any released version, resolved from Maven Central with Maven, and a program of the
harness compiled against it; both cached under the cache directory, keyed by version and by
the program's source, so a second run starts at once.

The build runs on this machine's JDK (`javac`, `java`); the programs run beside the harness and
reach the brokers through the same bootstrap address as every client.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from harness.settings import Settings

__all__ = [
    "JavaBuildError",
    "compiled_classpath",
    "java_tool",
    "library_classpath",
    "tools_classpath",
]

# The platform's Java sources: pom.xml (Maven's project, resolving every classpath), JsonText.java
# and the admin program (harness/platform/admin.py).
PROGRAMS_DIR = Path(__file__).resolve().parent / "java_programs"
POM = PROGRAMS_DIR / "pom.xml"
# The JSON quoting every harness Java program prints with, compiled beside each of them.
JSON_TEXT = PROGRAMS_DIR / "JsonText.java"
_MAVEN_TIMEOUT_S = 600


class JavaBuildError(RuntimeError):
    """A Java program cannot be built here; the message names the problem and the fix."""


def java_tool(name: str) -> str:
    """The path of the JDK's `name` (java, javac, mvn); JavaBuildError naming the fix."""
    path = shutil.which(name)
    if path is None:
        raise JavaBuildError(
            f"{name} is not installed, and the Java client needs a JDK 17 or later. "
            "Fix: apt-get install openjdk-17-jdk-headless (or put a JDK's bin on PATH), then rerun."
        )
    return path


def _resolve(artifact: str, version: str, out: Path, group: str = "org.apache.kafka") -> str:
    """The classpath of `group`:`artifact`:`version` and its runtime dependencies
    (downloaded by Maven into its local repository); JavaBuildError if Maven cannot."""
    mvn = java_tool("mvn")
    result = subprocess.run(
        [
            mvn,
            "-q",
            "-B",
            "-f",
            str(POM),
            f"-Dkafka.version={version}",
            f"-Dkafka.artifact={artifact}",
            f"-Dlib.group={group}",
            "-Dmdep.includeScope=runtime",
            f"-Dmdep.outputFile={out}",
            "dependency:build-classpath",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=_MAVEN_TIMEOUT_S,
    )
    if result.returncode != 0 or not out.is_file():
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-5:])
        raise JavaBuildError(
            f"Maven could not resolve {group}:{artifact}:{version}:\n{tail}\n"
            "Fix: pick a released version (e.g. client: java:3.8.0) and check that Maven "
            "Central is reachable."
        )
    return out.read_text().strip()


def compiled_classpath(
    source: Path, version: str, settings: Settings | None = None, companions: Sequence[Path] = ()
) -> str:
    """The classpath of the program in `source` (with the classes of `companions` and the
    shared JSON_TEXT beside it) compiled against kafka-clients `version` (cached; a build of
    the same sources and version is a lookup)."""
    settings = settings or Settings()
    sources = [source, *companions, JSON_TEXT]
    content = b"".join(path.read_bytes() for path in sources) + POM.read_bytes()
    digest = hashlib.sha256(content).hexdigest()[:12]
    entry = f"java/{source.stem}-{version}-{digest}"

    def build(folder: Path) -> None:
        (folder / "classes").mkdir()
        classpath = _resolve("kafka-clients", version, folder / "deps.txt")
        compiled = subprocess.run(
            [java_tool("javac"), "-nowarn", "-cp", classpath, "-d", str(folder / "classes"),
             *map(str, sources)],
            capture_output=True, text=True, check=False, timeout=_MAVEN_TIMEOUT_S,
        )  # fmt: skip
        if compiled.returncode != 0:
            raise JavaBuildError(
                f"{source.name} does not compile against kafka-clients {version}:\n"
                f"{compiled.stderr.strip()[-1500:]}\n"
                "Fix: pick another client version, or report this with the output above."
            )
        classes = settings.cache_dir / entry / "classes"
        (folder / "classpath.txt").write_text(f"{classes}{os.pathsep}{classpath}")

    return settings.built_once(entry, "classpath.txt", build).read_text().strip()


def tools_classpath(version: str, settings: Settings | None = None) -> str:
    """The classpath of Kafka's tools at `version` (VerifiableProducer, VerifiableConsumer)."""
    return library_classpath("org.apache.kafka", "kafka-tools", version, settings, "tools")


def library_classpath(
    group: str, artifact: str, version: str, settings: Settings | None = None, name: str = ""
) -> str:
    """The classpath of `group`:`artifact`:`version` with its runtime dependencies (jars in
    Maven's local repository), resolved once and cached as `name` (default: the artifact)."""

    def build(folder: Path) -> None:
        classpath = _resolve(artifact, version, folder / "deps.txt", group)
        (folder / "classpath.txt").write_text(classpath)

    entry = f"java/{name or artifact}-{version}"
    return (settings or Settings()).built_once(entry, "classpath.txt", build).read_text().strip()
