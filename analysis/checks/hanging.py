"""The hanging-transaction check: a transaction the coordinator left open past its
transaction.timeout.ms, seen from outside as a partition's last stable offset held below its
high watermark (transactional runs).

Kafka documents transaction.timeout.ms as the longest the transaction coordinator waits for a
status update from the producer before it proactively aborts the ongoing transaction; it looks
for such transactions every transaction.abort.timed.out.transaction.cleanup.interval.ms
(10 s by default). The abort's markers move the last stable offset (the first offset of the
oldest transaction still open on the partition) on. So the last stable offset may stand still
below the high watermark for at most the timeout, one sweep and the markers' writing
(MARKER_SLACK_US) outside faults: a fault on the coordinator or on the partition's leader can
hold it longer, so only the time outside every fault window counts, as for the group's
`stuck`, a crash acting until the cluster could notice it (analysis.checks.windows).

From the sampler's partition ends (about once a second, while the workload and any schedule
after it run): a hold is a run of samples whose last stable offset has one value below their
high watermark, from its first such sample to its last. A partition counts once, at its
longest hold, when that hold's fault-free span exceeds the bound.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from analysis.checks.check import RunFacts
from analysis.checks.liveness import UNKNOWN, Ends, sampled_ends
from analysis.checks.timed_out_commits import transaction_timeout_ms
from analysis.checks.windows import failure_detection_us, fault_free_us, fault_windows
from analysis.model.anomalies import AnomalyName
from analysis.model.results import ExampleRow
from harness.rundir.spec import RunSpec

if TYPE_CHECKING:
    from analysis.checks.history import RunHistory

__all__ = ["HangingTransactionCheck", "hanging_bound_us", "holds"]

MAX_EXAMPLES: Final = 20
SWEEP_SETTING: Final = "transaction.abort.timed.out.transaction.cleanup.interval.ms"
# Writing the abort's markers, and the sampler's second between two looks.
MARKER_SLACK_US: Final = 5_000_000


@dataclass(frozen=True)
class Hold:
    """A partition's last stable offset standing at `offset` below the high watermark from
    `from_us` to `to_us` (first and last sample), `free_us` of it outside every fault."""

    partition: int
    offset: int
    from_us: int
    to_us: int
    free_us: int


def holds(ends: dict[int, Ends], faults: tuple[tuple[int, int], ...]) -> Iterable[Hold]:
    """Every hold of every partition, in partition then time order (see the module
    docstring); a sample without either end breaks a hold."""
    for partition, sampled in sorted(ends.items()):
        lso, hw, ts = sampled.last_stable, sampled.high_watermark, sampled.ts_us
        below = (lso != UNKNOWN) & (hw != UNKNOWN) & (lso < hw)
        start = None
        for i in range(len(ts) + 1):
            goes_on = i < len(ts) and below[i] and start is not None and lso[i] == lso[start]
            if goes_on:
                continue
            if start is not None and i - 1 > start:
                first, last = int(ts[start]), int(ts[i - 1])
                free = fault_free_us(first, last, faults)
                yield Hold(partition, int(lso[start]), first, last, free)
            start = i if i < len(ts) and below[i] else None


def hanging_bound_us(spec: RunSpec) -> int | None:
    """How long a hold may last outside faults: the cell's transaction timeout, one sweep (its
    broker setting, else Kafka's default) and MARKER_SLACK_US; None without a timeout."""
    timeout_ms = transaction_timeout_ms(spec)
    if timeout_ms is None:
        return None
    return int((timeout_ms + spec.kafka.setting_ms(SWEEP_SETTING)) * 1000) + MARKER_SLACK_US


def hanging(found: Iterable[Hold], bound_us: int) -> list[ExampleRow]:
    """Per partition, its longest hold when that exceeds `bound_us` outside faults: partition,
    the offset held at, from_us and to_us; in partition order."""
    longest: dict[int, Hold] = {}
    for hold in found:
        held = longest.get(hold.partition)
        if hold.free_us > bound_us and (held is None or hold.free_us > held.free_us):
            longest[hold.partition] = hold
    return [
        {"partition": h.partition, "offset": h.offset, "from_us": h.from_us, "to_us": h.to_us}
        for _, h in sorted(longest.items())
    ]


@dataclass(frozen=True)
class HangingTransactionCheck:
    """Transactions left open past their timeout, from the sampled last stable offsets."""

    name: str = "hanging"

    def applies(self, run: RunHistory) -> bool:
        """A complete transactional run whose spec.json gives the transactions' timeout."""
        return run.complete and run.txns is not None and self._bound(run) is not None

    def facts(self, run: RunHistory) -> RunFacts:
        """The count of partitions held past the bound, and each one's longest hold."""
        bound = self._bound(run)
        assert bound is not None, "applies() holds"
        evidence = run.evidence
        faults = fault_windows(evidence, failure_detection_us(run.spec))
        found = hanging(holds(sampled_ends(evidence.samples), faults), bound)
        name = AnomalyName.TXN_HANGING
        return RunFacts(counts={name: len(found)}, examples={name: found[:MAX_EXAMPLES]})

    @staticmethod
    def _bound(run: RunHistory) -> int | None:
        return None if run.spec is None else hanging_bound_us(run.spec)
