"""Which Apache Kafka releases carry a fix, read from the released jars themselves.

A JIRA's "fix version" field is often missing or wrong, and a fix merged to trunk may ship with
the change that introduced its bug. This script fetches each release's jar with Maven
(`mvn dependency:get`, into ~/.m2) and looks for a string only the fixed code has, so that
docs/known-bugs.md can say where a bug lives from a command anyone can rerun:

    python bench/fix_in_releases.py [--releases 4.1.2,4.2.0,...]

Each row: a bug, the jar and class searched, and per release whether the string is there.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

RELEASES = ("4.0.1", "4.1.1", "4.1.2", "4.2.0", "4.2.2", "4.3.0", "4.3.1", "4.3.2", "4.4.0")
REPOSITORY = Path.home() / ".m2" / "repository" / "org" / "apache" / "kafka"


@dataclass(frozen=True)
class Probe:
    """A string the fixed code has, in the classes of one artifact whose path starts with
    `classes` (a class file, or a package folder)."""

    bug: str
    artifact: str
    classes: str
    needle: bytes


PROBES = (
    # KIP-1228 (KAFKA-19446): leaders validate a version-2 marker strictly (epoch above the
    # producer's): the condition KAFKA-19999's livelock needs.
    Probe(
        "KIP-1228 strict marker epoch",
        "kafka-storage",
        "org/apache/kafka/storage/internals/log/ProducerAppendInfo.class",
        b"(TV",
    ),
    # KAFKA-19999 (apache/kafka#21176): a retried version-2 marker at the same epoch is accepted.
    Probe(
        "KAFKA-19999 fix",
        "kafka-storage",
        "org/apache/kafka/storage/internals/log/ProducerAppendInfo.class",
        b"Idempotent transaction marker retry detected",
    ),
    # KAFKA-20785 (apache/kafka#23204): a commit after the coordinator's timeout abort is fenced.
    Probe(
        "KAFKA-20785 fix",
        "kafka_2.13",
        "kafka/coordinator/transaction/",
        b"but received a COMMIT at the pre-abort epoch",
    ),
    # KAFKA-20090 (apache/kafka#21469): fencing a producer at epoch Short.MaxValue is logged
    # and goes on, where the affected coordinator throws and leaves the transaction open.
    Probe(
        "KAFKA-20090 fix",
        "kafka-transaction-coordinator",
        "org/apache/kafka/coordinator/transaction/TransactionMetadata.class",
        b"with epoch equal to Short.MaxValue, this must not happen",
    ),
    # KAFKA-20634 (apache/kafka#22444): the group coordinator's high-watermark listener goes
    # quiet once its __consumer_offsets partition becomes a follower (an AtomicBoolean that
    # onBecomingFollower clears; the affected adapter has no field of that type).
    Probe(
        "KAFKA-20634 fix",
        "kafka_2.13",
        "kafka/coordinator/group/ListenerAdapter.class",
        b"java/util/concurrent/atomic/AtomicBoolean",
    ),
)


def jar(artifact: str, release: str) -> Path | None:
    """The release's jar of `artifact`, fetched with Maven when missing (None: not served)."""
    path = REPOSITORY / artifact / release / f"{artifact}-{release}.jar"
    if not path.is_file():
        coordinates = f"-Dartifact=org.apache.kafka:{artifact}:{release}"
        command = ["mvn", "-q", "dependency:get", coordinates, "-Dtransitive=false"]
        subprocess.run(command, capture_output=True, check=False)
    return path if path.is_file() else None


def carries(probe: Probe, release: str) -> str:
    """'yes' or 'no' for the probe's string in the release's classes; '?' without the jar."""
    path = jar(probe.artifact, release)
    if path is None:
        return "?"
    with zipfile.ZipFile(path) as archive:
        names = [n for n in archive.namelist() if n.startswith(probe.classes)]
        found = any(probe.needle in archive.read(n) for n in names if n.endswith(".class"))
    return "yes" if found else "no"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--releases", default=",".join(RELEASES))
    releases = parser.parse_args().releases.split(",")
    print("| change | " + " | ".join(releases) + " |")
    print("|---|" + "---|" * len(releases))
    for probe in PROBES:
        print(f"| {probe.bug} | " + " | ".join(carries(probe, r) for r in releases) + " |")
    print(f"\n`python bench/fix_in_releases.py` ({', '.join(p.artifact for p in PROBES)} jars)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
