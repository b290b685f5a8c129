"""spec.json, typed: what a repetition ran (the resolved cell, its seed, image, settings and
schedule) and how it ended. The harness writes it through `RunSpec.write` and the analysis reads
it through `RunSpec.read`; nothing else parses the file.

Every field may be missing (a run that crashed early, a spec.json written by hand) and unknown
keys are kept, so an older or newer run still reads; whoever needs a missing field says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, ValidationError, field_serializer, field_validator

from harness.rundir import layout
from harness.rundir.config import CellConfig

__all__ = ["KAFKA_DEFAULTS_MS", "RunSpec", "RunSpecError", "milliseconds"]

# Kafka's defaults of the broker and controller settings in milliseconds that the harness and
# the analysis read (where the cell's file leaves them out), as the current release has them;
# those that changed between releases are the version's (spec.json's effective_defaults,
# harness.platform.versions.broker_defaults) where a run recorded them.
KAFKA_DEFAULTS_MS: Final = {
    "replica.lag.time.max.ms": 30_000,
    "broker.session.timeout.ms": 9_000,
    "controller.quorum.election.timeout.ms": 1_000,
    "controller.quorum.fetch.timeout.ms": 2_000,
    "zookeeper.session.timeout.ms": 18_000,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 10_000,
}


def milliseconds(value: object, default: float) -> float:
    """A setting's milliseconds as a file gives it (a number or numeric text), else `default`
    (also for 0 or less: no limit, or none given)."""
    try:
        number = float(str(value)) if value is not None else default
    except ValueError:
        return default
    return number if number > 0 else default


class RunSpecError(ValueError):
    """A spec.json that cannot be read; the message names the file and the field."""


class _Part(BaseModel):
    """A nested object of spec.json: the fields the analysis reads, the rest kept."""

    model_config = ConfigDict(frozen=True, extra="allow")


class TopicSpec(_Part):
    """The topic the run wrote."""

    name: str | None = None
    partitions: int | None = None
    replication_factor: int | None = None
    config: dict[str, object] = {}


class KafkaSpec(_Part):
    """The cluster the run started (kafka: of the experiment file, resolved)."""

    brokers: int | None = None
    mode: str | None = None
    broker_config: dict[str, object] = {}
    controller_config: dict[str, object] = {}
    # The defaults that differ between releases, as the run's version had them.
    effective_defaults: dict[str, object] | None = None

    def setting_ms(self, name: str) -> float:
        """A setting of KAFKA_DEFAULTS_MS as the cluster ran it: the controllers' or brokers'
        config (a number or numeric text), else the version's default the run recorded, else
        Kafka's current default."""
        recorded = (self.effective_defaults or {}).get(name)
        value = self.controller_config.get(name, self.broker_config.get(name, recorded))
        return milliseconds(value, KAFKA_DEFAULTS_MS[name])


class RunSpec(_Part):
    """One repetition's spec.json."""

    experiment: str | None = None
    cell: str | None = None
    repetition: int | None = None
    seed: int | None = None
    axes: dict[str, Any] = {}  # as written: the harness's are text, a hand-written file's maybe not
    config: CellConfig = CellConfig()
    image: str | None = None
    image_id: str | None = None
    git_revision: str | None = None
    producer: dict[str, object] = {}
    topic: TopicSpec = TopicSpec()
    workload: dict[str, object] = {}
    schedule: list[dict[str, object]] = []
    disjoint: bool = False  # the schedule ran with faults.disjoint (a generated one does)
    # faults.after_workload_s and final_heal_timeout_s as run (None: a run from before them).
    after_workload_s: float | None = None
    final_heal_timeout_s: float | None = None
    kafka: KafkaSpec = KafkaSpec()
    started_at_us: int | None = None
    ended_at_us: int | None = None
    harness_error: str | None = None  # what stopped the repetition, when something did

    @field_validator("config", mode="before")
    @classmethod
    def _config(cls, value: object) -> object:
        if isinstance(value, CellConfig):
            return value
        return CellConfig.read(value or {})  # type: ignore[arg-type]

    @field_validator("axes", "producer", "workload", "topic", "kafka", mode="before")
    @classmethod
    def _object(cls, value: object) -> object:
        return {} if value is None else value

    @field_serializer("config")
    def _config_json(self, config: CellConfig) -> dict[str, object]:
        return config.as_json()

    @property
    def identity(self) -> tuple[str, str, int, int, int] | None:
        """What names this repetition wherever its directory is copied: experiment, cell,
        repetition, seed and the µs it started (two runs of one cell never start in the same
        µs). None when a field is missing (a spec.json written by hand): such a run is known
        by its path alone."""
        experiment, cell, started = self.experiment, self.cell, self.started_at_us
        repetition, seed = self.repetition, self.seed
        if experiment is None or cell is None or repetition is None or seed is None:
            return None
        return None if started is None else (experiment, cell, repetition, seed, started)

    @classmethod
    def read(cls, run_dir: Path) -> RunSpec:
        """The spec.json of `run_dir`; OSError when there is none, RunSpecError naming the first
        field that cannot be read."""
        path = Path(run_dir) / layout.SPEC
        text = path.read_text()
        try:
            return cls.model_validate_json(text)
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(part) for part in error["loc"]) or "the document"
            message = str(error["msg"]).removeprefix("Value error, ")
            raise RunSpecError(f"{path}: {where}: {message}") from None

    def write(self, run_dir: Path) -> None:
        """Write spec.json into `run_dir` (every field, unknown ones too)."""
        (Path(run_dir) / layout.SPEC).write_text(self.model_dump_json(indent=2, fallback=str))
