"""Findings: each anomaly count of a repetition judged against the documented guarantee of
its configuration, partition by partition where the events show the roles."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from analysis.judge.guarantees import (
    ALLOWED,
    CONSUMER_DELIVERY,
    FORBIDDEN,
    FORBIDDEN_UNLESS_ISR_SHRANK,
    DeliveryRule,
    Guarantee,
)
from analysis.judge.history import PartitionHistory
from analysis.judge.mechanisms import PartitionJudgement, judge_partition
from analysis.judge.outcomes import EXAMPLES_IN_REASON, VIOLATION_PREFIX, Events, Examples, Finding
from analysis.model.anomalies import LOSS_CLASSES, anomaly, loss_of
from analysis.model.evidence import RunEvidence
from analysis.model.results import Example, RunResult
from harness.rundir import layout
from harness.rundir.config import CellConfig


@dataclass(frozen=True)
class LossContext:
    """What judging a loss by partition needs: the events, t=0, the partitions each kind hit,
    the config, where the broker logs are, and each partition's history (None: no roles)."""

    events: RunEvidence
    origin_us: float
    partitions: Mapping[str, Mapping[str, int]]  # "loss"/"divergence" → partition → count
    config: CellConfig | None = None
    run_dir: str = ""
    histories: Mapping[int, PartitionHistory] | None = None


# ---------------------------------------------------------------------------------------------
# Findings


def judge_loss(
    counts: Mapping[str, int],
    examples: Examples,
    guarantee: Guarantee,
    evidence: LossContext,
) -> Finding:
    """Judge the one loss figure (distinct acked messages missing) against the loss rule."""
    acked, loss = counts["acked"], loss_of(counts)
    if loss == 0:
        return Finding(
            f"no acknowledged message lost: 0 of {acked} acked missing "
            f"(loss {guarantee.loss}: {guarantee.citation})"
        )
    what = f"{loss} of {acked} acked missing ({_describe(counts, examples, LOSS_CLASSES)})"
    if (by_partition := _by_partition("loss", what, guarantee, evidence, "loss")) is not None:
        return by_partition
    if guarantee.loss == ALLOWED:
        return Finding(f"{what}; loss allowed: {guarantee.citation}")
    if guarantee.loss == FORBIDDEN:
        return Finding(f"{VIOLATION_PREFIX}loss: {what}; {guarantee.citation}", violation=True)
    if guarantee.loss != FORBIDDEN_UNLESS_ISR_SHRANK:
        raise ValueError(f"unknown loss rule {guarantee.loss!r}")
    return _isr_exception_finding("loss", what, guarantee, evidence, "loss")


def judge_divergence(
    counts: Mapping[str, int],
    examples: Examples,
    guarantee: Guarantee,
    evidence: LossContext,
) -> list[Finding]:
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
        return [Finding(f"{what}; allowed where loss is: {guarantee.citation}")]
    if guarantee.loss == FORBIDDEN:
        reason = f"{VIOLATION_PREFIX}{rule}: {what}; {guarantee.citation}"
        return [Finding(reason, violation=True)]
    return [_isr_exception_finding(rule, what, guarantee, evidence, "divergence")]


def _by_partition(
    kind: str, what: str, guarantee: Guarantee, evidence: LossContext, rule: str
) -> Finding | None:
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
) -> Finding:
    """One finding from the partitions' judgements: a violation if one is, else a known bug."""
    violating = [j for j in judgements if j.outcome == "violation"]
    if violating:
        reasons = "; ".join(j.reason for j in violating)
        return Finding(f"{VIOLATION_PREFIX}{rule}: {what}; {reasons}", violation=True)
    explained = "; ".join(f"p{j.partition}: {j.reason}" for j in judgements)
    if any(j.outcome == "known-bug" for j in judgements):
        return Finding(f"{what}; {explained}", known_bug=True)
    return Finding(f"{what}; allowed by mechanism: {explained}")


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
    rule: str, what: str, guarantee: Guarantee, evidence: LossContext, kind: str
) -> Finding:
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
        return Finding(
            f"{VIOLATION_PREFIX}{rule}: {what}; no leader/ISR sample before the last fault shows "
            f"an ISR of one replica for {', '.join(missing)}, so the exception does not apply: "
            f"{guarantee.citation}",
            violation=True,
        )
    return Finding(
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


def judge_duplicates(
    counts: Mapping[str, int], examples: Examples, guarantee: Guarantee
) -> list[Finding]:
    """Duplicates of acknowledged messages: a violation with idempotence on, a counted legal
    anomaly otherwise. Duplicates of failed or indeterminate sends are always allowed."""
    findings = []
    if duplicated := counts["duplicated"]:
        ids = _example_text(examples, "duplicated")
        what = f"{duplicated} duplicated ({anomaly('duplicated').meaning}{ids})"
        if guarantee.duplicates == FORBIDDEN:
            reason = f"{VIOLATION_PREFIX}duplicates: {what}; {guarantee.duplicates_citation}"
            findings.append(Finding(reason, violation=True))
        else:
            findings.append(Finding(f"{what}; allowed: {guarantee.duplicates_citation}"))
    if unacked := counts["duplicated_unacked"]:
        ids = _example_text(examples, "duplicated_unacked")
        findings.append(
            Finding(
                f"{unacked} {anomaly('duplicated_unacked').label} "
                f"({anomaly('duplicated_unacked').meaning}{ids}): the idempotence guarantee "
                "covers acknowledged messages only"
            )
        )
    return findings


def judge_order(
    counts: Mapping[str, int], examples: Examples, guarantee: Guarantee
) -> list[Finding]:
    """Reordering is a violation when order is guaranteed, a counted legal anomaly otherwise."""
    reordered = counts["reordered"]
    if reordered == 0:
        return []
    ids = _example_text(examples, "reordered")
    what = f"{reordered} reordered (read order differs from send order per key{ids})"
    if guarantee.order == "guaranteed":
        reason = f"{VIOLATION_PREFIX}reordering: {what}; {guarantee.order_citation}"
        return [Finding(reason, violation=True)]
    return [Finding(f"{what}; allowed: {guarantee.order_citation}")]


def legal_anomaly_notes(counts: Mapping[str, int]) -> list[Finding]:
    """Anomalies the doc calls legal, or that say more about the harness than about Kafka."""
    notes = ("expired", "moved", "failed_present", "indeterminate_present", "phantom")
    return [
        Finding(f"{counts[name]} {anomaly(name).label}: {anomaly(name).meaning}")
        for name in notes
        if counts[name] > 0
    ]


def judge_consumers(
    counts: Mapping[str, int], examples: Examples, config: CellConfig, events: RunEvidence
) -> list[Finding]:
    """What the consumer group processed, judged by its commit mode (CONSUMER_DELIVERY):
    nothing for a run without a group. A group that never caught up leaves the messages past
    its committed offsets unjudged, so a mode that forbids skipping cannot pass then."""
    if not config.consumers:
        return []
    rule = CONSUMER_DELIVERY.get(str(config.consumer_commit))
    if rule is None:
        return [Finding(f"unknown consumer commit mode {config.consumer_commit!r}", unknown=True)]
    end = events.consumers
    if end is None:
        return [
            Finding("no consumers event: where the group's commits ended is unknown", unknown=True)
        ]
    if end.journal_errors:
        errors = "; ".join(end.journal_errors)
        return [Finding(f"a consumer's journal is incomplete: {errors}", unknown=True)]
    findings = [
        _consumer_finding("consumer_unprocessed", rule.unprocessed, counts, examples, rule),
        _consumer_finding("consumer_reprocessed", rule.reprocessed, counts, examples, rule),
    ]
    if not end.caught_up and rule.unprocessed == FORBIDDEN:
        findings.append(
            Finding(
                f"the consumer group did not catch up within its time (committed "
                f"{end.committed}, end offsets {end.end_offsets}): messages past "
                "its committed offsets were never judged",
                unknown=counts["consumer_unprocessed"] == 0,
            )
        )
    return findings


def _consumer_finding(
    name: str, rule: str, counts: Mapping[str, int], examples: Examples, delivery: DeliveryRule
) -> Finding:
    """One consumer class judged against its rule under the group's commit mode."""
    count, label = counts[name], anomaly(name).label
    what = (
        f"consumer group: {count} {label} ({anomaly(name).meaning}{_example_text(examples, name)})"
    )
    if count == 0 or rule == ALLOWED:
        verb = "allowed" if count else rule
        return Finding(f"{what}; {verb}: {delivery.citation}")
    if name == "consumer_unprocessed" and counts["offset_divergent"]:
        return Finding(
            f"{what}; the log was rewritten under the group ({counts['offset_divergent']} "
            f"offsets diverged), which moves records past committed offsets: {delivery.citation}"
        )
    return Finding(f"{VIOLATION_PREFIX}{label}: {what}; {delivery.citation}", violation=True)


def run_origin_us(result: RunResult, events: Events) -> float:
    """Epoch µs of t=0 for a run: the timeline's origin, else the first event, else 0."""
    origin = result.origin_us()
    if origin is not None:
        return origin
    evidence = RunEvidence.coerce(events)
    stamps = [float(e.ts_us) for e in evidence.events.events if e.ts_us is not None]
    return min(stamps) if stamps else 0.0
