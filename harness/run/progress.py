"""What the runner shows while it works: a live rich display, or plain lines for CI."""

from __future__ import annotations

import sys
import time

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from harness.chaos.nemesis import Nemesis
from harness.run.repetition import RepetitionSummary
from harness.workload.recorder import RecorderStats


class PlainProgress:
    """One line per cell and phase; nothing per second (quiet mode for CI logs)."""

    def __init__(self, stream=sys.stderr):
        self.stream = stream
        self.prefix = ""

    def _say(self, text: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {self.prefix}{text}", file=self.stream, flush=True)

    def cell_started(self, index: int, total: int, cell: str, repetition: int) -> None:
        self.prefix = f"[{index}/{total} {cell} rep {repetition}] "
        self._say("start")

    def phase(self, name: str) -> None:
        self._say(name)

    def watch(self, stats: RecorderStats | None, nemesis: Nemesis | None) -> None:
        return None

    def cell_finished(self, summary: RepetitionSummary) -> None:
        status = f"error: {summary.error}" if summary.error else "done"
        self._say(
            f"{status}; sent {summary.sent}, ok {summary.ok}, failed {summary.failed}, "
            f"indeterminate {summary.indeterminate}, read {summary.read}"
        )


class LiveProgress(PlainProgress):
    """A live table: cell i/n, phase, acks per second, active faults (refreshed twice a second)."""

    def __init__(self):
        super().__init__()
        self.console = Console(stderr=True)
        self.live = Live(console=self.console, refresh_per_second=2, transient=True)
        self.cell = ""
        self.phase_name = ""
        self._last = (time.monotonic(), 0)
        self.rate = 0.0

    def __enter__(self) -> LiveProgress:
        self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.__exit__(*exc)

    def cell_started(self, index: int, total: int, cell: str, repetition: int) -> None:
        self.cell = f"{index}/{total}  {cell}  rep {repetition}"
        self._last = (time.monotonic(), 0)
        self.console.print(f"[bold]cell {escape(self.cell)}[/bold]")

    def phase(self, name: str) -> None:
        self.phase_name = name
        self.live.update(self._table(None, None))

    def watch(self, stats: RecorderStats | None, nemesis: Nemesis | None) -> None:
        if stats is not None:
            then, acked_then = self._last
            now = time.monotonic()
            self.rate = (stats.ok - acked_then) / max(now - then, 1e-3)
            self._last = (now, stats.ok)
        self.live.update(self._table(stats, nemesis))

    def _table(self, stats: RecorderStats | None, nemesis: Nemesis | None) -> Table:
        table = Table.grid(padding=(0, 2))
        table.add_row("cell", escape(self.cell))
        table.add_row("phase", self.phase_name)
        if stats is not None:
            table.add_row("acks/s", f"{self.rate:,.0f}")
            table.add_row(
                "sent / ok / failed / indet.",
                f"{stats.sent:,} / {stats.ok:,} / {stats.failed:,} / {stats.indeterminate:,}",
            )
        if nemesis is not None:
            active = (
                ", ".join(
                    f"{a.step.fault} {a.step.target} → kafka-"
                    f"{','.join(str(n.node_id) for n in a.fault.nodes)}"
                    for a in list(nemesis.active)
                )
                or "none"
            )
            table.add_row("active faults", escape(active))
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
