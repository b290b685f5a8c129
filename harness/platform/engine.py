"""Find a working Docker engine, or install and start Debian's one when none answers.

Standard library only: it runs before the virtualenv exists (`python3 -m harness.platform.engine`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

DOCKERD_LOG = Path(os.environ.get("KCHAOS_DOCKERD_LOG", "/var/log/kafka-chaos-dockerd.log"))
READY_TIMEOUT_S = 60.0


class EngineUnavailable(RuntimeError):
    """No Docker engine answers and this process cannot start one."""


def engine_answers() -> bool:
    """True when `docker info` succeeds against DOCKER_HOST or the default socket."""
    if shutil.which("docker") is None:
        return False
    probe = subprocess.run(
        ["docker", "info", "--format", "{{.ServerVersion}}"],
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    return probe.returncode == 0


def _is_debian_like() -> bool:
    try:
        release = Path("/etc/os-release").read_text()
    except OSError:
        return False
    return any(name in release for name in ("ID=debian", "ID=ubuntu", "ID_LIKE=debian"))


def _install_docker_io() -> None:
    """Install Debian's docker.io package (client and dockerd)."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "docker.io"],
        check=True,
        env=env,
    )


def _start_dockerd() -> None:
    """Start dockerd in the background, detached from this process, logging to DOCKERD_LOG."""
    DOCKERD_LOG.parent.mkdir(parents=True, exist_ok=True)
    with DOCKERD_LOG.open("ab") as log:
        subprocess.Popen(
            ["dockerd"],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def ensure_engine(*, timeout_s: float = READY_TIMEOUT_S) -> str:
    """Return how the engine was found ('running' or 'started'); raise EngineUnavailable otherwise.

    A working engine is never touched. Without one, as root on Debian/Ubuntu, docker.io is
    installed if missing and dockerd started in the background.
    """
    if engine_answers():
        return "running"
    if os.environ.get("DOCKER_HOST"):
        raise EngineUnavailable(
            f"DOCKER_HOST={os.environ['DOCKER_HOST']} does not answer. "
            "Fix: start that engine, or unset DOCKER_HOST to use the local one."
        )
    if os.geteuid() != 0 or not _is_debian_like():
        raise EngineUnavailable(
            "No Docker engine answers and this process cannot install one (needs root on "
            "Debian/Ubuntu). Fix: start Docker (e.g. `sudo systemctl start docker`) or set "
            "DOCKER_HOST, then rerun."
        )
    if shutil.which("dockerd") is None:
        _install_docker_io()
    _start_dockerd()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if engine_answers():
            return "started"
        time.sleep(0.5)
    raise EngineUnavailable(
        f"dockerd was started but did not answer within {timeout_s:.0f} s. "
        f"Fix: read {DOCKERD_LOG} for the reason."
    )


def main() -> int:
    """Command-line entry: ensure an engine, print what happened, exit 1 with the fix if not."""
    try:
        how = ensure_engine()
    except (EngineUnavailable, subprocess.CalledProcessError) as exc:
        print(f"docker engine: {exc}", file=sys.stderr)
        return 1
    print(f"docker engine: {how}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
