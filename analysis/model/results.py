"""The reconciliation of one repetition, typed: what reconcile produces and verdicts and the
report read. results.json is its serialisation, written only here (`as_json`), in the shape
docs/run-directory.md documents.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, Final, TypedDict

from analysis.model.anomalies import EXAMPLE_FIELDS, AnomalyName, Counts
from analysis.model.attribution import Attribution
from analysis.model.availability import Availability, AvailabilityJson
from analysis.model.evidence import RunEvidence
from harness.rundir.config import CellConfig
from harness.rundir.records import STATUSES

__all__ = [
    "CONTRACT_KEYS",
    "TIMELINE_ANOMALIES",
    "Contract",
    "Example",
    "ExampleJson",
    "ExampleRow",
    "ExampleRows",
    "PartitionCounts",
    "RunResult",
    "RunResultJson",
    "RunStatus",
    "Sensitivity",
    "TimelineSecond",
]

# Facts about a run's own records, checked before judging (see analysis.judge.verdicts).
CONTRACT_KEYS: Final = (
    "repeated_msg_ids",
    "unidentified_rows",
    "unknown_statuses",
    *(f"reported_{s}" for s in STATUSES),
)
# A run's contract facts: CONTRACT_KEYS → count.
Contract = Mapping[str, int]
# Messages of one kind per acked partition: the partition as text ("unknown": none) → count.
PartitionCounts = Mapping[str, int]


# A check's example before it is typed: at least the fields EXAMPLE_FIELDS names for its class.
ExampleRow = dict[str, Any]
# A check's examples: anomaly class (an AnomalyName) → its rows, lowest msg_id first.
ExampleRows = dict[str, list[ExampleRow]]


# An example in results.json: the fields its class shows (Example's fields) → their values.
ExampleJson = dict[str, int | str | bool | None]


class RunStatus(StrEnum):
    """How far the reconciliation of a repetition got."""

    COMPLETE = "complete"  # read back and reconciled: counts are there
    INCOMPLETE = "incomplete"  # no readback.parquet: only the send timeline
    ERROR = "error"  # unreadable files or a failed query: `error` says why


@dataclass(frozen=True)
class Example:
    """One anomalous message or record; each class shows the fields EXAMPLE_FIELDS names."""

    msg_id: int | None = None
    partition: int | None = None
    offset: int | None = None
    readback_msg_id_at_offset: int | None = None
    reads: int | None = None
    key: str | None = None
    key_seq: int | None = None
    max_key_seq_before: int | None = None
    processed: int | None = None  # times the consumer group processed the record
    txn: int | None = None  # the transaction of a transactional run's example
    # A liveness example (analysis.checks.liveness): a stuck window or a reset.
    from_us: int | None = None
    to_us: int | None = None
    position: int | None = None
    end: int | None = None
    lso_held: bool | None = None
    at_us: int | None = None
    reset_to: int | None = None
    committed: int | None = None
    seen_us: int | None = (
        None  # a lost commit: when the read that showed it was asked (None: the end)
    )
    reprocessed: int | None = None
    leader_changed: bool | None = None
    end_below: bool | None = None
    consumed: int | None = None  # times the group processed an aborted message
    # A poll step (analysis.checks.polls): the member and the two offsets it processed.
    consumer: int | None = None
    from_offset: int | None = None
    to_offset: int | None = None
    skipped: int | None = None
    read_by_aborted: int | None = None  # the transactions' reader: skipped records it aborted
    # A cyclic component of committed transactions (analysis.checks.cycles).
    transactions: int | None = None
    cycle: str | None = None
    # Two reads of one offset that disagree (analysis.checks.offset_reads): who read msg_id,
    # and the other reader's message and name.
    read_by: str | None = None
    other_msg_id: int | None = None
    other_read_by: str | None = None
    # A misplaced record (analysis.checks.placement): a partition its send went to, and what
    # of the record is not its send's (partition, key, key_seq).
    sent_partition: int | None = None
    mismatch: str | None = None

    @classmethod
    def of(cls, anomaly: str, fields: Mapping[str, Any]) -> Example:
        """The example of class `anomaly` from a row holding at least its fields."""
        return cls(**{name: fields.get(name) for name in EXAMPLE_FIELDS[anomaly]})

    def as_json(self, anomaly: str) -> ExampleJson:
        """The results.json form: exactly the fields its class shows."""
        return {name: getattr(self, name) for name in EXAMPLE_FIELDS[anomaly]}


# The timeline's anomaly series (TimelineSecond's fields): per second of send time, the
# acknowledged messages later missing (any loss class) or duplicated.
MISSING: Final = "missing"
TIMELINE_ANOMALIES: Final = (MISSING, AnomalyName.DUPLICATED)


@dataclass(frozen=True)
class TimelineSecond:
    """One epoch second of send time: outcomes, acked messages later missing or duplicated,
    and the ack latency percentiles (None without an ok send that second)."""

    t_s: int  # whole seconds from the epoch second of the run's first send
    epoch_s: int
    sent: int = 0
    ok: int = 0
    failed: int = 0
    indeterminate: int = 0
    missing: int = 0
    duplicated: int = 0
    ack_latency_p50_ms: float | None = None
    ack_latency_p99_ms: float | None = None
    processed: int = 0  # by the consumer group (workload.consumers), in this epoch second
    commits_failed: int = 0  # the group's commit attempts refused in this second
    group_lag: int | None = None  # records acked but not committed by the group at its end
    stuck: int = 0  # partitions in a stuck window during this second (analysis.checks.liveness)
    reset: int = 0  # offsets the group read again after a reset that began this second


@dataclass(frozen=True)
class Sensitivity:
    """The sensitivity probe: records hidden from a copy of the read-back, and found missing.

    `passed` is None when the probe does not apply: it had nothing to hide (an empty read-back,
    no healthy record), so it proves nothing either way and must never read as a pass.
    """

    removed: int
    found: int
    passed: bool | None

    @classmethod
    def of(cls, removed: int, found: int, *, clean: bool) -> Sensitivity:
        """A probe that hid `removed` and found `found` (clean: nothing else reported); passed
        is None when nothing was hidden."""
        passed = None if removed == 0 else found == removed and clean
        return cls(removed=removed, found=found, passed=passed)

    @property
    def applies(self) -> bool:
        """Whether the probe hid anything it could check."""
        return self.passed is not None

    def __and__(self, other: Sensitivity | None) -> Sensitivity:
        """Two probes as one: what both removed and found; failed when either failed, passed
        when every probe that applies passed, None when neither applies."""
        if other is None or not other.applies:
            return self
        if not self.applies:
            return other
        return Sensitivity(
            removed=self.removed + other.removed,
            found=self.found + other.found,
            passed=bool(self.passed and other.passed),
        )


class RunResultJson(TypedDict):
    """The results.json object (docs/run-directory.md); `loss` is CountName.LOSS."""

    run_dir: str
    experiment: str
    cell: str
    repetition: int
    config: Mapping[str, object]  # CellConfig.as_json()
    axes: dict[str, str]
    status: str
    counts: dict[str, int] | None
    examples: dict[str, list[ExampleJson]]
    timeline: list[dict[str, int | float | None]]  # TimelineSecond's fields
    error: str | None
    loss: int | None
    loss_by_partition: dict[str, int]
    divergence_by_partition: dict[str, int]
    contract: dict[str, int] | None
    sensitivity: dict[str, int | bool | None] | None  # Sensitivity's fields
    attribution: Mapping[str, object] | None  # Attribution.as_dict()
    availability: AvailabilityJson | None
    availability_error: str | None


@dataclass(frozen=True)
class RunResult:
    """The reconciliation of one repetition directory."""

    run_dir: str
    experiment: str
    cell: str
    repetition: int
    config: CellConfig
    axes: Mapping[str, str]
    status: RunStatus
    counts: Counts | None = None  # COUNT_NAMES of analysis.model.anomalies
    examples: Mapping[str, tuple[Example, ...]] = field(default_factory=dict)
    timeline: tuple[TimelineSecond, ...] = ()
    error: str | None = None
    loss: int | None = None  # the one loss figure: sum of the counts that count as loss
    loss_by_partition: PartitionCounts = field(default_factory=dict)
    divergence_by_partition: PartitionCounts = field(default_factory=dict)
    contract: Contract | None = None  # facts checked before judging
    sensitivity: Sensitivity | None = None
    attribution: Attribution | None = None  # where missing messages still are
    availability: Availability | None = None  # the price of safety (analysis.checks.availability)
    availability_error: str | None = None  # why `availability` is None, when it was tried
    # The run's events as reconcile parsed them, carried to the judge so events.jsonl is read
    # once per run; never serialised (None: a result read back, or made by hand).
    evidence: RunEvidence | None = field(default=None, compare=False, repr=False)

    def origin_us(self) -> float | None:
        """Epoch µs of t=0, the timeline's origin; None without a timeline."""
        if not self.timeline:
            return None
        first = self.timeline[0]
        return (float(first.epoch_s) - float(first.t_s)) * 1e6

    def as_json(self) -> RunResultJson:
        """The results.json object (docs/run-directory.md)."""
        return {
            "run_dir": self.run_dir,
            "experiment": self.experiment,
            "cell": self.cell,
            "repetition": self.repetition,
            "config": self.config.as_json(),
            "axes": dict(self.axes),
            "status": self.status.value,
            "counts": None if self.counts is None else dict(self.counts),
            "examples": {
                name: [example.as_json(name) for example in rows]
                for name, rows in self.examples.items()
            },
            "timeline": [asdict(second) for second in self.timeline],
            "error": self.error,
            "loss": self.loss,
            "loss_by_partition": dict(self.loss_by_partition),
            "divergence_by_partition": dict(self.divergence_by_partition),
            "contract": None if self.contract is None else dict(self.contract),
            "sensitivity": None if self.sensitivity is None else asdict(self.sensitivity),
            "attribution": None if self.attribution is None else self.attribution.as_dict(),
            "availability": None if self.availability is None else self.availability.as_json(),
            "availability_error": self.availability_error,
        }
