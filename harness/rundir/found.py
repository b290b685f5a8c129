"""The run directories at or under some paths, each run once however it arrived, and the
planned repetitions none of them holds.

A run can arrive twice: a symlink (runs/<experiment>/latest) that a CI artifact upload copied as
a folder, or a glob given twice. A copy is the same run by its spec.json identity
(RunSpec.identity), so it counts once; the copy kept is chosen the same way every time.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from harness.rundir import layout
from harness.rundir.plan import UnrunRepetition, unrun_repetitions
from harness.rundir.spec import RunSpec, RunSpecError

__all__ = ["Copy", "FoundRuns", "find_run_dirs", "unrun_under"]


@dataclass(frozen=True)
class Copy:
    """A run directory left out as a copy of the one kept."""

    kept: Path
    skipped: Path


@dataclass(frozen=True)
class FoundRuns:
    """The distinct run directories found (sorted), and the copies left out."""

    run_dirs: list[Path]
    copies: list[Copy]

    def note(self) -> str | None:
        """One line saying that copies were left out, with an example; None when none were."""
        if not self.copies:
            return None
        first, count = self.copies[0], len(self.copies)
        what = "run directory is a copy" if count == 1 else "run directories are copies"
        return (
            f"note: {count} {what} of another (the same spec.json identity, e.g. a "
            f"`{layout.LATEST}` link an artifact upload copied as a folder); each run counts "
            f"once: {first.skipped} is left out for {first.kept}"
        )


def _matched_folders(patterns: Iterable[str]) -> list[Path]:
    """The folders the glob patterns match (~ expanded, ** recursive)."""
    matches = (glob.glob(os.path.expanduser(p), recursive=True) for p in patterns)
    return [Path(match) for group in matches for match in group if Path(match).is_dir()]


def _under(folders: Iterable[Path], name: str) -> set[Path]:
    """Each folder and each folder below one that holds a file `name`, resolved."""
    found: set[Path] = set()
    for root in folders:
        candidates = [root, *(path.parent for path in root.rglob(name))]
        found.update(d.resolve() for d in candidates if (d / name).is_file())
    return found


def find_run_dirs(patterns: Iterable[str]) -> FoundRuns:
    """Run directories (holding spec.json and acked.parquet) at or under any glob match, each
    run once: copies with the same spec.json identity keep the path outside a `latest` folder
    first, then the first in sort order."""
    run_dirs = sorted(
        d for d in _under(_matched_folders(patterns), layout.SPEC) if layout.is_run_dir(d)
    )
    by_run: dict[object, list[Path]] = {}
    for run_dir in run_dirs:
        by_run.setdefault(_identity(run_dir) or run_dir, []).append(run_dir)
    kept: list[Path] = []
    copies: list[Copy] = []
    for group in by_run.values():
        first, *others = sorted(group, key=lambda d: (layout.LATEST in d.parts, str(d)))
        kept.append(first)
        copies.extend(Copy(first, other) for other in others)
    return FoundRuns(sorted(kept), copies)


def _identity(run_dir: Path) -> tuple[str, str, int, int, int] | None:
    """The run's spec.json identity; None when it has none or spec.json cannot be read."""
    try:
        return RunSpec.read(run_dir).identity
    except (OSError, RunSpecError):
        return None


def unrun_under(patterns: Iterable[str], run_dirs: Iterable[Path]) -> list[UnrunRepetition]:
    """The repetitions the plans (plan.json) at or under the glob matches name and none of
    `run_dirs` holds (by experiment, cell and repetition): what a shard that died left out."""
    ran: set[tuple[str, str, int]] = set()
    for run_dir in run_dirs:
        try:
            spec = RunSpec.read(run_dir)
        except (OSError, RunSpecError):
            continue
        if spec.experiment is not None and spec.cell is not None and spec.repetition is not None:
            ran.add((spec.experiment, spec.cell, spec.repetition))
    return unrun_repetitions(_under(_matched_folders(patterns), layout.PLAN), ran)
