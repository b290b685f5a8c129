"""One repetition of a cell replayed with a schedule of the caller's (the shrinker's predicate):
the runner's own repetition, resolved with the given steps instead of the cell's."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from harness.experiment.matrix import Cell
from harness.experiment.model import FaultStep
from harness.platform.image import BrokerImage
from harness.platform.leftovers import remove_leftovers
from harness.run.repetition import Progress, Repetition, RepetitionSummary
from harness.run.resolved import resolve
from harness.run.runner import run_repetition

__all__ = ["replay"]


def replay(
    cell: Cell,
    schedule: Sequence[FaultStep],
    seed: int,
    image: BrokerImage,
    run_dir: Path,
    progress: Progress,
    index: int = 0,
) -> RepetitionSummary:
    """Run `cell` once with `schedule` on a fresh cluster into `run_dir` (a run directory like
    every repetition's, spec.json listing `schedule`); the cluster is removed after."""
    remove_leftovers()
    run_dir.mkdir(parents=True, exist_ok=True)
    repetition = Repetition(cell, index, seed, run_dir)
    return run_repetition(resolve(repetition, image, schedule=list(schedule)), progress)
