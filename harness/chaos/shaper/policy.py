"""When each packet goes on: the shaper's decisions, pure and seeded (standard library only).

The semantics follow netem's, so users can read them the way they read `tc qdisc ... netem`:
- delay: every packet is held `delay_ms`, plus a uniform draw in [-jitter_ms, +jitter_ms]
  (never below zero). Unlike netem with jitter, packets leave in the order they came: a
  packet is never released before one that arrived earlier and is still held (TCP then sees
  latency, not reordering; `reorder` is the fault for that);
- reorder: `reorder_percent` of the packets skip the delay and go at once, ahead of those held;
- duplicate: `duplicate_percent` of the packets are sent twice;
- drop: `drop_percent` of the packets are dropped, decided before anything else.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Shape:
    """What the shaper does to each packet (see the module docstring)."""

    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    reorder_percent: float = 0.0
    duplicate_percent: float = 0.0
    drop_percent: float = 0.0

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if value < 0:
                raise ValueError(f"{name} must be >= 0 (got {value})")
        for name in ("reorder_percent", "duplicate_percent", "drop_percent"):
            if getattr(self, name) > 100:
                raise ValueError(f"{name} must be <= 100 (got {getattr(self, name)})")

    @property
    def needs_payload(self) -> bool:
        """True when the shaper must see whole packets (to send copies), not just their ids."""
        return self.duplicate_percent > 0


@dataclass(frozen=True)
class Decision:
    """The fate of one packet: dropped, or released at `release_at` (seconds, the caller's
    clock), once or twice."""

    drop: bool
    release_at: float
    duplicate: bool = False
    reordered: bool = False


class Policy:
    """Decides each packet's fate from its arrival time; one instance per queue."""

    def __init__(self, shape: Shape, seed: int | None = None):
        self.shape = shape
        self.rng = random.Random(seed)
        self._last_release = float("-inf")

    def decide(self, arrived: float) -> Decision:
        """The fate of a packet that arrived at `arrived` (calls in arrival order)."""
        shape = self.shape
        if shape.drop_percent and self._chance(shape.drop_percent):
            return Decision(drop=True, release_at=arrived)
        duplicate = bool(shape.duplicate_percent) and self._chance(shape.duplicate_percent)
        if shape.reorder_percent and self._chance(shape.reorder_percent):
            return Decision(drop=False, release_at=arrived, duplicate=duplicate, reordered=True)
        hold_ms = shape.delay_ms
        if shape.jitter_ms:
            hold_ms = max(0.0, hold_ms + self.rng.uniform(-shape.jitter_ms, shape.jitter_ms))
        release_at = max(arrived + hold_ms / 1000.0, self._last_release)
        self._last_release = release_at
        return Decision(drop=False, release_at=release_at, duplicate=duplicate)

    def _chance(self, percent: float) -> bool:
        return self.rng.random() * 100.0 < percent
