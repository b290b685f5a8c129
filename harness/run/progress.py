"""What the runner shows while it works: a live rich display, or plain lines for CI.

Both show what a long (soak) run needs to be watched by: acks per second, the sends' outcomes
so far, the fault steps that failed, and the faults in force.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from harness.limits import clipped
from harness.nemesis.schedule import Nemesis
from harness.run.repetition import RepetitionSummary
from harness.workload.producer.recorder import RecorderStats

Clock = Callable[[], float]
STATUS_EVERY_S = 60.0  # plain mode: one status line a minute while the workload runs


class AckRate:
    """Acknowledged sends per second between two readings of the recorder's counters."""

    def __init__(self, clock: Clock = time.monotonic):
        self.clock = clock
        self._then = (clock(), 0)
        self.per_s = 0.0

    def update(self, stats: RecorderStats) -> float:
        """The rate since the previous reading (or since this one was made)."""
        then, acked_then = self._then
        now = self.clock()
        self.per_s = (stats.ok - acked_then) / max(now - then, 1e-3)
        self._then = (now, stats.ok)
        return self.per_s


def outcomes(stats: RecorderStats) -> str:
    """`sent / ok / failed / indeterminate` so far, as both displays show them."""
    return f"{stats.sent:,} / {stats.ok:,} / {stats.failed:,} / {stats.indeterminate:,}"


def in_force(nemesis: Nemesis) -> str:
    """The faults in force, each `fault target → hosts`, or "none"."""
    active = list(nemesis.active)  # the nemesis thread changes the list while this reads it
    return (
        ", ".join(
            f"{a.step.fault} {a.step.target} → {','.join(n.hostname for n in a.fault.nodes)}"
            for a in active
        )
        or "none"
    )


def fault_errors(nemesis: Nemesis) -> str | None:
    """How many fault steps failed so far and the last failure (one line); None: none did."""
    errors = list(nemesis.errors)
    return f"{len(errors)} (last: {clipped(errors[-1])})" if errors else None


class PlainProgress:
    """One line per cell and phase, and while the workload runs a status line every
    `status_every_s` (acks/s over that time, outcomes, faults injected so far and the steps
    that failed, faults in force; a fault shorter than the interval is seldom caught in force,
    so the count says the faults come): quiet
    enough for CI logs, and an hour-long run still says how it is going."""

    def __init__(
        self,
        stream=sys.stderr,
        status_every_s: float = STATUS_EVERY_S,
        clock: Clock = time.monotonic,
    ):
        self.stream = stream
        self.prefix = ""
        self.status_every_s = status_every_s
        self.clock = clock
        self._acks = AckRate(clock)
        self._next_status = clock() + status_every_s

    def _say(self, text: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {self.prefix}{text}", file=self.stream, flush=True)

    def cell_started(self, index: int, total: int, cell: str, repetition: int) -> None:
        self.prefix = f"[{index}/{total} {cell} rep {repetition}] "
        self._acks = AckRate(self.clock)
        self._next_status = self.clock() + self.status_every_s
        self._say("start")

    def phase(self, name: str) -> None:
        self._say(name)

    def watch(self, stats: RecorderStats | None, nemesis: Nemesis | None) -> None:
        if stats is None or self.clock() < self._next_status:
            return
        self._next_status = self.clock() + self.status_every_s
        status = f"acks/s {self._acks.update(stats):,.0f}; sent/ok/failed/indet. {outcomes(stats)}"
        if nemesis is not None:
            status += (
                f"; faults so far {nemesis.injected}, errors {fault_errors(nemesis) or 0}; "
                f"in force: {in_force(nemesis)}"
            )
        self._say(status)

    def cell_finished(self, summary: RepetitionSummary) -> None:
        status = f"error: {summary.error}" if summary.error else "done"
        self._say(
            f"{status}; sent {summary.sent}, ok {summary.ok}, failed {summary.failed}, "
            f"indeterminate {summary.indeterminate}, read {summary.read}"
        )


class LiveProgress(PlainProgress):
    """A live table: cell i/n, phase, acks per second, outcomes, faults in force and fault
    errors (refreshed twice a second)."""

    def __init__(self):
        super().__init__()
        self.console = Console(stderr=True)
        self.live = Live(console=self.console, refresh_per_second=2, transient=True)
        self.cell = ""
        self.phase_name = ""

    def __enter__(self) -> LiveProgress:
        self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.__exit__(*exc)

    def cell_started(self, index: int, total: int, cell: str, repetition: int) -> None:
        self.cell = f"{index}/{total}  {cell}  rep {repetition}"
        self._acks = AckRate(self.clock)
        self.console.print(f"[bold]cell {escape(self.cell)}[/bold]")

    def phase(self, name: str) -> None:
        self.phase_name = name
        self.live.update(self._table(None, None))

    def watch(self, stats: RecorderStats | None, nemesis: Nemesis | None) -> None:
        if stats is not None:
            self._acks.update(stats)
        self.live.update(self._table(stats, nemesis))

    def _table(self, stats: RecorderStats | None, nemesis: Nemesis | None) -> Table:
        table = Table.grid(padding=(0, 2))
        table.add_row("cell", escape(self.cell))
        table.add_row("phase", self.phase_name)
        if stats is not None:
            table.add_row("acks/s", f"{self._acks.per_s:,.0f}")
            table.add_row("sent / ok / failed / indet.", outcomes(stats))
        if nemesis is not None:
            table.add_row("faults in force", escape(in_force(nemesis)))
            if errors := fault_errors(nemesis):  # error texts may hold rich markup brackets
                table.add_row("fault errors", f"[red]{escape(errors)}[/red]")
        return table

    def cell_finished(self, summary: RepetitionSummary) -> None:
        # Error texts may hold square brackets: rich would read them as markup.
        error = escape(summary.error or "")
        status = f"[red]error: {error}[/red]" if summary.error else "[green]done[/green]"
        self.console.print(
            f"  {status}: sent {summary.sent:,}, ok {summary.ok:,}, failed "
            f"{summary.failed:,}, indeterminate {summary.indeterminate:,}, "
            f"read {summary.read:,}"
        )
