"""A Spark standalone cluster on this machine, from pyspark's own jars: one master and a few
workers on 127.0.0.1, started and always stopped together.

pyspark's pip package has no start-master/start-worker scripts, but its `bin/spark-class`
launches the master and worker main classes when SPARK_HOME is the package directory. Each
daemon runs in a process group of its own, so stopping it also stops anything it started.

    with StandaloneCluster(workers=2) as cluster:
        results = reconcile_runs(run_dirs, cluster.master_url)
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pyspark

from harness.waiting import WaitTimeout, poll_until

__all__ = ["ClusterError", "StandaloneCluster", "compare_with_local"]

HOST: Final = "127.0.0.1"
MASTER_CLASS: Final = "org.apache.spark.deploy.master.Master"
WORKER_CLASS: Final = "org.apache.spark.deploy.worker.Worker"
START_TIMEOUT_S: Final = 90.0
STOP_TIMEOUT_S: Final = 10.0
LOG_TAIL_CHARS: Final = 2000


class ClusterError(RuntimeError):
    """The cluster did not come up; the message holds the tail of the daemon's log."""


@dataclass
class _Daemon:
    """A started master or worker: its process and its log file."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def log_tail(self) -> str:
        """The last characters of the daemon's log."""
        text = self.log.read_text(errors="replace") if self.log.is_file() else ""
        return text[-LOG_TAIL_CHARS:]


def spark_home() -> Path:
    """The installed pyspark package, which carries bin/spark-class and the jars."""
    return Path(pyspark.__file__).parent


def free_port() -> int:
    """A TCP port on HOST that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


class StandaloneCluster:
    """A master and `workers` workers (each `cores` cores, `memory` for executors) on HOST.

    Use it as a context manager; stop() runs on every exit, also after a failed start.
    """

    def __init__(
        self,
        workers: int = 2,
        cores: int = 1,
        memory: str = "1g",
        work_dir: Path | None = None,
    ) -> None:
        self.workers, self.cores, self.memory = workers, cores, memory
        self.work_dir = Path(work_dir or tempfile.mkdtemp(prefix="kafka-chaos-spark-"))
        self.port, self.ui_port = free_port(), free_port()
        self._daemons: list[_Daemon] = []

    @property
    def master_url(self) -> str:
        """The spark:// URL a driver connects to."""
        return f"spark://{HOST}:{self.port}"

    @property
    def ui_url(self) -> str:
        """The master's web UI, whose /json/ lists the registered workers."""
        return f"http://{HOST}:{self.ui_port}"

    def __enter__(self) -> StandaloneCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start the master, then the workers; return once every worker is ALIVE."""
        self._launch(
            "master",
            [MASTER_CLASS, "--host", HOST, "--port", str(self.port)],
            ["--webui-port", str(self.ui_port)],
        )
        self._wait_for(lambda state: state is not None, "the master to answer")
        for index in range(self.workers):
            worker_dir = self.work_dir / f"worker-{index}"
            worker_dir.mkdir(parents=True, exist_ok=True)
            self._launch(
                f"worker-{index}",
                [WORKER_CLASS, self.master_url, "--host", HOST],
                [
                    "--webui-port",
                    str(free_port()),
                    "--cores",
                    str(self.cores),
                    "--memory",
                    self.memory,
                    "--work-dir",
                    str(worker_dir),
                ],
            )
        self._wait_for(
            lambda state: state is not None and state.get("aliveworkers", 0) >= self.workers,
            f"{self.workers} workers to register",
        )

    def stop(self) -> None:
        """Stop every daemon started (SIGTERM to its process group, SIGKILL after a grace)."""
        for daemon in reversed(self._daemons):
            _stop_group(daemon.process)
        self._daemons.clear()

    def alive_workers(self) -> int:
        """Workers the master lists as ALIVE (0 when it does not answer)."""
        state = self._master_state()
        return int(state.get("aliveworkers", 0)) if state else 0

    def master_state(self) -> dict[str, Any]:
        """The master's JSON status (workers, active and completed applications)."""
        state = self._master_state()
        if state is None:
            raise ClusterError(f"the Spark master at {self.ui_url} does not answer")
        return state

    def pids(self) -> list[int]:
        """Process ids of the running daemons (each also its process group's id)."""
        return [d.process.pid for d in self._daemons if d.process.poll() is None]

    def _launch(self, name: str, main: list[str], options: list[str]) -> None:
        """Start one daemon through spark-class in a new session, its output in its log."""
        log = self.work_dir / f"{name}.log"
        env = {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": HOST,
            "SPARK_LOG_DIR": str(self.work_dir),
            # A worker's own JVM is small; the executors it starts get --memory.
            "SPARK_DAEMON_MEMORY": "512m",
        }
        command = [str(spark_home() / "bin" / "spark-class"), *main, *options]
        with log.open("wb") as out:
            process = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=self.work_dir,
                start_new_session=True,  # its own process group, stopped as one
            )
        self._daemons.append(_Daemon(name, process, log))

    def _master_state(self) -> dict[str, Any] | None:
        """The master's JSON status, or None while it does not answer."""
        try:
            with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=2) as response:
                state: dict[str, Any] = json.loads(response.read())
                return state
        except (OSError, ValueError):
            return None

    def _wait_for(self, ready: Callable[[dict[str, Any] | None], bool], what: str) -> None:
        """Poll the master until ready(state); ClusterError if a daemon exits or time runs out
        (the timeout's message ends with every daemon's log tail)."""

        def master_ready() -> bool:
            if ready(self._master_state()):
                return True
            for daemon in self._daemons:
                if daemon.process.poll() is not None:
                    raise ClusterError(
                        f"Spark {daemon.name} exited with {daemon.process.returncode} while "
                        f"waiting for {what}; its log ({daemon.log}) ends:\n{daemon.log_tail()}"
                    )
            return False

        def tails() -> str:
            return "\n".join(f"--- {d.name}\n{d.log_tail()}" for d in self._daemons)

        try:
            poll_until(master_ready, START_TIMEOUT_S, what, describe=tails)
        except WaitTimeout as exc:
            raise ClusterError(str(exc)) from exc


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group of process, SIGKILL it if it outlives the grace period."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=STOP_TIMEOUT_S)
    except ProcessLookupError:
        pass


@dataclass(frozen=True)
class ClusterReport:
    """Per run directory, whether the cluster's result equals local mode's, and the timings."""

    run_dirs: tuple[str, ...]
    differing: tuple[str, ...]  # run dirs whose results.json form differs between the two
    local_s: float
    cluster_s: float
    master_url: str

    @property
    def identical(self) -> bool:
        """True when every run reconciled to the same result on the cluster as locally."""
        return not self.differing


def compare_with_local(
    run_dirs: Sequence[Path], cluster: StandaloneCluster, local_master: str = "local[2]"
) -> ClusterReport:
    """Reconcile run_dirs in local mode and through the cluster, one session after the other,
    and name the runs whose results differ."""
    from analysis.spark.reconcile import reconcile_runs

    started = time.perf_counter()
    local = reconcile_runs(run_dirs, local_master)
    local_s = time.perf_counter() - started
    started = time.perf_counter()
    remote = reconcile_runs(run_dirs, cluster.master_url)
    cluster_s = time.perf_counter() - started
    differing = tuple(
        a.run_dir for a, b in zip(local, remote, strict=True) if a.as_json() != b.as_json()
    )
    return ClusterReport(
        tuple(str(d) for d in run_dirs), differing, local_s, cluster_s, cluster.master_url
    )
