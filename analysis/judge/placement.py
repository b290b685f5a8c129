"""The judgement of misplaced records (analysis.checks.placement): Kafka writes a record to the
partition its produce request names, with the key and value its producer gave it, and no
configuration or fault moves or rewrites it. So a misplaced record is a VIOLATION in every
cell, KNOWN-BUG where a row of the known-bug table explaining it affects the run's release and
client and its evidence shows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from analysis.judge.known_bugs import first_shown
from analysis.judge.outcomes import Examples, Finding, Verdict
from analysis.model.anomalies import AnomalyName, CountName, Counts, anomaly
from analysis.model.evidence import RunEvidence
from harness.rundir.config import CellConfig

__all__ = ["PLACEMENT_EVIDENCE", "judge_placement"]

PLACEMENT_CITATION: Final = (
    "docs/kafka-reliability.md, “What Kafka promises”: a record is appended to the partition "
    "its produce request names, with the key and value its producer gave it; nothing moves a "
    "record between partitions or rewrites it"
)


def _expired_or_failed_sends(events: RunEvidence, counts: Counts) -> str:
    """Sends that ended without an acknowledgement (expired batches, disconnects) in a run
    whose workload saw a fault, in words; '' when it had neither (nothing freed a buffer
    still in flight)."""
    failed, unknown = counts.get(CountName.FAILED, 0), counts.get(CountName.INDETERMINATE, 0)
    if not failed + unknown or not (during := events.faults_in_workload):
        return ""
    return (
        f"{failed} sends failed and {unknown} ended indeterminate in a run whose workload "
        f"saw {len(during)} fault(s) (the first: {during[0].fault} of {during[0].target}): "
        "the expired batches and broken connections after which the producer returns a "
        "buffer still in flight to its pool"
    )


# The evidence each known-bug row explaining misplaced records needs from the run, in words
# ('' when the run does not show it): the test of the known-bug table holds every such row to
# an entry.
PLACEMENT_EVIDENCE: Final[dict[str, Callable[[RunEvidence, Counts], str]]] = {
    "KAFKA-19012": _expired_or_failed_sends,
}


def judge_placement(
    counts: Counts, examples: Examples, config: CellConfig, events: RunEvidence
) -> list[Finding]:
    """The misplaced records of a run, judged as the module says; nothing when there are
    none."""
    name = AnomalyName.MISPLACED
    count = counts.get(name, 0)
    if not count:
        return []
    quoted = tuple(examples.get(name) or ())[:3]
    shown = "; ".join(
        f"msg {e.msg_id} read at p{e.partition}@{e.offset}, its {e.mismatch} not its send's"
        + (f" (sent to p{e.sent_partition})" if e.mismatch == "partition" else "")
        for e in quoted
    )
    what = f"{count} {anomaly(name).label} records ({shown})"
    version, client = config.kafka_version, config.client
    found = first_shown(
        name, version, client, lambda bug: PLACEMENT_EVIDENCE[bug.reference](events, counts)
    )
    if found is None:
        return [Finding(name, Verdict.VIOLATION, f"{what}: {PLACEMENT_CITATION}", quoted)]
    bug, evidence = found
    detail = f"{bug.reason(version, client or 'librdkafka')}; {what}; {evidence}"
    return [Finding(name, Verdict.KNOWN_BUG, detail, quoted)]
