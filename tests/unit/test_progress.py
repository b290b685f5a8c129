"""The progress displays of a long run: acks/s, outcomes, fault errors and the faults in force,
in the live table and, once a status interval, as a plain line (no cluster, a fake clock)."""

from __future__ import annotations

import io
from types import SimpleNamespace
from typing import Any

from rich.console import Console

from harness.run.progress import AckRate, LiveProgress, PlainProgress
from harness.workload.producer.recorder import RecorderStats


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def nemesis(
    errors: tuple[str, ...] | list[str] = (), injected: int = 0, **in_force: list[str]
) -> Any:
    """What the displays read of a nemesis: its active faults (fault, target, hosts), errors
    and how many faults it injected."""
    active = [
        SimpleNamespace(
            step=SimpleNamespace(fault=fault.split(" ")[0], target=fault.split(" ")[1]),
            fault=SimpleNamespace(nodes=[SimpleNamespace(hostname=h) for h in hosts]),
        )
        for fault, hosts in in_force.items()
    ]
    return SimpleNamespace(active=active, errors=list(errors), injected=injected)


def stats(ok: int, failed: int = 0) -> RecorderStats:
    return RecorderStats(sent=ok + failed + 5, ok=ok, failed=failed, indeterminate=2)


def test_the_ack_rate_is_per_second_between_readings():
    clock = FakeClock()
    rate = AckRate(clock)
    clock.now += 2
    assert rate.update(stats(ok=10_000)) == 5_000
    clock.now += 10
    assert rate.update(stats(ok=20_000)) == 1_000


def test_plain_progress_says_how_a_long_run_goes_once_an_interval():
    clock, out = FakeClock(), io.StringIO()
    progress = PlainProgress(out, status_every_s=60, clock=clock)
    progress.cell_started(1, 2, "config=cp", 0)
    faults = nemesis(injected=3, **{"kill leader": ["kafka-1"]})
    for second in range(1, 121):  # the runner watches twice a second; once a second here
        clock.now += 1
        progress.watch(stats(ok=5_000 * second), faults)
    lines = out.getvalue().splitlines()
    assert len(lines) == 3 and lines[0].endswith("[1/2 config=cp rep 0] start")
    assert "acks/s 5,000; sent/ok/failed/indet. 300,005 / 300,000 / 0 / 2" in lines[1]
    assert lines[1].endswith("faults so far 3, errors 0; in force: kill leader → kafka-1")
    assert "600,000 / 0 / 2" in lines[2]


def test_plain_progress_names_the_fault_errors_and_no_fault_in_force():
    clock, out = FakeClock(), io.StringIO()
    progress = PlainProgress(out, status_every_s=60, clock=clock)
    progress.cell_started(1, 1, "base", 0)
    progress.watch(stats(ok=10), nemesis(["step 3 (kill leader): inject: no leader"]))
    clock.now += 60
    progress.watch(None, nemesis())  # nothing sends yet: no status
    progress.watch(stats(ok=10, failed=4), nemesis(["a", "step 3 (kill leader): inject: x"]))
    status = out.getvalue().splitlines()[-1]
    assert "so far 0, errors 2 (last: step 3 (kill leader): inject: x); in force: none" in status
    assert "/ 4 / 2" in status


def test_the_live_table_shows_acks_outcomes_faults_in_force_and_errors():
    progress = LiveProgress()
    progress.clock = clock = FakeClock()
    progress.cell_started(1, 1, "base", 0)
    clock.now += 1
    faults = nemesis(["step 0 (pause follower): heal: [boom]"], **{"pause follower": ["kafka-3"]})
    progress.watch(stats(ok=4_000), faults)
    console = Console(file=io.StringIO(), width=200)
    console.print(progress._table(stats(ok=4_000), faults))
    text = " ".join(console.file.getvalue().split())  # the grid's columns padded away
    assert "acks/s 4,000 sent / ok / failed / indet. 4,005 / 4,000 / 0 / 2" in text
    assert "faults in force pause follower → kafka-3" in text
    assert "fault errors 1 (last: step 0 (pause follower): heal: [boom])" in text
