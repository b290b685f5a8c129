"""Where each repetition ran: the machine, the versions and the sources (provenance views)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from analysis.report.safe import PartFailure, safely
from harness.rundir.provenance import ExperimentProvenance, SettingFrom

NOT_RECORDED: Final = "not recorded"  # what a line says when the run did not record it

# ---------------------------------------------------------------------------------------------
# Provenance


@dataclass(frozen=True)
class ProvenanceView:
    """What produced one experiment run, as (label, text) lines: every PROVENANCE_LABELS line,
    then one line per file (or --set) the command line took settings from, or one line saying
    why there is no provenance."""

    root: str
    lines: tuple[tuple[str, str], ...]


PROVENANCE_LABELS: Final = (
    "git revision",
    "command line",
    "seed",
    "image",
    "image id",
    "Kafka version",
    "confluent-kafka",
    "librdkafka",
    "cores",
    "memory",
)


def provenance_views(runs: Sequence[ExperimentProvenance]) -> tuple[ProvenanceView, ...]:
    """One view per experiment run root, in the order given."""
    return tuple(_provenance_or_failure(run) for run in runs)


def _provenance_or_failure(run: ExperimentProvenance) -> ProvenanceView:
    """The root's provenance view, or one line saying why it could not be shown."""
    view = safely(f"the provenance of {run.root}", lambda: _provenance_view(run))
    if isinstance(view, PartFailure):
        return ProvenanceView(run.root, (("provenance", str(view)),))
    return view


def _provenance_view(run: ExperimentProvenance) -> ProvenanceView:
    """The lines of one root, in PROVENANCE_LABELS order."""
    p = run.provenance
    if p is None:
        return ProvenanceView(run.root, (("provenance", f"{NOT_RECORDED}: {run.problem}"),))
    images = p.images

    def each(values: Sequence[str | None]) -> str:
        return ", ".join(v or NOT_RECORDED for v in values) or NOT_RECORDED

    texts = (
        p.git_revision or NOT_RECORDED,
        shlex.join(p.command_line) if p.command_line else NOT_RECORDED,
        f"{p.seed} (repetition r runs with seed + r)",
        each([i.tag for i in images]),
        each([i.image_id for i in images]),
        each(sorted({i.kafka_version or NOT_RECORDED for i in images})),
        p.confluent_kafka_version or NOT_RECORDED,
        p.librdkafka_version or NOT_RECORDED,
        NOT_RECORDED if p.cores is None else str(p.cores),
        NOT_RECORDED if p.memory_bytes is None else f"{p.memory_bytes / 2**30:.1f} GiB",
    )
    lines = tuple(zip(PROVENANCE_LABELS, texts, strict=True))
    return ProvenanceView(run.root, lines + settings_lines(p.settings))


def settings_lines(settings: Sequence[SettingFrom]) -> tuple[tuple[str, str], ...]:
    """Which settings came from which file: one (label, text) line per source in the order
    first applied, `settings from producer.properties` with `acks → producer.acks = "all", ...`
    (`settings from --set` with `workload.rate = 500, ...`); none without such settings."""
    by_source: dict[str, list[str]] = {}
    for s in settings:
        what = f"{s.field} = {s.value}" if s.key is None else f"{s.key} → {s.field} = {s.value}"
        by_source.setdefault(s.source, []).append(what)
    return tuple((f"settings from {source}", ", ".join(all_)) for source, all_ in by_source.items())
