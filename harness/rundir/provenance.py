"""provenance.json: what produced an experiment run, so every report can say it.

Written by the harness (harness.run.provenance) into the experiment run's root when the run
starts, and again as each broker image is resolved; read here by the analysis. Like the rest of
the run directory it imports no Kafka client: the versions are recorded as text.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from harness.rundir import layout

__all__ = [
    "BrokerImageUsed",
    "ExperimentProvenance",
    "Provenance",
    "SettingFrom",
    "read_provenance",
]


class BrokerImageUsed(BaseModel):
    """A broker image the experiment's cells ran on."""

    model_config = ConfigDict(frozen=True)

    tag: str
    image_id: str | None = None
    kafka_version: str | None = None


class SettingFrom(BaseModel):
    """A setting the command line applied to every cell, and where it came from: a key of a
    property file (`--producer-config`, `--topic-config`) or a `--set`."""

    model_config = ConfigDict(frozen=True)

    field: str  # the experiment's field it set, e.g. producer.acks or topic.config.flush.ms
    value: str  # its value as JSON text, e.g. "all", 1, true
    source: str  # the property file's path as given, or "--set"
    key: str | None = None  # the file's key (acks, request.required.acks); None for --set


class Provenance(BaseModel):
    """What ran an experiment, and where: enough to repeat it or to doubt it."""

    model_config = ConfigDict(frozen=True)

    experiment: str
    git_revision: str | None = None  # None outside a git checkout
    command_line: tuple[str, ...] = ()
    seed: int  # repetition r of every cell runs with seed + r
    images: tuple[BrokerImageUsed, ...] = ()
    confluent_kafka_version: str | None = None
    librdkafka_version: str | None = None
    cores: int | None = None
    memory_bytes: int | None = None
    started_at_us: int | None = None
    # The settings of --producer-config, --topic-config and --set, in the order applied (a
    # matrix axis that sets the same field still varies it per cell).
    settings: tuple[SettingFrom, ...] = ()

    def write(self, root: Path) -> Path:
        """Write provenance.json into the experiment run root (atomically, via a rename)."""
        target = Path(root) / layout.PROVENANCE
        partial = target.with_suffix(".json.partial")
        partial.write_text(self.model_dump_json(indent=2) + "\n")
        partial.replace(target)
        return target


@dataclass(frozen=True)
class ExperimentProvenance:
    """The provenance of one experiment run root, or why it cannot be shown."""

    root: str
    provenance: Provenance | None
    problem: str | None = None  # None when provenance is there


def read_provenance(run_dirs: Iterable[str | Path]) -> tuple[ExperimentProvenance, ...]:
    """The provenance of each experiment run root the run directories lie in, sorted by root."""
    roots = sorted({layout.experiment_run_root(run_dir) for run_dir in run_dirs})
    return tuple(_read_one(root) for root in roots)


def _read_one(root: Path) -> ExperimentProvenance:
    """One root's provenance.json; a missing or unreadable file is a problem, never a crash."""
    path = root / layout.PROVENANCE
    if not path.is_file():
        problem = f"no {layout.PROVENANCE}: the run was made by a harness that did not record it"
        return ExperimentProvenance(str(root), None, problem)
    try:
        return ExperimentProvenance(
            str(root), Provenance.model_validate(json.loads(path.read_text()))
        )
    except (OSError, ValueError, ValidationError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return ExperimentProvenance(str(root), None, f"{layout.PROVENANCE} unreadable: {first}")
