"""The plugin's two errors: what the test asked for is wrong, or the run itself failed."""

from __future__ import annotations

__all__ = ["ChaosError", "ChaosUsageError"]


class ChaosUsageError(ValueError):
    """The test asked for something the harness cannot do (an unknown fault or target, an
    invalid option or producer setting); the message names the problem and the fix."""


class ChaosError(RuntimeError):
    """The harness could not do what the test asked (no Docker engine, a cluster that did not
    start, a fault that failed to inject); the message says what happened."""
