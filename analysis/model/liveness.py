"""What the liveness check (analysis.checks.liveness) found: stuck windows and resets, typed."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from analysis.model.anomalies import AnomalyName
from analysis.model.results import ExampleRow, ExampleRows

__all__ = ["LivenessFacts", "Reset", "StuckWindow"]


@dataclass(frozen=True)
class StuckWindow:
    """A partition on which the group made no progress from `from_us` to `to_us` (epoch µs)
    while its readable end stood past its `position`, for longer than the bound outside every
    fault. `end` is the highest readable end seen in the window; `lso_held`: that end is the high
    watermark above a last stable offset held longer than a transaction may hold it."""

    partition: int
    from_us: int
    to_us: int
    position: int
    end: int
    lso_held: bool = False

    def row(self) -> ExampleRow:
        """Its example row (the registry's STUCK_WINDOW fields)."""
        return asdict(self)


@dataclass(frozen=True)
class Reset:
    """A member that resumed `partition` at `reset_to` (at `at_us`) below the offset the group
    had committed there (`committed`): `reprocessed` offsets read again. Evidence for the
    judge: whether the partition's leader changed, and whether a sampled high watermark stood
    below `committed` (the committed offset no longer existed), between that commit and now."""

    partition: int
    at_us: int
    reset_to: int
    committed: int
    leader_changed: bool = False
    end_below: bool = False

    @property
    def reprocessed(self) -> int:
        """The offsets below the committed one the group read again."""
        return self.committed - self.reset_to

    def row(self) -> ExampleRow:
        """Its example row (the registry's RESET_POINT fields)."""
        return {**asdict(self), "reprocessed": self.reprocessed}


@dataclass(frozen=True)
class LivenessFacts:
    """The two classes' counts (windows, resets), their examples, and per epoch second the
    timeline's `stuck` (partitions in a stuck window) and `reset` (offsets read again)."""

    stuck: tuple[StuckWindow, ...] = ()
    resets: tuple[Reset, ...] = ()
    seconds: dict[int, dict[str, int]] = field(default_factory=dict)
    ends_recorded: bool = True  # False: no sample held ends, so `stuck` was not decided

    @property
    def counts(self) -> dict[str, int]:
        """The registry's Check.LIVENESS classes: stuck windows, resets."""
        return {AnomalyName.STUCK: len(self.stuck), AnomalyName.RESET: len(self.resets)}

    def examples(self, limit: int) -> ExampleRows:
        """Up to `limit` of each, resets whose committed offset still existed first."""
        resets = sorted(self.resets, key=lambda r: (r.end_below, r.at_us, r.partition))
        stuck = sorted(self.stuck, key=lambda w: (w.from_us, w.partition))
        return {
            AnomalyName.STUCK: [w.row() for w in stuck[:limit]],
            AnomalyName.RESET: [r.row() for r in resets[:limit]],
        }
