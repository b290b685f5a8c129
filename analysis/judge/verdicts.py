"""Judge reconciled repetitions and cells against the documented guarantees.

Checkers are pure functions of a repetition's RunResult and its events; like Jepsen's, they
answer PASS/VIOLATION/... or UNKNOWN, and an exception inside them becomes UNKNOWN with the
error as reason, never a crash.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, TypeGuard, cast

from analysis.judge.guarantees import (
    ALLOWED,
    CONSUMER_DELIVERY,
    FORBIDDEN,
    FORBIDDEN_UNLESS_ISR_SHRANK,
    DeliveryRule,
    Guarantee,
    guarantee_for,
)
from analysis.judge.history import PartitionHistory, partition_histories
from analysis.judge.mechanisms import PartitionJudgement, judge_partition
from analysis.judge.transactions import transaction_breaches, transaction_findings
from analysis.model.anomalies import COUNT_NAMES, LOSS_CLASSES, anomaly, loss_of
from analysis.model.evidence import RunEvidence
from analysis.model.results import Example, RunResult, RunStatus
from harness.rundir import layout
from harness.rundir.config import CellConfig
from harness.rundir.events import FaultFailed, HarnessError
from harness.rundir.records import STATUSES

__all__ = [
    "VERDICT_MEANING",
    "CellStats",
    "CellVerdict",
    "CountStats",
    "Events",
    "RepetitionVerdict",
    "Verdict",
    "cell_stats",
    "contract_breaches",
    "exit_code",
    "judge_all",
    "judge_cell",
    "judge_repetition",
    "read_evidence_by_run",
    "run_origin_us",
]

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
class _Finding:
    """One checker's conclusion about a repetition: a reason, and whether it is a violation."""

    reason: str
    violation: bool = False
    known_bug: bool = False
    unknown: bool = False  # it cannot be judged, so neither can the repetition pass


# ---------------------------------------------------------------------------------------------
# Loading run directories


def read_evidence_by_run(results: Iterable[RunResult]) -> dict[str, RunEvidence]:
    """The evidence (typed events) of each result's run dir, keyed by its `run_dir`."""
    return {r.run_dir: RunEvidence.read(r.run_dir) for r in results}


# ---------------------------------------------------------------------------------------------
# Repetition


def judge_repetition(result: RunResult, events: Events) -> RepetitionVerdict:
    """Judge one repetition; never raises: a checker failure yields UNKNOWN naming the error."""
    try:
        return _judge(result, RunEvidence.coerce(events))
    except Exception as exc:  # Jepsen: a checker that crashes knows nothing, it does not fail
        return RepetitionVerdict(
            verdict=Verdict.UNKNOWN,
            reasons=(f"checker error: {type(exc).__name__}: {exc}",),
            guarantee=None,
            run_dir=result.run_dir,
            repetition=result.repetition,
        )


def _judge(result: RunResult, events: RunEvidence) -> RepetitionVerdict:
    """The checker proper; may raise on malformed input."""
    run_dir, repetition = result.run_dir, result.repetition
    if result.status != RunStatus.COMPLETE or result.counts is None:
        reason = f"run {result.status}: {result.error or 'no error recorded'}"
        return RepetitionVerdict(
            Verdict.UNKNOWN, (reason,), _guarantee_or_none(result.config), run_dir, repetition
        )
    counts = _read_counts(result.counts)
    guarantee = guarantee_for(result.config)
    loss, acked = loss_of(counts), counts["acked"]
    unknown = RepetitionVerdict(Verdict.UNKNOWN, (), guarantee, run_dir, repetition, loss, acked)
    if breaches := contract_breaches(result, events):
        return dataclasses.replace(unknown, reasons=tuple(breaches))
    if acked == 0:
        reason = (
            f"no message was acknowledged (sent {counts['sent']}, failed {counts['failed']}, "
            f"indeterminate {counts['indeterminate']}): nothing to judge"
        )
        return dataclasses.replace(unknown, reasons=(reason,))
    examples = result.examples
    partitions = {"loss": result.loss_by_partition, "divergence": result.divergence_by_partition}
    evidence = _Evidence(
        events,
        run_origin_us(result, events),
        partitions,
        result.config,
        run_dir,
        partition_histories(events),
    )
    loss_finding = _loss_finding(counts, examples, guarantee, evidence)
    findings = [
        loss_finding,
        *_divergence_findings(counts, examples, guarantee, evidence),
        *_duplicate_findings(counts, examples, guarantee),
        *_order_findings(counts, examples, guarantee),
        *_legal_anomaly_notes(counts),
        *_consumer_findings(counts, examples, result.config, events),
        *(
            _Finding(f.reason, f.violation, f.known_bug)
            for f in transaction_findings(
                result.config,
                {**result.counts, **counts},
                events,
                examples,
                loss_is_violation=loss_finding.violation,
            )
        ),
    ]
    return RepetitionVerdict(
        verdict=_repetition_outcome(findings, loss),
        reasons=tuple(
            f.reason for f in sorted(findings, key=lambda f: (not f.violation, not f.unknown))
        ),
        guarantee=guarantee,
        run_dir=run_dir,
        repetition=repetition,
        loss=loss,
        acked=acked,
        violations=tuple(f.reason for f in findings if f.violation),
    )


@dataclass(frozen=True)
class _Evidence:
    """What judging a loss by partition needs: the events, t=0, the partitions each kind hit,
    the config, where the broker logs are, and each partition's history (None: no roles)."""

    events: RunEvidence
    origin_us: float
    partitions: Mapping[str, Mapping[str, int]]  # "loss"/"divergence" → partition → count
    config: CellConfig | None = None
    run_dir: str = ""
    histories: Mapping[int, PartitionHistory] | None = None


def _repetition_outcome(findings: Sequence[_Finding], loss: int) -> Verdict:
    """VIOLATION if any finding is one, else UNKNOWN if one could not be judged, else KNOWN-BUG
    if a known bug explains a loss, else EXPECTED-LOSS if anything was lost, else PASS."""
    if any(f.violation for f in findings):
        return Verdict.VIOLATION
    if any(f.unknown for f in findings):
        return Verdict.UNKNOWN
    if any(f.known_bug for f in findings):
        return Verdict.KNOWN_BUG
    return Verdict.EXPECTED_LOSS if loss > 0 else Verdict.PASS


def _guarantee_or_none(config: CellConfig) -> Guarantee | None:
    """The guarantee of a config, or None when it lacks a setting or no row covers it."""
    try:
        return guarantee_for(config)
    except (TypeError, ValueError, LookupError):
        return None


def _read_counts(raw: Mapping[str, object]) -> dict[str, int]:
    """The counts as ints; raises ValueError naming the first missing or non-integer count."""
    counts: dict[str, int] = {}
    for name in COUNT_NAMES:
        value = raw.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"count {name!r} is {value!r}, expected a non-negative int")
        counts[name] = value
    return counts


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


def _tally_breaches(contract: Mapping[str, int], events: RunEvidence) -> list[str]:
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


# ---------------------------------------------------------------------------------------------
# Findings


def _loss_finding(
    counts: Mapping[str, int],
    examples: Examples,
    guarantee: Guarantee,
    evidence: _Evidence,
) -> _Finding:
    """Judge the one loss figure (distinct acked messages missing) against the loss rule."""
    acked, loss = counts["acked"], loss_of(counts)
    if loss == 0:
        return _Finding(
            f"no acknowledged message lost: 0 of {acked} acked missing "
            f"(loss {guarantee.loss}: {guarantee.citation})"
        )
    what = f"{loss} of {acked} acked missing ({_describe(counts, examples, LOSS_CLASSES)})"
    if (by_partition := _by_partition("loss", what, guarantee, evidence, "loss")) is not None:
        return by_partition
    if guarantee.loss == ALLOWED:
        return _Finding(f"{what}; loss allowed: {guarantee.citation}")
    if guarantee.loss == FORBIDDEN:
        return _Finding(f"{VIOLATION_PREFIX}loss: {what}; {guarantee.citation}", violation=True)
    if guarantee.loss != FORBIDDEN_UNLESS_ISR_SHRANK:
        raise ValueError(f"unknown loss rule {guarantee.loss!r}")
    return _isr_exception_finding("loss", what, guarantee, evidence, "loss")


def _divergence_findings(
    counts: Mapping[str, int],
    examples: Examples,
    guarantee: Guarantee,
    evidence: _Evidence,
) -> list[_Finding]:
    """Acknowledged offsets now holding another message (Jepsen's inconsistent offsets).

    Judged on their own, never as loss: a violation wherever loss is forbidden, even when the
    message survives at another offset.
    """
    diverged = counts["offset_divergent"]
    if diverged == 0:
        return []
    detail = _describe(counts, examples, ("offset_divergent",))
    what = f"{diverged} acknowledged offsets rewritten ({detail})"
    rule = "acknowledged offset rewritten"
    if (by_partition := _by_partition("divergence", what, guarantee, evidence, rule)) is not None:
        return [by_partition]
    if guarantee.loss == ALLOWED:
        return [_Finding(f"{what}; allowed where loss is: {guarantee.citation}")]
    if guarantee.loss == FORBIDDEN:
        reason = f"{VIOLATION_PREFIX}{rule}: {what}; {guarantee.citation}"
        return [_Finding(reason, violation=True)]
    return [_isr_exception_finding(rule, what, guarantee, evidence, "divergence")]


def _by_partition(
    kind: str, what: str, guarantee: Guarantee, evidence: _Evidence, rule: str
) -> _Finding | None:
    """Judge each partition that `kind` hit by what hit it, the mechanism seen, and known
    bugs; None when the roles or the partitions are unknown (the cell's class decides)."""
    hit = evidence.partitions.get(kind) or {}
    if evidence.histories is None or evidence.config is None or not hit or "unknown" in hit:
        return None
    judgements = [
        judge_partition(
            evidence.histories.get(int(p)) or PartitionHistory(int(p), (), (), ()),
            evidence.config,
            origin_us=evidence.origin_us,
            run_dir=evidence.run_dir,
            topic=layout.TOPIC,
            what="loss" if kind == "loss" else "rewriting of acknowledged offsets",
        )
        for p in sorted(hit, key=int)
    ]
    return _partition_finding(what, guarantee, judgements, rule)


def _partition_finding(
    what: str, guarantee: Guarantee, judgements: Sequence[PartitionJudgement], rule: str
) -> _Finding:
    """One finding from the partitions' judgements: a violation if one is, else a known bug."""
    violating = [j for j in judgements if j.outcome == "violation"]
    if violating:
        reasons = "; ".join(j.reason for j in violating)
        return _Finding(f"{VIOLATION_PREFIX}{rule}: {what}; {reasons}", violation=True)
    explained = "; ".join(f"p{j.partition}: {j.reason}" for j in judgements)
    if any(j.outcome == "known-bug" for j in judgements):
        return _Finding(f"{what}; {explained}", known_bug=True)
    return _Finding(f"{what}; allowed by mechanism: {explained}")


def _describe(counts: Mapping[str, int], examples: Examples, names: Sequence[str]) -> str:
    """Each non-zero class of `names` with its count, meaning and first example msg_ids."""
    parts = []
    for name in names:
        if counts[name]:
            entry = anomaly(name)
            ids = _example_text(examples, name)
            parts.append(f"{counts[name]} {entry.label}: {entry.meaning}{ids}")
    return "; ".join(parts)


def _example_text(examples: Examples, name: str) -> str:
    """', e.g. msg_id 7 at p0@12 (read-back: 9), …' for the first examples of a class, or ''."""
    rows = examples.get(name) or ()
    if not rows:
        return ""
    shown = [_example_one(r) for r in rows[:EXAMPLES_IN_REASON]]
    more = ", …" if len(rows) > EXAMPLES_IN_REASON else ""
    return "; e.g. " + ", ".join(shown) + more


def _example_one(example: Example) -> str:
    """One example message: id, where it was acked and what the read-back holds there."""
    text = f"msg_id {example.msg_id}"
    if example.partition is not None:
        text += f" at p{example.partition}@{example.offset}"
    if example.readback_msg_id_at_offset is not None:
        text += f" (read-back holds msg_id {example.readback_msg_id_at_offset})"
    return text


def _isr_exception_finding(
    rule: str, what: str, guarantee: Guarantee, evidence: _Evidence, kind: str
) -> _Finding:
    """Allowed only if, for every partition hit, a sample before the last fault showed an ISR
    of one replica there; a hit whose partition is unknown needs one in any partition."""
    before_us = _last_fault_start_us(evidence.events)
    hit = evidence.partitions.get(kind) or {"unknown": 1}  # no facts: nothing narrows it
    shrinks, missing = [], []
    for partition in sorted(hit):
        scope = None if partition == "unknown" else {int(partition)}
        shrunk = _isr_shrunk_sample(evidence.events, scope, before_us)
        if shrunk is None:
            missing.append("an unknown partition" if scope is None else f"partition {partition}")
        else:
            ts_us, p, isr = shrunk
            shrinks.append(f"p{p} ISR {isr} at t={(ts_us - evidence.origin_us) / 1e6:.1f} s")
    if missing:
        return _Finding(
            f"{VIOLATION_PREFIX}{rule}: {what}; no leader/ISR sample before the last fault shows "
            f"an ISR of one replica for {', '.join(missing)}, so the exception does not apply: "
            f"{guarantee.citation}",
            violation=True,
        )
    return _Finding(
        f"{what}; allowed because the ISR had shrunk to the leader before the fault "
        f"({'; '.join(shrinks)}): {guarantee.citation}"
    )


def _last_fault_start_us(events: RunEvidence) -> float:
    """ts_us of the last fault_start; +inf when there was none (then every sample is before)."""
    starts = [e.ts_us for e in events.fault_starts if e.ts_us is not None]
    return max(starts) if starts else float("inf")


def _isr_shrunk_sample(
    events: RunEvidence, partitions: set[int] | None, before_us: float
) -> tuple[int, int, list[int]] | None:
    """(ts_us, partition, isr) of the first sample before `before_us` with an ISR of size 1
    in one of `partitions` (None: any partition)."""
    stamped = [(s.ts_us, s) for s in events.samples if s.ts_us is not None]
    for ts_us, sample in sorted(stamped, key=lambda pair: pair[0]):
        if ts_us >= before_us:
            break
        for state in sample.partitions:
            isr = list(state.get("isr") or [])
            in_scope = partitions is None or state.get("partition") in partitions
            if in_scope and len(isr) == 1:
                return ts_us, int(state["partition"]), isr
    return None


def _duplicate_findings(
    counts: Mapping[str, int], examples: Examples, guarantee: Guarantee
) -> list[_Finding]:
    """Duplicates of acknowledged messages: a violation with idempotence on, a counted legal
    anomaly otherwise. Duplicates of failed or indeterminate sends are always allowed."""
    findings = []
    if duplicated := counts["duplicated"]:
        ids = _example_text(examples, "duplicated")
        what = f"{duplicated} duplicated ({anomaly('duplicated').meaning}{ids})"
        if guarantee.duplicates == FORBIDDEN:
            reason = f"{VIOLATION_PREFIX}duplicates: {what}; {guarantee.duplicates_citation}"
            findings.append(_Finding(reason, violation=True))
        else:
            findings.append(_Finding(f"{what}; allowed: {guarantee.duplicates_citation}"))
    if unacked := counts["duplicated_unacked"]:
        ids = _example_text(examples, "duplicated_unacked")
        findings.append(
            _Finding(
                f"{unacked} {anomaly('duplicated_unacked').label} "
                f"({anomaly('duplicated_unacked').meaning}{ids}): the idempotence guarantee "
                "covers acknowledged messages only"
            )
        )
    return findings


def _order_findings(
    counts: Mapping[str, int], examples: Examples, guarantee: Guarantee
) -> list[_Finding]:
    """Reordering is a violation when order is guaranteed, a counted legal anomaly otherwise."""
    reordered = counts["reordered"]
    if reordered == 0:
        return []
    ids = _example_text(examples, "reordered")
    what = f"{reordered} reordered (read order differs from send order per key{ids})"
    if guarantee.order == "guaranteed":
        reason = f"{VIOLATION_PREFIX}reordering: {what}; {guarantee.order_citation}"
        return [_Finding(reason, violation=True)]
    return [_Finding(f"{what}; allowed: {guarantee.order_citation}")]


def _legal_anomaly_notes(counts: Mapping[str, int]) -> list[_Finding]:
    """Anomalies the doc calls legal, or that say more about the harness than about Kafka."""
    notes = ("expired", "moved", "failed_present", "indeterminate_present", "phantom")
    return [
        _Finding(f"{counts[name]} {anomaly(name).label}: {anomaly(name).meaning}")
        for name in notes
        if counts[name] > 0
    ]


def _consumer_findings(
    counts: Mapping[str, int], examples: Examples, config: CellConfig, events: RunEvidence
) -> list[_Finding]:
    """What the consumer group processed, judged by its commit mode (CONSUMER_DELIVERY):
    nothing for a run without a group. A group that never caught up leaves the messages past
    its committed offsets unjudged, so a mode that forbids skipping cannot pass then."""
    if not config.consumers:
        return []
    rule = CONSUMER_DELIVERY.get(str(config.consumer_commit))
    if rule is None:
        return [_Finding(f"unknown consumer commit mode {config.consumer_commit!r}", unknown=True)]
    end = events.consumers
    if end is None:
        return [
            _Finding("no consumers event: where the group's commits ended is unknown", unknown=True)
        ]
    if end.journal_errors:
        errors = "; ".join(end.journal_errors)
        return [_Finding(f"a consumer's journal is incomplete: {errors}", unknown=True)]
    findings = [
        _consumer_finding("consumer_unprocessed", rule.unprocessed, counts, examples, rule),
        _consumer_finding("consumer_reprocessed", rule.reprocessed, counts, examples, rule),
    ]
    if not end.caught_up and rule.unprocessed == FORBIDDEN:
        findings.append(
            _Finding(
                f"the consumer group did not catch up within its time (committed "
                f"{end.committed}, end offsets {end.end_offsets}): messages past "
                "its committed offsets were never judged",
                unknown=counts["consumer_unprocessed"] == 0,
            )
        )
    return findings


def _consumer_finding(
    name: str, rule: str, counts: Mapping[str, int], examples: Examples, delivery: DeliveryRule
) -> _Finding:
    """One consumer class judged against its rule under the group's commit mode."""
    count, label = counts[name], anomaly(name).label
    what = (
        f"consumer group: {count} {label} ({anomaly(name).meaning}{_example_text(examples, name)})"
    )
    if count == 0 or rule == ALLOWED:
        verb = "allowed" if count else rule
        return _Finding(f"{what}; {verb}: {delivery.citation}")
    if name == "consumer_unprocessed" and counts["offset_divergent"]:
        return _Finding(
            f"{what}; the log was rewritten under the group ({counts['offset_divergent']} "
            f"offsets diverged), which moves records past committed offsets: {delivery.citation}"
        )
    return _Finding(f"{VIOLATION_PREFIX}{label}: {what}; {delivery.citation}", violation=True)


def run_origin_us(result: RunResult, events: Events) -> float:
    """Epoch µs of t=0 for a run: the timeline's origin, else the first event, else 0."""
    origin = result.origin_us()
    if origin is not None:
        return origin
    evidence = RunEvidence.coerce(events)
    stamps = [float(e.ts_us) for e in evidence.events.events if e.ts_us is not None]
    return min(stamps) if stamps else 0.0


# ---------------------------------------------------------------------------------------------
# Cell


def judge_cell(
    results_of_cell: Sequence[RunResult], events_by_run: Mapping[str, Events]
) -> CellVerdict:
    """Judge a cell from all its repetitions; ValueError if given no repetition at all."""
    if not results_of_cell:
        raise ValueError("judge_cell needs at least one repetition")
    ordered = sorted(results_of_cell, key=lambda r: r.repetition)
    repetitions = tuple(judge_repetition(r, events_by_run.get(r.run_dir, ())) for r in ordered)
    guarantee = next((r.guarantee for r in repetitions if r.guarantee is not None), None)
    verdict, reasons = _cell_outcome(repetitions, guarantee)
    first = ordered[0]
    return CellVerdict(
        cell=first.cell,
        experiment=first.experiment,
        config=first.config,
        verdict=verdict,
        reasons=reasons,
        repetitions=repetitions,
        stats=cell_stats(ordered),
        guarantee=guarantee,
    )


def _cell_outcome(
    reps: Sequence[RepetitionVerdict], guarantee: Guarantee | None
) -> tuple[Verdict, tuple[str, ...]]:
    """Fold repetition verdicts:
    VIOLATION > UNKNOWN > KNOWN-BUG > EXPECTED-LOSS > NOT-PROVOKED > PASS.

    UNKNOWN outranks EXPECTED-LOSS: a repetition that could not be judged may hide a violation
    (a forbidden duplicate or reorder) that the cell's allowed loss says nothing about.
    """
    n = len(reps)
    by_verdict = {v: [r for r in reps if r.verdict == v] for v in Verdict}
    if violating := by_verdict[Verdict.VIOLATION]:
        head = f"{len(violating)} of {n} repetitions violate the documented guarantee"
        return Verdict.VIOLATION, (head, *_rep_reasons(violating, only_violations=True))
    lossy = by_verdict[Verdict.EXPECTED_LOSS]
    buggy = by_verdict[Verdict.KNOWN_BUG]
    if unknown := by_verdict[Verdict.UNKNOWN]:
        head = f"{len(unknown)} of {n} repetitions could not be judged"
        if lossy:
            head += f" (loss allowed and observed in {len(lossy)})"
        return Verdict.UNKNOWN, (head, *_rep_reasons(unknown, first_only=True))
    if buggy:
        head = (
            f"a known bug of this release lost acknowledged data in {len(buggy)} of {n} repetitions"
        )
        return Verdict.KNOWN_BUG, (head, *_rep_reasons(buggy, first_only=True))
    if lossy:
        head = f"loss allowed and observed in {len(lossy)} of {n} repetitions"
        return Verdict.EXPECTED_LOSS, (head, *_rep_reasons(lossy, first_only=True))
    acked = sum(r.acked or 0 for r in reps)
    if guarantee is None:  # cannot happen for judged repetitions; stay UNKNOWN, never crash
        return Verdict.UNKNOWN, ("no documented guarantee could be determined",)
    if guarantee.loss == ALLOWED:
        return Verdict.NOT_PROVOKED, (
            f"loss allowed ({guarantee.citation}) but none of {n} repetitions lost an "
            f"acknowledged message ({acked} acked): the faults did not provoke it",
        )
    return Verdict.PASS, (
        f"all {n} repetitions kept every acknowledged message ({acked} acked); "
        f"loss {guarantee.loss}: {guarantee.citation}",
    )


def _rep_reasons(
    reps: Sequence[RepetitionVerdict], *, only_violations: bool = False, first_only: bool = False
) -> list[str]:
    """Repetition reasons prefixed with their repetition number."""
    lines: list[str] = []
    for rep in reps:
        reasons = rep.reasons
        if only_violations:
            reasons = rep.violations or reasons
        if first_only:
            reasons = reasons[:1]
        lines.extend(f"rep {rep.repetition}: {reason}" for reason in reasons)
    return lines


def cell_stats(results_of_cell: Sequence[RunResult]) -> CellStats:
    """Mean/min/max/sum per count and of the loss figure over repetitions with counts; rates.

    The one per-cell computation: the matrix, the chart, the tables and reconcile's command
    line all read it.
    """
    rows = [
        {**counts, "loss": loss_of(counts)}
        for counts in (r.counts for r in results_of_cell)
        if isinstance(counts, Mapping) and all(_is_count(counts.get(n)) for n in LOSS_CLASSES)
    ]
    stats: dict[str, CountStats] = {}
    for name in (*COUNT_NAMES, "loss"):
        values = [v for v in (row.get(name) for row in rows) if _is_count(v)]
        if values:
            total = sum(values)
            stats[name] = CountStats(total / len(values), min(values), max(values), total)
    return CellStats(
        repetitions=len(results_of_cell),
        counted=len(rows),
        counts=stats,
        loss_rate=_rate(rows, "loss"),
        divergence_rate=_rate(rows, "offset_divergent"),
    )


def _is_count(value: object) -> TypeGuard[int]:
    """True for a non-negative int that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _rate(rows: Sequence[Mapping[str, object]], name: str) -> float | None:
    """sum(name) / sum(acked) over rows with both counts; None when nothing was acked."""
    usable = [r for r in rows if _is_count(r.get(name)) and _is_count(r.get("acked"))]
    acked = sum(cast(int, r["acked"]) for r in usable)
    if acked == 0:
        return None
    return sum(cast(int, r[name]) for r in usable) / acked


def judge_all(
    results: Sequence[RunResult], events_by_run: Mapping[str, Events]
) -> list[CellVerdict]:
    """Group results by (experiment, cell) in first-seen order and judge each group."""
    groups: dict[tuple[str, str], list[RunResult]] = {}
    for result in results:
        groups.setdefault((result.experiment, result.cell), []).append(result)
    return [judge_cell(group, events_by_run) for group in groups.values()]


def exit_code(cells: Sequence[CellVerdict], *, known_bug_fails: bool = False) -> int:
    """1 if any cell is a VIOLATION (or a KNOWN-BUG when `known_bug_fails`), else 2 if any is
    UNKNOWN (or none was judged), else 0: a known bug of an old release is what the user
    asked to see, not a failure of the Kafka under test, unless they say so."""
    verdicts = {c.verdict for c in cells}
    if Verdict.VIOLATION in verdicts or (known_bug_fails and Verdict.KNOWN_BUG in verdicts):
        return 1
    if not cells or Verdict.UNKNOWN in verdicts:
        return 2
    return 0
