"""What the message check reads of one run and what it learns (analysis.checks.messages)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.model.evidence import RunEvidence
from analysis.model.results import ExampleRows, PartitionCounts, Sensitivity

# Acked rows up to which a run is checked whole in one Spark task: a task holds about this many
# rows and their records, some hundreds of bytes each in numpy, so well under 2 GB; larger runs
# are checked as DataFrame operations, which spill to disk (analysis.spark.messages).
CHUNK_ROWS = 2_000_000


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
    """Everything the reconciliation learnt of one run; counts and examples only when complete."""

    seconds: dict[int, dict[str, Any]]  # epoch second of send → timeline entry
    counts: dict[str, int]  # the send counts always; read and every anomaly class when complete
    contract: dict[str, int]  # CONTRACT_KEYS of analysis.model.results
    loss_by_partition: PartitionCounts = field(default_factory=dict)
    divergence_by_partition: PartitionCounts = field(default_factory=dict)
    examples: ExampleRows = field(default_factory=dict)
    missing: list[tuple[int | None, int | None, int | None]] = field(default_factory=list)
    sensitivity: Sensitivity | None = None  # the probe's outcome
