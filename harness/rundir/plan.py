"""plan.json, typed: the repetitions an experiment run planned, so an analysis of many shards can
name those that left no run directory (a shard that died).

The harness (harness.run.repetition) writes it into the experiment run root before the first
repetition; the analysis reads it here. A shard of a `--shard i/n` run records the whole
selection, each repetition with the shard that runs it, so what a dead shard planned is known
from any other shard's plan.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from harness.rundir import layout
from harness.rundir.spec import RunSpec, RunSpecError

__all__ = ["ExperimentPlan", "PlannedRun", "UnrunRepetition", "unrun_repetitions"]


class PlannedRun(BaseModel):
    """One planned repetition of one cell."""

    model_config = ConfigDict(frozen=True)

    cell: str
    repetition: int
    seed: int
    axes: dict[str, str] = {}
    shard: int | None = None  # i of --shard i/n: the shard that runs it; None when not sharded


class ExperimentPlan(BaseModel):
    """What one experiment run root planned: its own repetitions and, when sharded, every
    other shard's."""

    model_config = ConfigDict(frozen=True)

    experiment: str
    shard: tuple[int, int] | None = None  # (i, n) of the root's own --shard i/n
    runs: tuple[PlannedRun, ...] = ()

    def write(self, root: Path) -> None:
        """Write plan.json into the experiment run root."""
        (Path(root) / layout.PLAN).write_text(self.model_dump_json(indent=2) + "\n")

    @classmethod
    def read(cls, root: Path) -> ExperimentPlan | None:
        """The plan of `root`; None when it has none or it cannot be read. An older plan.json
        (a list of the root's own repetitions) reads as an unsharded plan of the experiment
        named by the root's parent folder."""
        try:
            document = json.loads((Path(root) / layout.PLAN).read_text())
            if isinstance(document, list):
                document = {"experiment": Path(root).resolve().parent.name, "runs": document}
            return cls.model_validate(document)
        except (OSError, ValueError, ValidationError):
            return None


@dataclass(frozen=True)
class UnrunRepetition:
    """A planned repetition no run directory holds."""

    experiment: str
    planned: PlannedRun
    root: Path  # the experiment run root whose plan names it
    shards: int | None  # n of the --shard i/n it was planned in
    stopped: str | None = None  # its folder holds spec.json but no acked.parquet: why, if known

    @property
    def run_dir(self) -> Path:
        """Where it would have been: in `root` when planned there, else in a stand-in root
        named after its shard, so each unrun repetition has a path of its own."""
        folder = self.root
        if self.shards is not None and self.planned.shard is not None:
            folder = self.root.parent / f"shard-{self.planned.shard}-of-{self.shards}-not-run"
        return folder / self.planned.cell / str(self.planned.repetition)

    @property
    def reason(self) -> str:
        """Why it has no result, and what to look at."""
        if self.stopped is not None:
            return f"planned, its run directory holds no {layout.ACKED}: {self.stopped}"
        if self.shards is not None and self.planned.shard is not None:
            return f"planned, no run directory: did shard {self.planned.shard}/{self.shards} fail?"
        return "planned, no run directory: did the run stop before it?"


def unrun_repetitions(
    plan_roots: Iterable[Path], ran: set[tuple[str, str, int]]
) -> list[UnrunRepetition]:
    """Each repetition the plans of `plan_roots` name whose (experiment, cell, repetition) is
    not in `ran`, once, in the order of the first plan (sorted by root) that names it."""
    unrun: dict[tuple[str, str, int], UnrunRepetition] = {}
    for root in sorted(set(plan_roots)):
        plan = ExperimentPlan.read(root)
        if plan is None:
            continue
        shards = plan.shard[1] if plan.shard else None
        for planned in plan.runs:
            key = (plan.experiment, planned.cell, planned.repetition)
            if key in ran or key in unrun:
                continue
            own = plan.shard is None or planned.shard in (None, plan.shard[0])
            stopped = _stopped(root / planned.cell / str(planned.repetition)) if own else None
            unrun[key] = UnrunRepetition(plan.experiment, planned, root, shards, stopped)
    return list(unrun.values())


def _stopped(run_dir: Path) -> str | None:
    """Why a planned repetition's folder holds no acked.parquet: the harness error its
    spec.json records, or that none is recorded; None when the folder has no spec.json."""
    try:
        spec = RunSpec.read(run_dir)
    except OSError:
        return None
    except RunSpecError as exc:
        return str(exc)
    return spec.harness_error or "the repetition stopped before its workload"
