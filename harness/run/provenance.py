"""Record what runs an experiment (harness.rundir.provenance.Provenance) at run time."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.experiment.model import Experiment
from harness.platform.image import BrokerImage
from harness.rundir.events import now_us
from harness.rundir.provenance import BrokerImageUsed, Provenance, SettingFrom
from harness.settings import REPO_ROOT


def git_revision() -> str | None:
    """The checkout's commit, or None outside a git checkout."""
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    return None


def client_versions() -> tuple[str | None, str | None]:
    """(confluent-kafka, librdkafka) versions of the producer's client library."""
    try:
        import confluent_kafka
    except ImportError:
        return None, None
    return _version_text(confluent_kafka.version()), _version_text(confluent_kafka.libversion())


def _version_text(version: object) -> str:
    """'2.16.1' from either form confluent-kafka gives: the text, or a (text, int) tuple."""
    return str(version[0] if isinstance(version, tuple) else version)


def memory_bytes() -> int | None:
    """Physical memory of this machine; None where the OS does not say."""
    with contextlib.suppress(ValueError, OSError, AttributeError):
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return None


def provenance(
    experiment: Experiment, command_line: Sequence[str] = (), settings: Sequence[SettingFrom] = ()
) -> Provenance:
    """The provenance of an experiment starting now on this machine (no image resolved yet),
    with the settings the command line applied from files and --set."""
    client, librdkafka = client_versions()
    return Provenance(
        experiment=experiment.name,
        git_revision=git_revision(),
        command_line=tuple(command_line or sys.argv),
        seed=experiment.seed,
        confluent_kafka_version=client,
        librdkafka_version=librdkafka,
        cores=os.cpu_count(),
        memory_bytes=memory_bytes(),
        started_at_us=now_us(),
        settings=tuple(settings),
    )


class ProvenanceRecord:
    """provenance.json of one experiment run root: written at the start, rewritten whenever a
    cell runs on an image not recorded yet (cells may differ in Kafka version)."""

    def __init__(
        self,
        root: Path,
        experiment: Experiment,
        command_line: Sequence[str] = (),
        settings: Sequence[SettingFrom] = (),
    ):
        self.root = root
        self.current = provenance(experiment, command_line, settings)
        self.current.write(root)

    def image_used(self, image: BrokerImage) -> None:
        """Add `image` to the record (and rewrite the file) unless it is there already."""
        used = BrokerImageUsed(
            tag=image.tag, image_id=image.image_id, kafka_version=image.kafka_version
        )
        if used not in self.current.images:
            images = (*self.current.images, used)
            self.current = self.current.model_copy(update={"images": images})
            self.current.write(self.root)
