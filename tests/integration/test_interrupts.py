"""Ctrl-C from a real terminal, SIGTERM and an inherited-ignored SIGINT, at five moments of a run.

The CLI runs on a pseudo-terminal whose foreground process group it leads, so Ctrl-C is the
byte 0x03 typed on the terminal: the kernel sends SIGINT to the harness and every child it
started (the Spark JVM included), exactly as for a user at a keyboard.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import signal
import subprocess
import termios
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.waiting import poll_until
from tests.integration.support import CLI, HERE, labelled_leftovers, run_cli, wait_until

CTRL_C = b"\x03"
EXIT_BOUND_S = 10.0  # from the interrupt to the harness's exit, cleanup included
# After the harness exited: Spark's shutdown hooks (see below). 30 s passed alone and in one
# full CI run, and failed in another full run (which process stayed is now in the message).
JVM_LEAVES_S = 90.0


class Terminal:
    """`kafka-chaos` on a pseudo-terminal: type into it, read what it printed."""

    def __init__(self, argv: list[str], preexec: Callable[[], None] | None = None):
        master, slave = pty.openpty()
        self.master = master
        self._output = bytearray()
        self._lock = threading.Lock()

        def become_terminal_owner() -> None:
            os.setsid()  # a new session, whose controlling terminal is the pty
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
            if preexec is not None:
                preexec()

        self.process = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, preexec_fn=become_terminal_owner
        )
        os.close(slave)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 4096)
            except OSError:
                return
            if not chunk:
                return
            with self._lock:
                self._output += chunk

    @property
    def output(self) -> str:
        with self._lock:
            return self._output.decode(errors="replace")

    def type(self, data: bytes) -> None:
        os.write(self.master, data)

    def wait_exit(self, timeout_s: float) -> tuple[int, float]:
        """(exit code, seconds it took), failing the test after `timeout_s`."""
        started = time.monotonic()
        try:
            code = self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            pytest.fail(f"no exit within {timeout_s} s; output:\n{self.output[-3000:]}")
        return code, time.monotonic() - started

    def session_processes(self) -> list[str]:
        """Processes still alive in the harness's session (its children: the JVM, mvn ...)."""
        listing = subprocess.run(
            ["ps", "-o", "pid=,comm=", "-s", str(self.process.pid)],
            capture_output=True,
            text=True,
            check=False,
        )
        return [line.strip() for line in listing.stdout.splitlines() if line.strip()]

    def close(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        os.close(self.master)


def events_in(runs_dir: Path) -> list[dict]:
    """Every event of the (single) repetition under `runs_dir`, [] before it exists."""
    found = []
    for path in runs_dir.rglob("events.jsonl"):
        for line in path.read_text().splitlines():
            try:
                found.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # the harness is writing that line right now
    return found


def has_phase(name: str) -> Callable[[list[dict]], bool]:
    return lambda events: any(e.get("phase") == name for e in events)


def has_type(name: str) -> Callable[[list[dict]], bool]:
    return lambda events: any(e.get("type") == name for e in events)


def has_faults(count: int) -> Callable[[list[dict]], bool]:
    """Whether `count` faults have started."""
    return lambda events: sum(e.get("type") == "fault_start" for e in events) >= count


def start_run(runs_dir: Path, experiment: str, *extra: str, **kwargs) -> Terminal:
    argv = [*CLI, "run", str(HERE / "experiments" / experiment), "--runs-dir", str(runs_dir)]
    return Terminal([*argv, "--quiet", *extra], **kwargs)


def wait_for(terminal: Terminal, runs_dir: Path, reached, what: str, timeout_s: float) -> None:
    wait_until(
        lambda: reached(events_in(runs_dir)) or terminal.process.poll() is not None,
        timeout_s,
        what,
    )
    assert terminal.process.poll() is None, f"exited before {what}:\n{terminal.output[-3000:]}"


def assert_clean_interrupt(terminal: Terminal, code: int, seconds: float) -> None:
    assert code == 130, terminal.output[-3000:]
    assert seconds <= EXIT_BOUND_S, f"exit took {seconds:.1f} s"
    assert labelled_leftovers(terminal.process.pid) == []
    # Spark's JVM leaves by itself once the harness is gone (it watches its stdin), after its
    # shutdown hooks, which remove its temporary directories: on a loaded 2-core machine those
    # once took longer than the harness's own 10 s (CI, the analysis moment). The harness's
    # exit is held to EXIT_BOUND_S above; the JVM's to JVM_LEAVES_S.
    poll_until(
        lambda: not terminal.session_processes(),
        JVM_LEAVES_S,
        "no process left in the harness's session",
        describe=lambda: f"still running: {terminal.session_processes()}",
    )
    assert "Traceback" not in terminal.output, terminal.output[-3000:]


MOMENTS = {
    # moment: (what the run must have reached, the event or phase that shows it)
    "cluster start": has_phase("cluster-start"),
    "steady workload": has_phase("workload-start"),
    "partition fault": has_type("fault_start"),
    "read-back": has_phase("readback-start"),
}


# Ctrl-C during a fault in the gate (heal, cleanup, exit 130); every other moment in the chaos
# stage.
@pytest.mark.parametrize(
    "moment",
    [
        pytest.param(
            m, marks=pytest.mark.integration if m == "partition fault" else pytest.mark.chaos
        )
        for m in MOMENTS
    ],
)
def test_ctrl_c_at_each_moment_heals_cleans_and_exits_130(tmp_path: Path, moment: str):
    terminal = start_run(tmp_path, "interrupt.yaml", "--no-report")
    try:
        wait_for(terminal, tmp_path, MOMENTS[moment], moment, timeout_s=180)
        terminal.type(CTRL_C)
        code, seconds = terminal.wait_exit(60)
        assert_clean_interrupt(terminal, code, seconds)
        events = events_in(tmp_path)
        if has_type("fault_start")(events):
            assert has_type("fault_end")(events), "the active fault was not healed"
        if has_phase("workload-start")(events):
            run_dir = next(tmp_path.rglob("events.jsonl")).parent
            assert (run_dir / "acked.parquet").exists(), "the journal was not kept"
        errors = [e["error"] for e in events if e["type"] == "harness_error"]
        assert errors and errors[0].startswith("interrupted"), errors
    finally:
        terminal.close()


def in_the_fault(runs_dir: Path) -> Terminal:
    """A run of interrupt.yaml (no analysis) that has reached its partition fault."""
    terminal = start_run(runs_dir, "interrupt.yaml", "--no-report")
    try:
        wait_for(terminal, runs_dir, has_type("fault_start"), "the fault", timeout_s=180)
    except BaseException:
        terminal.close()
        raise
    return terminal


@pytest.mark.chaos
def test_ctrl_c_twice_in_a_fault_still_cleans_and_the_repetition_is_unknown(tmp_path: Path):
    terminal = in_the_fault(tmp_path)
    try:
        terminal.type(CTRL_C)
        wait_until(lambda: "stopping" in terminal.output, 10, "the first interrupt noticed")
        terminal.type(CTRL_C)  # during the cleanup
        code, seconds = terminal.wait_exit(60)
        assert_clean_interrupt(terminal, code, seconds)
        assert "still cleaning up" in terminal.output
    finally:
        terminal.close()
    reported = run_cli("report", str(tmp_path), "--out", str(tmp_path / "report"))
    assert reported.returncode == 2, reported.stdout + reported.stderr
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    verdicts = [cell["verdict"] for cell in report["cells"]]
    assert verdicts == ["UNKNOWN"], verdicts


@pytest.mark.chaos
def test_ctrl_c_during_the_analysis_exits_130_and_stops_spark(tmp_path: Path):
    terminal = start_run(tmp_path, "interrupt-short.yaml", "--master", "local[2]")
    try:
        wait_until(lambda: "runs: " in terminal.output, 180, "the analysis to start")
        wait_until(lambda: terminal.session_processes()[1:] != [], 60, "Spark's JVM")
        terminal.type(CTRL_C)
        code, seconds = terminal.wait_exit(60)
        assert_clean_interrupt(terminal, code, seconds)
    finally:
        terminal.close()


@pytest.mark.chaos
def test_sigterm_in_disk_quorum_and_network_faults_heals_each_and_exits_143(tmp_path: Path):
    terminal = start_run(tmp_path, "interrupt-faults.yaml", "--no-report")
    try:
        wait_for(terminal, tmp_path, has_faults(3), "the three faults", timeout_s=180)
        terminal.process.terminate()
        code, seconds = terminal.wait_exit(60)
        assert code == 143, terminal.output[-3000:]
        assert seconds <= EXIT_BOUND_S
        assert labelled_leftovers(terminal.process.pid) == []
        ended = [e["fault"] for e in events_in(tmp_path) if e["type"] == "fault_end"]
        assert sorted(ended) == ["partition", "remove-controller", "slow-disk"], ended
        failed = [e for e in events_in(tmp_path) if e["type"] == "fault_failed"]
        assert failed == [], failed
    finally:
        terminal.close()


@pytest.mark.chaos
def test_sigint_inherited_as_ignored_still_interrupts(tmp_path: Path):
    # What a shell does to a job it starts in the background (`kafka-chaos run ... &`).
    def ignore_sigint() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    terminal = start_run(tmp_path, "interrupt.yaml", "--no-report", preexec=ignore_sigint)
    try:
        wait_for(terminal, tmp_path, has_phase("workload-start"), "the workload", timeout_s=180)
        terminal.process.send_signal(signal.SIGINT)
        code, seconds = terminal.wait_exit(60)
        assert_clean_interrupt(terminal, code, seconds)
    finally:
        terminal.close()
