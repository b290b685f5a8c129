"""Known bugs that duplicate acknowledged messages: which row of the known-bug table explains a
forbidden duplicates count, and what the run must show for it to.

A duplicate is seen from outside as a message read back twice; what made the client write it
twice is not. So a row's evidence is what the run shows of the conditions its mechanism needs:
for a client that bumps its producer epoch after sends it could not settle (librdkafka#4953),
a fault during the workload and sends that ended without an answer (indeterminate) or with an
error (failed). Without that evidence the duplicates stay a VIOLATION.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from analysis.judge.known_bugs import first_shown
from analysis.model.anomalies import AnomalyName, CountName, Counts
from analysis.model.evidence import RunEvidence
from harness.rundir.config import CellConfig

__all__ = ["DUPLICATE_EVIDENCE", "known_duplicates"]


def _faulted_sends_unsettled(events: RunEvidence, counts: Counts) -> str:
    """A fault injected during the workload and sends that ended indeterminate or failed, in
    words; '' when either is missing (the epoch bump librdkafka#4953 needs has no trigger)."""
    unsettled = counts.get(CountName.INDETERMINATE, 0) + counts.get(CountName.FAILED, 0)
    during = events.faults_in_workload
    if not unsettled or not during:
        return ""
    first = during[0]
    return (
        f"{first.fault} of {first.target} (nodes {first.nodes}) began during the workload "
        f"({len(during)} fault(s) in it), and {counts.get(CountName.INDETERMINATE, 0)} sends "
        f"ended indeterminate and {counts.get(CountName.FAILED, 0)} failed: the sends the "
        "producer could not settle are the ones after which librdkafka bumps its epoch"
    )


# Per row of the known-bug table that explains duplicates, by reference: what the run must
# show ('' when it does not).
DUPLICATE_EVIDENCE: Final[dict[str, Callable[[RunEvidence, Counts], str]]] = {
    "librdkafka#4953": _faulted_sends_unsettled,
}


def known_duplicates(
    counts: Counts, config: CellConfig, events: RunEvidence
) -> tuple[str, str] | None:
    """(how the finding begins, the evidence in words) of the first row explaining duplicated
    acknowledged messages that affects this run's release and client and whose evidence the
    run shows; None when no row does."""
    version, client = config.kafka_version, config.client
    found = first_shown(
        AnomalyName.DUPLICATED,
        version,
        client,
        lambda bug: DUPLICATE_EVIDENCE[bug.reference](events, counts),
    )
    if found is None:
        return None
    bug, shown = found
    return bug.reason(version, client or "librdkafka"), shown
