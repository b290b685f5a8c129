"""A ZooKeeper node's readiness probe is bounded: a server that accepts the connection but
never answers (as one did while starting) fails the probe within PROBE_TIMEOUT_S, which the
wait strategy then tries again, instead of holding the cluster's start for good."""

from __future__ import annotations

import socket
import subprocess
import time

from harness.platform.containers import PROBE_TIMEOUT_S, ZOOKEEPER_PORT, readiness
from harness.platform.node import Role


def test_a_silent_server_fails_the_probe_within_its_bound():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        probe = readiness(Role.ZOOKEEPER, 30)._command  # what the container would run
        command = [part.replace(f"/{ZOOKEEPER_PORT} ", f"/{port} ") for part in probe]
        began = time.monotonic()
        done = subprocess.run(command, capture_output=True, timeout=PROBE_TIMEOUT_S + 10)
        took = time.monotonic() - began
    assert done.returncode != 0
    assert PROBE_TIMEOUT_S - 1 <= took <= PROBE_TIMEOUT_S + 3, took
