"""Engine discovery: a working engine is left alone; without one and without root, a clear error.

The ping is tested against fake engines (an HTTP server on a unix socket and on a TCP port),
so no Docker is needed.
"""

from __future__ import annotations

import contextlib
import http.server
import os
import socket
import socketserver
import threading
from typing import ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness import waiting
from harness.platform import engine


@pytest.fixture(autouse=True)
def _own_pid_files(tmp_path, monkeypatch):
    """No test reads or removes the machine's own dockerd pid files."""
    monkeypatch.setattr(
        engine,
        "PID_FILES",
        {tmp_path / "docker.pid": "dockerd", tmp_path / "containerd.pid": "containerd"},
    )


def test_a_working_engine_is_never_touched(monkeypatch):
    monkeypatch.setattr(engine, "engine_answers", lambda: True)
    monkeypatch.setattr(engine, "apt_install", lambda package: pytest.fail("installed"))
    monkeypatch.setattr(engine, "_start_dockerd", lambda: pytest.fail("started"))
    assert engine.ensure_engine() == "running"


def test_without_engine_and_without_root_the_error_names_the_fix(monkeypatch):
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr(engine, "engine_answers", lambda: False)
    monkeypatch.setattr(engine.os, "geteuid", lambda: 1000)
    with pytest.raises(engine.EngineUnavailable, match="start Docker"):
        engine.ensure_engine()


def test_a_dead_docker_host_is_reported_not_replaced(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:1")
    monkeypatch.setattr(engine, "engine_answers", lambda: False)
    monkeypatch.setattr(engine, "_start_dockerd", lambda: pytest.fail("started"))
    with pytest.raises(engine.EngineUnavailable, match="DOCKER_HOST"):
        engine.ensure_engine()


def test_as_root_without_engine_dockerd_is_started_and_awaited(monkeypatch):
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    answers = iter([False, False, True])
    started = []
    monkeypatch.setattr(engine, "engine_answers", lambda: next(answers))
    monkeypatch.setattr(engine.os, "geteuid", lambda: 0)
    monkeypatch.setattr(engine, "_is_debian_like", lambda: True)
    monkeypatch.setattr(engine.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(engine, "_start_dockerd", lambda: started.append(True))
    monkeypatch.setattr(waiting.time, "sleep", lambda s: None)
    assert engine.ensure_engine() == "started"
    assert started == [True]


def _root_on_debian_without_engine(monkeypatch) -> None:
    """As root on Debian with dockerd installed, no DOCKER_HOST and no engine answering."""
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr(engine, "engine_answers", lambda: False)
    monkeypatch.setattr(engine.os, "geteuid", lambda: 0)
    monkeypatch.setattr(engine, "_is_debian_like", lambda: True)
    monkeypatch.setattr(engine.shutil, "which", lambda name: f"/usr/bin/{name}")


def test_a_started_dockerd_that_never_answers_names_its_log(monkeypatch):
    _root_on_debian_without_engine(monkeypatch)
    monkeypatch.setattr(engine, "_start_dockerd", lambda: None)
    with pytest.raises(engine.EngineUnavailable, match=r"did not answer within 0 s\. Fix: read"):
        engine.ensure_engine(timeout_s=0)


def test_stale_pid_files_are_removed_before_dockerd_starts(monkeypatch):
    """A containerd.pid whose pid went to another process made dockerd wait on it 60 s."""
    _root_on_debian_without_engine(monkeypatch)
    monkeypatch.setattr(engine, "process_name", {1: "systemd", 2: "dockerd"}.get)
    docker_pid, containerd_pid = engine.PID_FILES
    docker_pid.write_text("2")  # a live dockerd: kept
    containerd_pid.write_text("1\n")  # pid reused by another program: removed
    seen = []
    monkeypatch.setattr(
        engine,
        "_start_dockerd",
        lambda: seen.append((docker_pid.exists(), containerd_pid.exists())),
    )
    with pytest.raises(engine.EngineUnavailable):
        engine.ensure_engine(timeout_s=0)
    assert seen == [(True, False)]


PIDS = st.integers(min_value=1, max_value=6)
NAMES = st.sampled_from(["dockerd", "containerd", "sleep"])


@given(
    contents=st.lists(
        st.one_of(st.none(), PIDS.map(str), st.just("x"), st.just("")), min_size=2, max_size=2
    ),
    live=st.dictionaries(PIDS, NAMES),
)
def test_a_pid_file_is_stale_unless_it_names_a_live_process_of_its_program(
    tmp_path_factory, contents, live
):
    folder = tmp_path_factory.mktemp("pids")
    files = {folder / "a.pid": "dockerd", folder / "b.pid": "containerd"}
    for path, text in zip(files, contents, strict=True):
        if text is not None:
            path.write_text(text + "\n")
    expected = [
        path
        for (path, program), text in zip(files.items(), contents, strict=True)
        if text is not None and live.get(int(text) if text.isdigit() else -1) != program
    ]
    original = engine.process_name
    engine.process_name = live.get
    try:
        assert engine.stale_pid_files(files) == expected
    finally:
        engine.process_name = original


def test_process_name_reads_a_live_process_and_not_a_gone_one():
    assert engine.process_name(os.getpid()).startswith("python")
    assert engine.process_name(2**22 + 1) is None  # above the kernel's pid_max


def test_main_exits_non_zero_with_the_message(monkeypatch, capsys):
    def unavailable():
        raise engine.EngineUnavailable("no engine. Fix: start Docker")

    monkeypatch.setattr(engine, "ensure_engine", unavailable)
    assert engine.main() == 1
    assert "Fix: start Docker" in capsys.readouterr().err


# --- the ping, against fake engines: a unix socket and a TCP port that speak HTTP ---


class _FakeEngine(http.server.BaseHTTPRequestHandler):
    """Answers `GET /_ping` the way dockerd does, or with `status` when the class sets one."""

    status = 200
    body = b"OK"
    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.seen.append(self.path)
        self.send_response(self.status)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args) -> None:
        pass


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self):
        request, _ = super().get_request()
        return request, ("local", 0)  # BaseHTTPRequestHandler wants a (host, port) pair


@contextlib.contextmanager
def serving(server):
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def unix_engine(tmp_path):
    """A fake engine on a unix socket; yields the socket path."""
    path = str(tmp_path / "docker.sock")
    _FakeEngine.seen = []
    with serving(_UnixHTTPServer(path, _FakeEngine)):
        yield path


@pytest.fixture
def tcp_engine():
    """A fake engine on 127.0.0.1:<free port>; yields 'host:port'."""
    _FakeEngine.seen = []
    with serving(http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeEngine)) as server:
        yield f"127.0.0.1:{server.server_address[1]}"


def test_the_endpoint_is_where_the_docker_sdk_looks():
    assert engine.engine_endpoint({}) == engine.Endpoint("unix", "/var/run/docker.sock")
    assert engine.engine_endpoint({"DOCKER_HOST": "unix:///run/user/1000/docker.sock"}).address == (
        "/run/user/1000/docker.sock"
    )
    plain = engine.engine_endpoint({"DOCKER_HOST": "tcp://dind:2375"})
    assert (plain.scheme, plain.address, plain.tls) == ("tcp", "dind:2375", False)
    secure = engine.engine_endpoint({"DOCKER_HOST": "tcp://10.0.0.5", "DOCKER_TLS_VERIFY": "1"})
    assert (secure.address, secure.tls, secure.verify) == ("10.0.0.5:2376", True, True)
    assert engine.engine_endpoint({"DOCKER_HOST": "ssh://me@box"}).scheme == "ssh"


def test_a_unix_socket_engine_answers_the_ping(unix_engine):
    assert engine.ping(engine.Endpoint("unix", unix_engine)) is True
    assert _FakeEngine.seen == ["/_ping"]


def test_a_tcp_engine_answers_the_ping(tcp_engine):
    assert engine.ping(engine.Endpoint("tcp", tcp_engine)) is True


def test_an_engine_that_answers_an_error_does_not_count(unix_engine, monkeypatch):
    monkeypatch.setattr(_FakeEngine, "status", 500)
    monkeypatch.setattr(_FakeEngine, "body", b"daemon is shutting down")
    assert engine.ping(engine.Endpoint("unix", unix_engine)) is False


def test_no_socket_and_a_closed_port_do_not_count(tmp_path):
    assert engine.ping(engine.Endpoint("unix", str(tmp_path / "absent.sock"))) is False
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound but never listening: connection refused
        port = sock.getsockname()[1]
        assert engine.ping(engine.Endpoint("tcp", f"127.0.0.1:{port}"), timeout_s=1) is False


def test_an_engine_behind_docker_host_is_used_without_a_docker_cli(unix_engine, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{unix_engine}")
    monkeypatch.setattr(engine.shutil, "which", lambda name: None)  # no docker, no dockerd
    monkeypatch.setattr(engine, "apt_install", lambda package: pytest.fail("installed"))
    monkeypatch.setattr(engine, "_start_dockerd", lambda: pytest.fail("started"))
    assert engine.ensure_engine() == "running"
    assert _FakeEngine.seen == ["/_ping"]


def test_a_remote_tcp_engine_is_used_without_a_docker_cli(tcp_engine, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"tcp://{tcp_engine}")
    monkeypatch.setattr(engine.shutil, "which", lambda name: None)
    monkeypatch.setattr(engine, "apt_install", lambda package: pytest.fail("installed"))
    assert engine.ensure_engine() == "running"


def test_a_socket_this_user_may_not_open_names_the_docker_group(monkeypatch):
    def refused(endpoint, timeout_s=engine.PING_TIMEOUT_S):
        raise PermissionError(13, "Permission denied")

    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr(engine, "ping", refused)
    monkeypatch.setattr(engine, "apt_install", lambda package: pytest.fail("installed"))
    with pytest.raises(engine.EngineUnavailable, match="docker group"):
        engine.ensure_engine()
