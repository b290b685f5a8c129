"""What the judge answers: verdicts and their meanings, the verdict of a repetition and of
a cell, a finding, and the cell statistics' types."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from analysis.judge.guarantees import Guarantee
from analysis.model.anomalies import AnomalyName, CountName
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
    Verdict.KNOWN_BUG: "a documented guarantee was broken by a known bug of this Kafka "
    "release or client, fixed in a later one or still open (the reason names the JIRA)",
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
    # The reasons of the findings judged KNOWN-BUG, also where another finding decides the
    # verdict (an UNKNOWN stall beside a known bug's lost commits): the bug was still shown.
    known_bugs: tuple[str, ...] = ()

    @property
    def loss_rate(self) -> float | None:
        """loss / acked; None when the loss was not counted or nothing was acknowledged."""
        return self.loss / self.acked if self.loss is not None and self.acked else None


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


# What a finding is about: an anomaly class, the loss figure, or None for the run's own record
# (a consumer group's end, the transactions' outcomes).
Subject = AnomalyName | CountName | None
# The verdicts a finding can give, most severe first: a repetition gets the first any of its
# findings gives (EXPECTED-LOSS only from the loss figure's finding, when loss is allowed).
FINDING_SEVERITY: Final = (
    Verdict.VIOLATION,
    Verdict.UNKNOWN,
    Verdict.KNOWN_BUG,
    Verdict.EXPECTED_LOSS,
    Verdict.PASS,
)


@dataclass(frozen=True)
class Finding:
    """One checker's conclusion about a repetition: what it is about, the verdict it alone
    would give the repetition, its words, and the examples those words quote.

    `reason` is the sentence every report shows: VIOLATION_PREFIX then the detail for a
    violation, the detail alone otherwise.
    """

    anomaly: Subject
    verdict: Verdict
    detail: str
    examples: tuple[Example, ...] = ()

    def __post_init__(self) -> None:
        if self.verdict not in FINDING_SEVERITY:
            raise ValueError(f"a finding cannot be {self.verdict}: that is a cell's verdict")

    @property
    def reason(self) -> str:
        """The detail, prefixed with VIOLATION_PREFIX when it is a violation."""
        return f"{VIOLATION_PREFIX}{self.detail}" if self.violation else self.detail

    @property
    def violation(self) -> bool:
        """It breaks the documented guarantee."""
        return self.verdict == Verdict.VIOLATION

    @property
    def unknown(self) -> bool:
        """It cannot be judged, so neither can the repetition pass."""
        return self.verdict == Verdict.UNKNOWN


def most_severe(findings: Iterable[Finding]) -> Verdict:
    """The verdict of a repetition from its findings: the most severe any gives (PASS for
    none)."""
    given = {f.verdict for f in findings}
    return next((v for v in FINDING_SEVERITY if v in given), Verdict.PASS)
