"""Waiting for a condition: the one poll loop (in the spirit of testcontainers' wait strategies).

`poll_until` calls a check until it returns something truthy, and raises WaitTimeout naming
what it waited for once the time is up; `wait_for` is the same loop answering None instead
(for callers that raise their own error, or that may be told to stop waiting). A check that
raises an error the caller names as retriable counts as "not yet". `Deadline` is the clock
of loops that are not waits: a workload that runs for a duration, a queue read within a grace.

Standard library only: harness/platform/engine.py waits with it before the virtualenv exists.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

# How to spend the interval between two checks; a true answer ends the wait (e.g. an Event's
# wait: set means "stop waiting"). time.sleep answers None: it never does.
Pause = Callable[[float], object]


class WaitTimeout(TimeoutError):
    """The condition did not hold in time; the message names what was awaited.

    `last_error` is the last retriable error the check raised (also the __cause__), if any."""

    def __init__(self, message: str, last_error: Exception | None = None):
        super().__init__(message)
        self.last_error = last_error


@dataclass(frozen=True)
class Deadline:
    """A moment on the monotonic clock."""

    at: float

    @classmethod
    def after(cls, seconds: float | None) -> Deadline:
        """`seconds` from now; None is never."""
        return cls(math.inf if seconds is None else time.monotonic() + seconds)

    def passed(self) -> bool:
        """True from the moment on."""
        return time.monotonic() >= self.at

    def remaining(self) -> float:
        """Seconds left, never below 0 (inf for a deadline that never comes)."""
        return max(0.0, self.at - time.monotonic())


def _never(exc: Exception) -> bool:
    """The default retry_on: no error is "not yet"."""
    return False


def poll_until(
    check: Callable[[], T | None],
    timeout_s: float,
    what: str,
    *,
    interval_s: float = 0.25,
    describe: Callable[[], str] | None = None,
    retry_on: Callable[[Exception], bool] = _never,
) -> T:
    """The first truthy value of `check()`; WaitTimeout once `timeout_s` passed, its message
    "timed out after <timeout_s> s waiting for <what>" plus, on the next line, what
    `describe()` says (the state that explains it). The check runs at least once.

    An exception for which `retry_on` is true counts as not yet (the last one is chained to
    the WaitTimeout); any other propagates at once."""
    value, last = _poll(check, Deadline.after(timeout_s), interval_s, retry_on, time.sleep)
    if value:
        return value
    detail = f"\n{describe()}" if describe is not None else ""
    raise WaitTimeout(f"timed out after {timeout_s:g} s waiting for {what}{detail}", last) from last


def wait_for(
    check: Callable[[], T | None],
    timeout_s: float,
    *,
    interval_s: float = 0.25,
    retry_on: Callable[[Exception], bool] = _never,
    pause: Pause | None = None,
) -> T | None:
    """The first truthy value of `check()`, or None once `timeout_s` passed or `pause` (how
    the interval is spent, after the time check; time.sleep when None) answered true. The
    check runs at least once; `retry_on` as in `poll_until`."""
    return _poll(check, Deadline.after(timeout_s), interval_s, retry_on, pause or time.sleep)[0]


def _poll(
    check: Callable[[], T | None],
    deadline: Deadline,
    interval_s: float,
    retry_on: Callable[[Exception], bool],
    pause: Pause,
) -> tuple[T | None, Exception | None]:
    """The loop itself: (the first truthy value or None, the last retriable error)."""
    last: Exception | None = None
    while True:
        try:
            if value := check():
                return value, last
        except Exception as exc:
            if not retry_on(exc):
                raise
            last = exc
        if deadline.passed() or pause(interval_s):
            return None, last
