"""What the poll check (analysis.checks.polls) found: one member's steps that skipped records or
went backwards within one assignment, typed."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Final

from analysis.model.anomalies import AnomalyName
from analysis.model.results import ExampleRow, ExampleRows

__all__ = [
    "READER",
    "REWRITTEN_STEPS",
    "SKIPS_AFTER_ABORT",
    "UNJOURNALLED_STARTS",
    "PollFacts",
    "PollStep",
]

READER: Final = -1  # the `consumer` of the transactions' reader's steps (analysis.checks.polls)

# The fact beside the two counts: member starts that processed records but journalled no
# change of assignment (a harness before the assignment journal), whose steps were not judged.
UNJOURNALLED_STARTS: Final = "poll_starts_unjournalled"
# The other fact: the transactions' reader's skips that passed over records only its aborted
# transactions read (KAFKA-17582's pattern), judged all alike beyond the examples.
SKIPS_AFTER_ABORT: Final = "poll_skips_after_abort"
# And the steps taken on a log since rewritten under the member (an unclean election, a lost
# tail): one of their two records is not the read-back's at its offset, so the read-back
# cannot say what the member's log held between them. In neither class; the rewrite itself is
# `inconsistent_reads`.
REWRITTEN_STEPS: Final = "poll_steps_rewritten"


@dataclass(frozen=True)
class PollStep:
    """Member `consumer` processed `to_offset` of `partition` at `at_us` right after
    `from_offset`, holding the partition throughout; `skipped` records of the final read-back
    lie strictly between the two (a step backwards has to_offset <= from_offset). The
    transactions' reader is `consumer` READER (analysis.checks.polls)."""

    partition: int
    consumer: int
    at_us: int
    from_offset: int
    to_offset: int
    skipped: int
    # The transactions' reader only: how many of the skipped records an aborted transaction
    # of the reader read (None for a group member).
    read_by_aborted: int | None = None

    @property
    def after_abort(self) -> bool:
        """Whether every record it passed over was read by an aborted transaction of the
        reader (KAFKA-17582's pattern)."""
        return self.skipped > 0 and self.read_by_aborted == self.skipped

    @property
    def backwards(self) -> bool:
        """Whether the member's position moved back (or stood) instead of forward."""
        return self.to_offset <= self.from_offset

    def row(self) -> ExampleRow:
        """Its example row (the registry's POLL_STEP fields)."""
        return asdict(self)


@dataclass(frozen=True)
class PollFacts:
    """The steps found of each class, and the member starts left unjudged."""

    skips: tuple[PollStep, ...] = ()
    backwards: tuple[PollStep, ...] = ()
    unjournalled_starts: int = 0
    rewritten: int = 0  # steps on a log since rewritten (REWRITTEN_STEPS)

    @property
    def counts(self) -> dict[str, int]:
        """The registry's Check.POLLS classes (steps), and the unjudged starts."""
        return {
            AnomalyName.POLL_SKIP: len(self.skips),
            AnomalyName.NONMONOTONIC_POLL: len(self.backwards),
            UNJOURNALLED_STARTS: self.unjournalled_starts,
            SKIPS_AFTER_ABORT: sum(s.after_abort for s in self.skips),
            REWRITTEN_STEPS: self.rewritten,
        }

    def examples(self, limit: int) -> ExampleRows:
        """Up to `limit` steps of each class, earliest first."""
        return {
            AnomalyName.POLL_SKIP: [s.row() for s in _earliest(self.skips)[:limit]],
            AnomalyName.NONMONOTONIC_POLL: [s.row() for s in _earliest(self.backwards)[:limit]],
        }


def _earliest(steps: tuple[PollStep, ...]) -> list[PollStep]:
    return sorted(steps, key=lambda s: (s.at_us, s.partition, s.consumer))
