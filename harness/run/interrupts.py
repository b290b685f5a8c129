"""Ctrl-C and SIGTERM: stop the run at once, but never in the middle of the cleanup.

The first SIGINT or SIGTERM raises KeyboardInterrupt in the main thread, so every `finally`
heals faults and removes containers, except inside a `deferred()` section: there the signal
only sets `stop`, because raising inside the Kafka client's poll (which runs Python delivery
callbacks) leaves a SystemError instead of an interrupt. The section's own loop watches `stop`
and returns quickly; `raise_if_stopped()` then raises. A second signal never raises: it only
says that the cleanup is still running, so the cleanup always completes.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

# The shell's convention: 128 + the signal number.
EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}


class Interrupts:
    """The process's interrupt state; `install()` makes SIGINT and SIGTERM reach it."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.signal: signal.Signals | None = None
        self._deferring = 0

    def install(self) -> dict[signal.Signals, object]:
        """Handle SIGINT and SIGTERM here, also when SIGINT was inherited as ignored.

        Returns the handlers it replaced, for `restore`.
        """
        return {signum: signal.signal(signum, self._handle) for signum in EXIT_CODES}

    @staticmethod
    def restore(previous: dict[signal.Signals, object]) -> None:
        """Put back the handlers `install` replaced (the CLI called in-process, as in tests)."""
        for signum, handler in previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]

    @property
    def exit_code(self) -> int:
        """130 after SIGINT, 143 after SIGTERM (130 when none was seen)."""
        return EXIT_CODES.get(self.signal or signal.SIGINT, 130)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.stop.is_set():
            print("still cleaning up: healing faults and removing containers", file=sys.stderr)
            return
        self.signal = signal.Signals(signum)
        self.stop.set()
        print(f"{self.signal.name}: stopping, healing faults, removing containers", file=sys.stderr)
        if not self._deferring:
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def deferred(self) -> Iterator[threading.Event]:
        """A section where a signal only sets the yielded `stop` event (the caller watches it)."""
        self._deferring += 1
        try:
            yield self.stop
        finally:
            self._deferring -= 1

    def raise_if_stopped(self) -> None:
        """Raise KeyboardInterrupt when a signal arrived during a deferred section."""
        if self.stop.is_set():
            raise KeyboardInterrupt


# One per process: signals are process-wide. Unless the CLI installs it, nothing sets `stop`.
INTERRUPTS = Interrupts()
