"""What the workload's child processes (producers, consumer group members) share: their log
records reach the harness's loggers, a Ctrl-C typed while one starts is left to the harness,
and a built client's program is a command line.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from logging.handlers import QueueHandler
from typing import Any

# Child processes are spawned: librdkafka starts threads of its own, and a forked child would
# inherit a client without them.
CONTEXT = multiprocessing.get_context("spawn")


@dataclass(frozen=True)
class BuiltProgram:
    """A client program the harness built (the Java recorder or member, a family's program in
    one role): its library's version, the command line that runs it (the contract's arguments
    follow) and how reports name the client (`java 3.8.0`, `franz-go 1.22.3`)."""

    version: str
    argv: tuple[str, ...]
    label: str = ""


def forward_logs(logs: Any) -> None:
    """Hand the log records children put on the `logs` queue to this process's loggers, until
    None arrives or the queue is closed."""
    while True:
        try:
            record = logs.get()
        except Exception:  # the queue was closed under us
            return
        if record is None:
            return
        logging.getLogger(record.name).handle(record)


@contextlib.contextmanager
def sigint_held() -> Iterator[None]:
    """SIGINT blocked in the calling thread meanwhile, in any thread (the nemesis thread starts
    members again too). A child spawned now starts with it blocked, since the mask survives
    fork and exec, until child_setup ignores it: a Ctrl-C typed while the child imports is no
    traceback. The harness loses nothing: a SIGINT held back here is delivered when the block
    ends, or at once to a thread that does not block it."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def child_setup(logs: Any, level: int) -> threading.Event:
    """In a freshly spawned child: ignore SIGINT (the harness decides), turn SIGTERM into the
    returned stop event, and send log records of `level` and above to the parent's `logs`."""
    stop = threading.Event()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C held back while it started: gone
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    root = logging.getLogger()
    root.handlers[:] = [QueueHandler(logs)]
    root.setLevel(level)
    return stop
