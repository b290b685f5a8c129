"""What the judge answers: verdicts and their meanings, the verdict of a repetition and of
a cell, a finding, and the cell statistics' types."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from analysis.judge.guarantees import (
    Guarantee,
)
from analysis.model.evidence import RunEvidence
from analysis.model.results import Example
from harness.rundir.config import CellConfig

EXAMPLES_IN_REASON: Final = 5
VIOLATION_PREFIX: Final = "forbidden "  # every violation reason starts with it, for the reader
# A repetition's events: its evidence, or events written by hand (tests, tools).
Events = RunEvidence | Sequence[Mapping[str, Any]]
Examples = Mapping[str, Sequence[Example]]  # anomaly class → its examples, lowest msg_id first


class Verdict(StrEnum):
    """Outcome of judging a repetition or a cell against the documented guarantee."""

    PASS = "PASS"
    VIOLATION = "VIOLATION"
    EXPECTED_LOSS = "EXPECTED-LOSS"
    KNOWN_BUG = "KNOWN-BUG"
    NOT_PROVOKED = "NOT-PROVOKED"
    UNKNOWN = "UNKNOWN"


# What each verdict means, in the words every rendering (HTML, Markdown, JSON, JUnit) uses.
VERDICT_MEANING: Final = {
    Verdict.PASS: "the documented guarantee held",
    Verdict.VIOLATION: "a documented guarantee was broken",
    Verdict.EXPECTED_LOSS: "acknowledged data was lost where the documentation allows it",
    Verdict.KNOWN_BUG: "acknowledged data was lost by a known bug of this Kafka release, "
    "fixed in a later one (the reason names the JIRA)",
    Verdict.NOT_PROVOKED: "loss is allowed but never happened: the faults were too weak",
    Verdict.UNKNOWN: "incomplete or failed run, or the checker could not judge it",
}


@dataclass(frozen=True)
class RepetitionVerdict:
    """The judgement of one repetition, with the reasons and the guarantee it was held to."""

    verdict: Verdict
    reasons: tuple[str, ...]
    guarantee: Guarantee | None
    run_dir: str = ""
    repetition: int = 0
    loss: int | None = None  # distinct acked messages missing (lost + unseen); None: not judged
    acked: int | None = None
    violations: tuple[str, ...] = ()  # the reasons that are violations of the guarantee


@dataclass(frozen=True)
class CountStats:
    """Mean, minimum, maximum and sum of one count over a cell's repetitions with counts."""

    mean: float
    min: int
    max: int
    total: int


@dataclass(frozen=True)
class CellStats:
    """Aggregated counts of a cell; rates are None when nothing was acknowledged."""

    repetitions: int
    counted: int  # repetitions that had counts
    counts: Mapping[str, CountStats]
    loss_rate: float | None  # sum(loss) / sum(acked)
    divergence_rate: float | None  # sum(offset_divergent) / sum(acked), shown beside, never added


@dataclass(frozen=True)
class CellVerdict:
    """The judgement of one cell over all its repetitions."""

    cell: str
    experiment: str
    config: CellConfig
    verdict: Verdict
    reasons: tuple[str, ...]
    repetitions: tuple[RepetitionVerdict, ...]
    stats: CellStats
    guarantee: Guarantee | None = None


@dataclass(frozen=True)
class Finding:
    """One checker's conclusion about a repetition: a reason, and whether it is a violation."""

    reason: str
    violation: bool = False
    known_bug: bool = False
    unknown: bool = False  # it cannot be judged, so neither can the repetition pass
