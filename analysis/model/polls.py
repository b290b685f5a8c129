"""What the poll check (analysis.checks.polls) found: one member's steps that skipped records or
went backwards within one assignment, typed."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Final

from analysis.model.anomalies import AnomalyName
from analysis.model.results import ExampleRows

__all__ = ["UNJOURNALLED_STARTS", "PollFacts", "PollStep"]

# The fact beside the two counts: member starts that processed records but journalled no
# change of assignment (a harness before the assignment journal), whose steps were not judged.
UNJOURNALLED_STARTS: Final = "poll_starts_unjournalled"


@dataclass(frozen=True)
class PollStep:
    """Member `consumer` processed `to_offset` of `partition` at `at_us` right after
    `from_offset`, holding the partition throughout; `skipped` records of the final read-back
    lie strictly between the two (a step backwards has to_offset <= from_offset)."""

    partition: int
    consumer: int
    at_us: int
    from_offset: int
    to_offset: int
    skipped: int

    @property
    def backwards(self) -> bool:
        """Whether the member's position moved back (or stood) instead of forward."""
        return self.to_offset <= self.from_offset

    def row(self) -> dict[str, Any]:
        """Its example row (the registry's POLL_STEP fields)."""
        return asdict(self)


@dataclass(frozen=True)
class PollFacts:
    """The steps found of each class, and the member starts left unjudged."""

    skips: tuple[PollStep, ...] = ()
    backwards: tuple[PollStep, ...] = ()
    unjournalled_starts: int = 0

    @property
    def counts(self) -> dict[str, int]:
        """The registry's Check.POLLS classes (steps), and the unjudged starts."""
        return {
            AnomalyName.POLL_SKIP: len(self.skips),
            AnomalyName.NONMONOTONIC_POLL: len(self.backwards),
            UNJOURNALLED_STARTS: self.unjournalled_starts,
        }

    def examples(self, limit: int) -> ExampleRows:
        """Up to `limit` steps of each class, earliest first."""
        return {
            AnomalyName.POLL_SKIP: [s.row() for s in _earliest(self.skips)[:limit]],
            AnomalyName.NONMONOTONIC_POLL: [s.row() for s in _earliest(self.backwards)[:limit]],
        }


def _earliest(steps: tuple[PollStep, ...]) -> list[PollStep]:
    return sorted(steps, key=lambda s: (s.at_us, s.partition, s.consumer))
