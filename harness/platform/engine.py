"""Find a working Docker engine, or install and start Debian's one when none answers.

Standard library only: it runs before the virtualenv exists (`python3 -m harness.platform.engine`).
It asks the engine where the docker SDK (docker.from_env()) will look: DOCKER_HOST, else the
default socket, with an HTTP `GET /_ping`. So an engine behind a mounted socket or a remote
DOCKER_HOST counts even when no docker CLI is installed, and is never replaced.
"""

from __future__ import annotations

import http.client
import os
import shutil
import socket
import ssl
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from harness.waiting import wait_for  # standard library only, as this module

DOCKERD_LOG = Path(os.environ.get("KCHAOS_DOCKERD_LOG", "/var/log/kafka-chaos-dockerd.log"))
READY_TIMEOUT_S = 60.0
DEFAULT_SOCKET = "/var/run/docker.sock"  # the docker SDK's default, as for the CLI
PING_TIMEOUT_S = 5.0
# The pid files dockerd trusts at start-up, with the program each must name. dockerd refuses to
# start beside a live docker.pid, and reuses the containerd that containerd.pid names; once that
# pid has gone to another process (a machine whose processes were killed, the files left), it
# waits on that process until its start-up times out.
PID_FILES = {
    Path("/var/run/docker.pid"): "dockerd",
    Path("/var/run/docker/containerd/containerd.pid"): "containerd",
}


class EngineUnavailable(RuntimeError):
    """No Docker engine answers and this process cannot start one."""


@dataclass(frozen=True)
class Endpoint:
    """Where the Docker API is expected, as DOCKER_HOST (or its absence) names it."""

    scheme: str  # "unix" | "tcp" | anything else (ssh, npipe): not reachable with the stdlib
    address: str  # the socket path for unix, host:port for tcp
    tls: bool = False  # tcp only: HTTPS, as the docker SDK does with DOCKER_TLS_VERIFY/CERT_PATH
    verify: bool = False  # tcp+tls only: check the engine's certificate against ca.pem
    cert_dir: str = ""  # DOCKER_CERT_PATH (ca.pem, cert.pem, key.pem), default ~/.docker

    def __str__(self) -> str:
        return f"{self.scheme}://{self.address}"


def engine_endpoint(env: Mapping[str, str] = os.environ) -> Endpoint:
    """The endpoint docker.from_env() would use: DOCKER_HOST, else the default unix socket."""
    host = env.get("DOCKER_HOST", "").strip()
    if not host:
        return Endpoint("unix", DEFAULT_SOCKET)
    parts = urlsplit(host if "://" in host else f"tcp://{host}")
    if parts.scheme == "unix":
        return Endpoint("unix", parts.path or DEFAULT_SOCKET)
    if parts.scheme in ("tcp", "http", "https"):
        cert_dir = env.get("DOCKER_CERT_PATH", "")
        verify = env.get("DOCKER_TLS_VERIFY", "") not in ("", "0")
        tls = parts.scheme == "https" or verify or bool(cert_dir)
        port = parts.port or (2376 if tls else 2375)
        return Endpoint(
            "tcp",
            f"{parts.hostname or '127.0.0.1'}:{port}",
            tls=tls,
            verify=verify,
            cert_dir=cert_dir or str(Path.home() / ".docker"),
        )
    return Endpoint(parts.scheme, parts.netloc + parts.path)


class _UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over a unix socket, the way the Docker API is served locally."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


def _tls_context(endpoint: Endpoint) -> ssl.SSLContext:
    cert_dir = Path(endpoint.cert_dir)
    if endpoint.verify:
        context = ssl.create_default_context(cafile=str(cert_dir / "ca.pem"))
    else:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if (cert_dir / "cert.pem").is_file():
        context.load_cert_chain(str(cert_dir / "cert.pem"), str(cert_dir / "key.pem"))
    return context


def _connection(endpoint: Endpoint, timeout_s: float) -> http.client.HTTPConnection:
    if endpoint.scheme == "unix":
        return _UnixHTTPConnection(endpoint.address, timeout_s)
    host, port = endpoint.address.rsplit(":", 1)
    if endpoint.tls:
        return http.client.HTTPSConnection(
            host, int(port), timeout=timeout_s, context=_tls_context(endpoint)
        )
    return http.client.HTTPConnection(host, int(port), timeout=timeout_s)


def ping(endpoint: Endpoint, timeout_s: float = PING_TIMEOUT_S) -> bool:
    """True when a Docker API at `endpoint` answers `GET /_ping` with 200 OK.

    Raises PermissionError when a unix socket is there but this user may not open it, so the
    caller can say so instead of installing an engine next to a working one.
    """
    connection = _connection(endpoint, timeout_s)
    try:
        connection.request("GET", "/_ping")
        response = connection.getresponse()
        return response.status == 200 and response.read(16).strip() == b"OK"
    except PermissionError:
        raise
    except (OSError, http.client.HTTPException, ssl.SSLError):
        return False
    finally:
        connection.close()


def _cli_answers() -> bool:
    """True when `docker info` succeeds: the check for endpoints the stdlib cannot reach."""
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


def engine_answers() -> bool:
    """True when the engine at DOCKER_HOST or the default socket answers a ping."""
    endpoint = engine_endpoint()
    if endpoint.scheme in ("unix", "tcp"):
        return ping(endpoint)
    return _cli_answers()  # ssh:// and the like go through the CLI, which knows how


def _is_debian_like() -> bool:
    try:
        release = Path("/etc/os-release").read_text()
    except OSError:
        return False
    return any(name in release for name in ("ID=debian", "ID=ubuntu", "ID_LIKE=debian"))


def apt_install(package: str) -> None:
    """Install Debian's `package` (as root: apt-get, non-interactive, no recommends)."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", package],
        check=True,
        env=env,
    )


def process_name(pid: int) -> str | None:
    """The live process `pid`'s program name (/proc/PID/comm), None when gone or a zombie."""
    proc = Path(f"/proc/{pid}")
    try:
        state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        name = (proc / "comm").read_text().strip()
    except (OSError, IndexError):
        return None
    return None if state in ("Z", "X") else name


def stale_pid_files(files: Mapping[Path, str] = PID_FILES) -> list[Path]:
    """The pid files in `files` that do not name a live process of their program.

    A file that is missing is not stale; one that holds no pid, names no live process, or
    names a process of another program (its pid reused) is.
    """
    stale = []
    for path, program in files.items():
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if not text.isdigit() or process_name(int(text)) != program:
            stale.append(path)
    return stale


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

    A working engine is never touched, nor one that DOCKER_HOST names. Without one, as root
    on Debian/Ubuntu, docker.io is installed if missing and dockerd started in the background.
    """
    try:
        if engine_answers():
            return "running"
    except PermissionError:
        raise EngineUnavailable(
            f"the Docker socket {engine_endpoint().address} is there but this user may not "
            "open it. Fix: add the user to the docker group (`sudo usermod -aG docker $USER`, "
            "then log in again) or run as root."
        ) from None
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
        apt_install("docker.io")  # client and dockerd
    for path in stale_pid_files(PID_FILES):
        print(f"docker engine: removing the stale pid file {path}", file=sys.stderr)
        path.unlink(missing_ok=True)
    _start_dockerd()
    if wait_for(engine_answers, timeout_s, interval_s=0.5):
        return "started"
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
    print(f"docker engine: {how} ({engine_endpoint()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
