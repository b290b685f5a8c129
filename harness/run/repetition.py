"""The repetitions of an experiment: which run (the cells a pattern or a shard selects, each
repetition with its seed), where (their run directories, plan.json, runs/<experiment>/latest),
what one is (Repetition), what the harness saw of it (RepetitionSummary), and where the runner
reports its progress (Progress).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from harness.rundir import layout
from harness.rundir.plan import ExperimentPlan, PlannedRun

if TYPE_CHECKING:
    from harness.experiment.matrix import Cell
    from harness.experiment.model import Experiment
    from harness.nemesis.records import ResolvedStep
    from harness.nemesis.schedule import Nemesis
    from harness.workload.producer.recorder import RecorderStats


class Progress(Protocol):
    """Where the runner reports what it is doing (a live display, or plain lines for CI)."""

    def cell_started(self, index: int, total: int, cell: str, repetition: int) -> None: ...
    def phase(self, name: str) -> None: ...
    def watch(self, stats: RecorderStats | None, nemesis: Nemesis | None) -> None: ...
    def cell_finished(self, summary: RepetitionSummary) -> None: ...


@dataclass(frozen=True)
class Repetition:
    """One repetition of one cell: its index, seed and run directory."""

    cell: Cell
    index: int
    seed: int
    run_dir: Path


@dataclass
class RepetitionSummary:
    """What the harness itself saw of one repetition (the verdict is the analysis' job)."""

    run_dir: Path
    cell: str
    repetition: int
    sent: int = 0
    ok: int = 0
    failed: int = 0
    indeterminate: int = 0
    read: int = 0
    readback_complete: bool = False
    fault_errors: list[str] = field(default_factory=list)
    error: str | None = None
    # What each step acted on and when (the nemesis' record), kept in spec.json.
    resolved_schedule: list[ResolvedStep] = field(default_factory=list)


LATEST = layout.LATEST  # runs/<experiment>/latest: the newest run of that experiment


def plan_repetitions(experiment: Experiment, cells: Sequence[Cell], root: Path) -> list[Repetition]:
    """Every (cell, repetition) to run, with run directories under `root`."""
    return [
        Repetition(cell, rep, experiment.seed + rep, root / cell.name / str(rep))
        for cell in cells
        for rep in range(experiment.repetitions)
    ]


def shard_of(position: int, count: int) -> int:
    """The shard (1-based, of `count`) that runs the cell at `position` of the selection:
    dealt round-robin so shards get similar mixes."""
    return position % count + 1


def select_shard(cells: Sequence[Cell], shard: tuple[int, int] | None) -> list[Cell]:
    """The cells of shard i of n (1-based), dealt round-robin so shards get similar mixes."""
    if shard is None:
        return list(cells)
    index, count = shard
    return [cell for position, cell in enumerate(cells) if shard_of(position, count) == index]


def select_cells(cells: Sequence[Cell], patterns: Sequence[str] | None) -> list[Cell]:
    """The cells whose name matches one of the glob `patterns` (all cells when none given),
    in file order; ValueError naming the cells there are when a pattern matches none."""
    if not patterns:
        return list(cells)
    unmatched = [p for p in patterns if not any(fnmatchcase(c.name, p) for c in cells)]
    if unmatched:
        names = ", ".join(cell.name for cell in cells)
        raise ValueError(f"--cells {unmatched[0]!r} matches no cell; the cells are: {names}")
    return [cell for cell in cells if any(fnmatchcase(cell.name, p) for p in patterns)]


def experiment_root(runs_dir: Path, experiment: Experiment, shard: tuple[int, int] | None) -> Path:
    """runs/<experiment>/<UTC timestamp>[-shard-i-of-n]/"""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    suffix = f"-shard-{shard[0]}-of-{shard[1]}" if shard else ""
    return runs_dir / experiment.name / f"{stamp}{suffix}"


def write_plan(
    root: Path,
    experiment: Experiment,
    selection: Sequence[Cell],
    shard: tuple[int, int] | None = None,
) -> None:
    """plan.json: every repetition of `selection` (the cells chosen, of every shard when
    `shard` is this root's i/n), in order, with its seed, axes and the shard that runs it."""
    runs = [
        PlannedRun(
            cell=cell.name,
            repetition=repetition,
            seed=experiment.seed + repetition,
            axes=cell.axes,
            shard=shard_of(position, shard[1]) if shard else None,
        )
        for position, cell in enumerate(selection)
        for repetition in range(experiment.repetitions)
    ]
    ExperimentPlan(experiment=experiment.name, shard=shard, runs=tuple(runs)).write(root)


def point_latest_at(root: Path) -> None:
    """Make runs/<experiment>/latest a relative symlink to `root` (replaced atomically)."""
    link = root.parent / LATEST
    staged = root.parent / f".{LATEST}-{os.getpid()}"
    staged.unlink(missing_ok=True)
    staged.symlink_to(root.name, target_is_directory=True)
    staged.replace(link)
