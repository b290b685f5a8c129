"""The one interface every check of a run answers, and the one shape of its facts.

A check (analysis.checks.run.CHECKS lists them) has a name, says whether it applies to a run,
and answers the run's facts as `RunFacts`: counts, examples, a per-second series, and the
evidence beside them (the sensitivity probe, the contract facts, the partitions hit, the
missing messages). The fold (analysis.checks.run.check_run) merges the checks' facts in
registry order with `RunFacts.fold`, so a new check adds no code to the fold or to the
result's assembly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from analysis.model.evidence import RunEvidence
from analysis.model.results import ExampleRows, PartitionCounts, Sensitivity

if TYPE_CHECKING:  # the history reads the message check's columns: no import at run time
    from analysis.checks.history import RunHistory

__all__ = ["RunCheck", "RunFacts", "RunInput"]


@dataclass(frozen=True)
class RunInput:
    """What the checker needs of one run directory besides its two Parquet files."""

    run_dir: Path
    complete: bool  # readback.parquet exists: without it only the send timeline is computed
    unlocated_acks: bool  # acks allow an ok without an offset (acks=0): the send-time proof
    log_start: dict[int, int] = field(default_factory=dict)  # partition → log-start offset
    # Its events, parsed once (read here when the caller did not hand them over).
    evidence: RunEvidence = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.evidence is None:
            object.__setattr__(self, "evidence", RunEvidence.read(self.run_dir))


@dataclass(frozen=True)
class RunFacts:
    """What a check learnt of one run, and the fold of every check's: counts and examples only
    when complete."""

    seconds: dict[int, dict[str, Any]] = field(default_factory=dict)  # epoch second → series
    counts: dict[str, int] = field(default_factory=dict)  # count name → count
    contract: dict[str, int] = field(default_factory=dict)  # CONTRACT_KEYS (analysis.model)
    loss_by_partition: PartitionCounts = field(default_factory=dict)
    divergence_by_partition: PartitionCounts = field(default_factory=dict)
    examples: ExampleRows = field(default_factory=dict)
    missing: list[tuple[int | None, int | None, int | None]] = field(default_factory=list)
    sensitivity: Sensitivity | None = None  # the probes' outcome

    def fold(self, other: RunFacts) -> RunFacts:
        """These facts with `other`'s after them: counts, examples, contract and partitions
        merged by name (`other` wins a name both hold), each second's series merged, the
        missing messages joined and the probes combined (`Sensitivity.__and__`)."""
        seconds = {second: dict(row) for second, row in self.seconds.items()}
        for second, row in other.seconds.items():
            seconds.setdefault(second, {}).update(row)
        if self.sensitivity is None:
            sensitivity = other.sensitivity
        else:
            sensitivity = self.sensitivity & other.sensitivity
        return RunFacts(
            seconds=seconds,
            counts=self.counts | other.counts,
            contract=self.contract | other.contract,
            loss_by_partition={**self.loss_by_partition, **other.loss_by_partition},
            divergence_by_partition={
                **self.divergence_by_partition,
                **other.divergence_by_partition,
            },
            examples=self.examples | other.examples,
            missing=[*self.missing, *other.missing],
            sensitivity=sensitivity,
        )


class RunCheck(Protocol):
    """A check of one run: its name, whether it applies, and its facts in the one shape."""

    @property
    def name(self) -> str:
        """The check's name (what a failure of it is reported under)."""
        ...

    def applies(self, run: RunHistory) -> bool:
        """Whether the run holds what this check judges (a complete read-back, a group's
        journals, transactions, ...)."""
        ...

    def facts(self, run: RunHistory) -> RunFacts:
        """The check's facts of the run; called only where it applies."""
        ...
