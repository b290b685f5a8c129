"""Contract checks: a repetition whose own record is in doubt (an incomplete read-back, a
fault that failed, a journal that disagrees with its recorder, a checker that failed its
sensitivity probe) proves nothing; each breach makes it UNKNOWN."""

from __future__ import annotations

from analysis.judge.outcomes import Events
from analysis.judge.transactions import transaction_breaches
from analysis.model.evidence import RunEvidence
from analysis.model.results import Contract, RunResult
from harness.rundir.events import FaultFailed, HarnessError
from harness.rundir.records import STATUSES

# ---------------------------------------------------------------------------------------------
# Contract checks: a repetition whose own record is in doubt proves nothing


def contract_breaches(result: RunResult, events: Events) -> list[str]:
    """Why this repetition's record cannot be trusted ([] when it can): each makes it UNKNOWN."""
    evidence = RunEvidence.coerce(events)
    return [
        *_readback_breaches(evidence),
        *_harness_breaches(evidence),
        *_journal_breaches(result, evidence),
        *_sensitivity_breaches(result),
        *transaction_breaches(result.config, result.counts or {}, evidence),
    ]


def _sensitivity_breaches(result: RunResult) -> list[str]:
    """A checker that missed records removed on purpose could miss real loss too."""
    check = result.sensitivity
    if check is None or check.passed is not False:  # None: nothing to hide, not a failure
        return []
    return [
        f"the checker failed its sensitivity check: of {check.removed} acknowledged "
        f"records removed from a copy of the read-back, {check.found} were reported "
        "missing, or it reported other messages missing too"
    ]


def _readback_breaches(events: RunEvidence) -> list[str]:
    """An incomplete or unrecorded read-back cannot prove anything."""
    last = events.readback
    if last is None:
        return ["no read-back was recorded in events.jsonl: its completeness is unknown"]
    if not last.complete:
        records = "?" if last.records is None else last.records
        return [
            f"incomplete read-back: it timed out before the high watermarks "
            f"{last.high_watermarks} ({records} records read)"
        ]
    return []


def _harness_breaches(events: RunEvidence) -> list[str]:
    """Faults that failed to inject or heal, and harness errors, in event order."""
    breaches = []
    for event in events.events.events:
        if isinstance(event, FaultFailed):
            fault_id = "?" if event.fault_id is None else event.fault_id
            breaches.append(
                f"fault {fault_id} ({event.fault or '?'} {event.target or '?'}) failed to "
                f"{event.stage or 'inject'}: {event.error}"
            )
        elif isinstance(event, HarnessError):
            breaches.append(f"harness error: {event.error}")
    return breaches


def _journal_breaches(result: RunResult, events: RunEvidence) -> list[str]:
    """acked.parquet must hold each msg_id once, known statuses, and every delivery report."""
    contract = result.contract
    if contract is None:
        return ["the result carries no contract facts (reconciled by an older analysis)"]
    breaches = []
    if repeated := contract.get("repeated_msg_ids"):
        breaches.append(f"acked.parquet holds {repeated} msg_id(s) more than once")
    if unidentified := contract.get("unidentified_rows"):
        breaches.append(
            f"acked.parquet holds {unidentified} delivery report(s) without a msg_id "
            "(a value the producer did not write): they cannot be matched to a send"
        )
    if unknown := contract.get("unknown_statuses"):
        breaches.append(
            f"acked.parquet holds {unknown} row(s) whose status is none of {', '.join(STATUSES)}"
        )
    return breaches + _tally_breaches(contract, events)


def _tally_breaches(contract: Contract, events: RunEvidence) -> list[str]:
    """The recorder's own tally of delivery reports must equal the journal's rows per status."""
    tallies = events.tallies
    if not tallies:
        return ["no recorder tally in events.jsonl: the journal cannot be checked"]
    tally = tallies[-1]
    breaches = []
    if tally.journal_error:
        breaches.append(f"the journal failed to write: {tally.journal_error}")
    reports = tally.reports
    for status in STATUSES:
        told, kept = int(reports.get(status, 0)), int(contract.get(f"reported_{status}", 0))
        if told != kept:
            breaches.append(
                f"the journal disagrees with the recorder's tally: {told} {status} delivery "
                f"reports, {kept} journalled ({told - kept:+d} dropped)"
            )
    return breaches
