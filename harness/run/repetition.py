"""One repetition of one cell as the runner carries it: what it is (Repetition), what the
harness saw of it (RepetitionSummary), and where the runner reports its progress (Progress).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from harness.chaos.nemesis import Nemesis
    from harness.experiment.matrix import Cell
    from harness.workload.recorder import RecorderStats


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
    resolved_schedule: list[dict[str, Any]] = field(default_factory=list)
