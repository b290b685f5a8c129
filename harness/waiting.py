"""Waiting for a condition: the one poll loop (in the spirit of testcontainers' wait strategies).

`poll_until` calls a check until it returns something truthy or the time is up; a check that
raises an error the caller names as retriable counts as not yet.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class WaitTimeout(TimeoutError):
    """The condition did not hold in time; the message names what was awaited."""


def poll_until(
    check: Callable[[], T],
    timeout_s: float,
    what: str,
    *,
    interval_s: float = 0.25,
    retry_on: Callable[[Exception], bool] = lambda exc: False,
) -> T:
    """The first truthy value of `check()` within `timeout_s`; WaitTimeout naming `what` after
    that. An exception for which `retry_on` is true counts as not yet (the last one is chained
    to the WaitTimeout); any other propagates at once."""
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while True:
        try:
            if value := check():
                return value
        except Exception as exc:
            if not retry_on(exc):
                raise
            last = exc
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"timed out after {timeout_s:g} s waiting for {what}") from last
        time.sleep(interval_s)
