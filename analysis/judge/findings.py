"""Findings: each anomaly count of a repetition judged against the documented guarantee of
its configuration, partition by partition where the events show the roles."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from analysis.judge.duplicates import known_duplicates
from analysis.judge.guarantees import (
    ALLOWED,
    FORBIDDEN,
    FORBIDDEN_UNLESS_ISR_SHRANK,
    JUDGED_BY,
    UNDOCUMENTED,
    DeliveryRule,
    Guarantee,
    delivery_rule,
)
from analysis.judge.history import PartitionHistory, timeline_t
from analysis.judge.mechanisms import PartitionJudgement, judge_partition
from analysis.judge.outcomes import (
    EXAMPLES_IN_REASON,
    Events,
    Examples,
    Finding,
    Subject,
    Verdict,
)
from analysis.model.anomalies import LOSS_CLASSES, AnomalyName, CountName, Counts, anomaly, loss_of
from analysis.model.evidence import RunEvidence
from analysis.model.results import Example, PartitionCounts, RunResult
from harness.rundir import layout
from harness.rundir.config import CellConfig


@dataclass(frozen=True)
class LossContext:
    """What judging a loss by partition needs: the events, t=0, the partitions each kind hit,
    the config, where the broker logs are, and each partition's history (None: no roles)."""

    events: RunEvidence
    origin_us: float
    # The loss figure, offset_divergent and nonmonotonic_send → partition → count ("unknown":
    # no partition, or not all shown).
    partitions: Mapping[Subject, PartitionCounts]
    config: CellConfig | None = None
    run_dir: str = ""
    histories: Mapping[int, PartitionHistory] | None = None


# What judge_partition calls each kind of hit in its reasons.
MECHANISM_WORDS: Final[Mapping[Subject, str]] = {
    CountName.LOSS: "loss",
    AnomalyName.OFFSET_DIVERGENT: "rewriting of acknowledged offsets",
    AnomalyName.NONMONOTONIC_SEND: "offsets handed again to later sends",
}


@dataclass(frozen=True)
class _Hit:
    """What a rule judges: its subject, the words that describe it, the examples they quote,
    and the verdict it gets where it is allowed (EXPECTED-LOSS for the loss figure: allowed
    loss is still loss; PASS for what is only noted)."""

    subject: Subject
    what: str
    quoted: tuple[Example, ...]
    allowed: Verdict

    def finding(self, verdict: Verdict | None, detail: str) -> Finding:
        """A finding about this hit; verdict None: the one it gets where allowed."""
        return Finding(self.subject, verdict or self.allowed, detail, self.quoted)

    def judged(
        self,
        rule: str,
        forbids: str,
        citation: str,
        named: str,
        allowed: str = "allowed",
        undocumented: str = "not documented",
    ) -> Finding:
        """The finding under `rule`: VIOLATION (`named` first) where it is `forbids`, UNKNOWN
        where the rule is undocumented, the allowed verdict otherwise."""
        if rule == forbids:
            return self.finding(Verdict.VIOLATION, f"{named}: {self.what}; {citation}")
        if rule == UNDOCUMENTED:
            return self.finding(Verdict.UNKNOWN, f"{self.what}; {undocumented}: {citation}")
        return self.finding(None, f"{self.what}; {allowed}: {citation}")


# ---------------------------------------------------------------------------------------------
# Findings


def judge_loss(
    counts: Counts,
    examples: Examples,
    guarantee: Guarantee,
    evidence: LossContext,
) -> Finding:
    """Judge the one loss figure (distinct acked messages missing) against the loss rule."""
    acked, loss = counts[CountName.ACKED], loss_of(counts)
    if loss == 0:
        return Finding(
            CountName.LOSS,
            Verdict.PASS,
            f"no acknowledged message lost: 0 of {acked} acked missing "
            f"(loss {guarantee.loss}: {guarantee.citation})",
        )
    hit = _Hit(
        CountName.LOSS,
        f"{loss} of {acked} acked missing ({_describe(counts, examples, LOSS_CLASSES)})",
        _quoted(counts, examples, LOSS_CLASSES),
        Verdict.EXPECTED_LOSS,
    )
    unsaid = "loss not documented"
    return _against_loss_rule(hit, guarantee, evidence, "loss", "loss allowed", unsaid)


def judge_divergence(
    counts: Counts,
    examples: Examples,
    guarantee: Guarantee,
    evidence: LossContext,
) -> list[Finding]:
    """Acknowledged offsets now holding another message (Jepsen's inconsistent offsets).

    Judged on their own, never as loss: a violation wherever loss is forbidden, even when the
    message survives at another offset.
    """
    name = AnomalyName.OFFSET_DIVERGENT
    diverged = counts[name]
    others = judge_by_loss_rule(counts, examples, guarantee, evidence)
    if diverged == 0:
        return others
    detail = _describe(counts, examples, (name,))
    hit = _Hit(
        name,
        f"{diverged} acknowledged offsets rewritten ({detail})",
        _quoted(counts, examples, (name,)),
        Verdict.PASS,
    )
    named, allowed = "acknowledged offset rewritten", "allowed where loss is"
    return [_against_loss_rule(hit, guarantee, evidence, named, allowed, "not documented"), *others]


def judge_by_loss_rule(
    counts: Counts, examples: Examples, guarantee: Guarantee, evidence: LossContext
) -> list[Finding]:
    """Each non-zero class JUDGED_BY the loss rule: a violation wherever loss is forbidden,
    never added to the loss figure; and each JUDGED_BY the order and loss rules, a violation
    only where both forbid it."""
    findings = [
        _against_order_and_loss(name, counts, examples, guarantee, evidence)
        for name, rule in JUDGED_BY.items()
        if rule == "order and loss" and counts.get(name)
    ]
    for name in (n for n, rule in JUDGED_BY.items() if rule == "loss" and counts.get(n)):
        entry = anomaly(name)
        what = _describe(counts, examples, (name,))
        hit = _Hit(name, what, _quoted(counts, examples, (name,)), Verdict.PASS)
        allowed = "allowed where loss is"
        findings.append(
            _against_loss_rule(hit, guarantee, evidence, entry.label, allowed, "not documented")
        )
    return findings


def _against_order_and_loss(
    name: AnomalyName,
    counts: Counts,
    examples: Examples,
    guarantee: Guarantee,
    evidence: LossContext,
) -> Finding:
    """A class that breaks order, judged by the order rule where it allows it, else by the loss
    rule: where loss is allowed a truncated log gives its offsets to later sends, so what the
    order rule forbids is a violation only where loss is forbidden too."""
    hit = _Hit(name, _describe(counts, examples, (name,)), _shown(examples, name), Verdict.PASS)
    label = anomaly(name).label
    order = hit.judged(guarantee.order, "guaranteed", guarantee.order_citation, label)
    if not order.violation:
        return order
    explained = "allowed where loss is (a truncated log gives its offsets to later sends)"
    return _against_loss_rule(hit, guarantee, evidence, label, explained, "not documented")


def _against_loss_rule(
    hit: _Hit, guarantee: Guarantee, evidence: LossContext, named: str, allowed: str, unsaid: str
) -> Finding:
    """A hit judged as loss is: partition by partition where the roles are known, else by the
    cell's loss rule (its ISR exception read from the samples); `named` begins a violation,
    `allowed` and `unsaid` name the rule where it allows the hit or says nothing of it."""
    if (by_partition := _by_partition(hit, evidence, named)) is not None:
        return by_partition
    if guarantee.loss == FORBIDDEN_UNLESS_ISR_SHRANK:
        return _isr_exception_finding(hit, named, guarantee, evidence)
    if guarantee.loss not in (ALLOWED, FORBIDDEN, UNDOCUMENTED):
        raise ValueError(f"unknown loss rule {guarantee.loss!r}")
    return hit.judged(guarantee.loss, FORBIDDEN, guarantee.citation, named, allowed, unsaid)


def _by_partition(hit: _Hit, evidence: LossContext, rule: str) -> Finding | None:
    """Judge each partition the hit's subject hit by what hit it, the mechanism seen, and
    known bugs; None when the roles or the partitions are unknown (the cell's class decides)."""
    partitions = evidence.partitions.get(hit.subject) or {}
    if (
        evidence.histories is None
        or evidence.config is None
        or not partitions
        or "unknown" in partitions
    ):
        return None
    judgements = [
        judge_partition(
            evidence.histories.get(int(p)) or PartitionHistory(int(p), (), (), ()),
            evidence.config,
            origin_us=evidence.origin_us,
            run_dir=evidence.run_dir,
            topic=layout.TOPIC,
            what=MECHANISM_WORDS[hit.subject],
        )
        for p in sorted(partitions, key=int)
    ]
    return _partition_finding(hit, judgements, rule)


def _partition_finding(hit: _Hit, judgements: Sequence[PartitionJudgement], rule: str) -> Finding:
    """One finding from the partitions' judgements: a violation if one is, else a known bug."""
    violating = [j for j in judgements if j.outcome == "violation"]
    if violating:
        reasons = "; ".join(j.reason for j in violating)
        return hit.finding(Verdict.VIOLATION, f"{rule}: {hit.what}; {reasons}")
    explained = "; ".join(f"p{j.partition}: {j.reason}" for j in judgements)
    if any(j.outcome == "known-bug" for j in judgements):
        return hit.finding(Verdict.KNOWN_BUG, f"{hit.what}; {explained}")
    if any(j.outcome == UNDOCUMENTED for j in judgements):
        return hit.finding(Verdict.UNKNOWN, f"{hit.what}; not documented: {explained}")
    return hit.finding(None, f"{hit.what}; allowed by mechanism: {explained}")


def _describe(counts: Counts, examples: Examples, names: Sequence[AnomalyName]) -> str:
    """Each non-zero class of `names` with its count, meaning and first example msg_ids."""
    return "; ".join(
        f"{counts[name]} {anomaly(name).label}: {anomaly(name).meaning}"
        f"{_example_text(examples, name)}"
        for name in names
        if counts[name]
    )


def _quoted(
    counts: Counts, examples: Examples, names: Sequence[AnomalyName]
) -> tuple[Example, ...]:
    """The examples _describe quotes: the first of each non-zero class of `names`."""
    return tuple(ex for name in names if counts[name] for ex in _shown(examples, name))


def _shown(examples: Examples, name: AnomalyName) -> tuple[Example, ...]:
    """The examples of a class a reason quotes: its first EXAMPLES_IN_REASON."""
    return tuple((examples.get(name) or ())[:EXAMPLES_IN_REASON])


def _example_text(examples: Examples, name: AnomalyName) -> str:
    """', e.g. msg_id 7 at p0@12 (read-back: 9), …' for the first examples of a class, or ''."""
    rows = examples.get(name) or ()
    if not rows:
        return ""
    shown = [_example_one(r) for r in _shown(examples, name)]
    more = ", …" if len(rows) > EXAMPLES_IN_REASON else ""
    return "; e.g. " + ", ".join(shown) + more


def _example_one(example: Example) -> str:
    """One example message: id, where it was acked (the partition alone where no offset came
    back, as under acks=0) and what the read-back holds there."""
    text = f"msg_id {example.msg_id}"
    if example.partition is not None:
        at = "" if example.offset is None else f"@{example.offset}"
        text += f" at p{example.partition}{at}"
    if example.readback_msg_id_at_offset is not None:
        text += f" (read-back holds msg_id {example.readback_msg_id_at_offset})"
    return text


def _isr_exception_finding(
    hit: _Hit, rule: str, guarantee: Guarantee, evidence: LossContext
) -> Finding:
    """Allowed only if, for every partition hit, a sample before the last fault showed an ISR
    of one replica there; a hit whose partition is unknown needs one in any partition."""
    before_us = _last_fault_start_us(evidence.events)
    # No facts: nothing narrows it.
    partitions = evidence.partitions.get(hit.subject) or {"unknown": 1}
    shrinks, missing = [], []
    for partition in sorted(partitions):
        scope = None if partition == "unknown" else {int(partition)}
        shrunk = _isr_shrunk_sample(evidence.events, scope, before_us)
        if shrunk is None:
            missing.append("an unknown partition" if scope is None else f"partition {partition}")
        else:
            ts_us, p, isr = shrunk
            shrinks.append(f"p{p} ISR {isr} at {timeline_t(ts_us, evidence.origin_us)}")
    if missing:
        return hit.finding(
            Verdict.VIOLATION,
            f"{rule}: {hit.what}; no leader/ISR sample before the last fault shows "
            f"an ISR of one replica for {', '.join(missing)}, so the exception does not apply: "
            f"{guarantee.citation}",
        )
    return hit.finding(
        None,
        f"{hit.what}; allowed because the ISR had shrunk to the leader before the fault "
        f"({'; '.join(shrinks)}): {guarantee.citation}",
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
    counts: Counts,
    examples: Examples,
    guarantee: Guarantee,
    config: CellConfig | None = None,
    events: RunEvidence | None = None,
) -> list[Finding]:
    """Duplicates of acknowledged messages: a violation with idempotence on (KNOWN-BUG when a
    known bug of the run's release and client explains them and its evidence shows: needs
    `config` and `events`), a counted legal anomaly otherwise. Duplicates of failed or
    indeterminate sends are always allowed."""
    findings = []
    name = AnomalyName.DUPLICATED
    if duplicated := counts[name]:
        what = f"{duplicated} duplicated ({anomaly(name).meaning}{_example_text(examples, name)})"
        hit = _Hit(name, what, _shown(examples, name), Verdict.PASS)
        citation = guarantee.duplicates_citation
        finding = hit.judged(guarantee.duplicates, FORBIDDEN, citation, "duplicates")
        known = None
        if finding.violation and config is not None and events is not None:
            known = known_duplicates(counts, config, events)
        if known is not None:
            finding = hit.finding(Verdict.KNOWN_BUG, f"{known[0]}; {what}; {known[1]}")
        findings.append(finding)
    unacked_name = AnomalyName.DUPLICATED_UNACKED
    if unacked := counts[unacked_name]:
        entry, ids = anomaly(unacked_name), _example_text(examples, unacked_name)
        detail = (
            f"{unacked} {entry.label} ({entry.meaning}{ids}): the idempotence guarantee "
            "covers acknowledged messages only"
        )
        findings.append(Finding(unacked_name, Verdict.PASS, detail, _shown(examples, unacked_name)))
    return findings


def judge_order(counts: Counts, examples: Examples, guarantee: Guarantee) -> list[Finding]:
    """Reordering is a violation when order is guaranteed, a counted legal anomaly otherwise;
    so is each class JUDGED_BY the order rule."""
    name = AnomalyName.REORDERED
    others = judge_by_order_rule(counts, examples, guarantee)
    reordered = counts[name]
    if reordered == 0:
        return others
    ids = _example_text(examples, name)
    what = f"{reordered} reordered (read order differs from send order per key{ids})"
    hit = _Hit(name, what, _shown(examples, name), Verdict.PASS)
    order = hit.judged(guarantee.order, "guaranteed", guarantee.order_citation, "reordering")
    return [order, *others]


def judge_by_order_rule(counts: Counts, examples: Examples, guarantee: Guarantee) -> list[Finding]:
    """Each non-zero class JUDGED_BY the order rule: a violation where Kafka guarantees order
    per partition, counted and allowed where it does not, UNKNOWN where nothing is documented."""
    findings = []
    for name in (n for n, rule in JUDGED_BY.items() if rule == "order" and counts.get(n)):
        hit = _Hit(name, _describe(counts, examples, (name,)), _shown(examples, name), Verdict.PASS)
        label = anomaly(name).label
        findings.append(hit.judged(guarantee.order, "guaranteed", guarantee.order_citation, label))
    return findings


# Anomalies the doc calls legal, or that say more about the harness than about Kafka: noted.
LEGAL_ANOMALIES: Final = (
    AnomalyName.EXPIRED,
    AnomalyName.MOVED,
    AnomalyName.FAILED_PRESENT,
    AnomalyName.INDETERMINATE_PRESENT,
    AnomalyName.PHANTOM,
)


def legal_anomaly_notes(counts: Counts) -> list[Finding]:
    """A note per non-zero LEGAL_ANOMALIES class: its count, label and meaning."""
    described = ((name, _describe(counts, {}, (name,))) for name in LEGAL_ANOMALIES)
    return [Finding(name, Verdict.PASS, text) for name, text in described if text]


def judge_consumers(
    counts: Counts, examples: Examples, config: CellConfig, events: RunEvidence
) -> list[Finding]:
    """What the consumer group processed, judged by its commit mode and the members' client
    (delivery_rule): nothing for a run without a group. A group that never caught up leaves
    the messages past its committed offsets unjudged, so a mode that forbids skipping cannot
    pass then."""
    if not config.consumers:
        return []
    end = events.consumers
    if end is None:
        detail = "no consumers event: where the group's commits ended is unknown"
        return [Finding(None, Verdict.UNKNOWN, detail)]
    rule = delivery_rule(str(config.consumer_commit), end.client)
    if rule is None:
        detail = f"unknown consumer commit mode {config.consumer_commit!r}"
        return [Finding(None, Verdict.UNKNOWN, detail)]
    if end.journal_errors:
        errors = "; ".join(end.journal_errors)
        return [Finding(None, Verdict.UNKNOWN, f"a consumer's journal is incomplete: {errors}")]
    unprocessed = AnomalyName.CONSUMER_UNPROCESSED
    findings = [
        _consumer_finding(unprocessed, rule.unprocessed, counts, examples, rule),
        _consumer_finding(
            AnomalyName.CONSUMER_REPROCESSED, rule.reprocessed, counts, examples, rule
        ),
    ]
    if not end.caught_up and rule.unprocessed == FORBIDDEN:
        unjudged = counts[unprocessed] == 0
        findings.append(
            Finding(
                unprocessed,
                Verdict.UNKNOWN if unjudged else Verdict.PASS,
                f"the consumer group did not catch up within its time (committed "
                f"{end.committed}, end offsets {end.end_offsets}): messages past "
                "its committed offsets were never judged",
            )
        )
    return findings


def _consumer_finding(
    name: AnomalyName, rule: str, counts: Counts, examples: Examples, delivery: DeliveryRule
) -> Finding:
    """One consumer class judged against its rule under the group's commit mode."""
    count, label = counts[name], anomaly(name).label
    what = (
        f"consumer group: {count} {label} ({anomaly(name).meaning}{_example_text(examples, name)})"
    )
    hit = _Hit(name, what, _shown(examples, name), Verdict.PASS)
    if count == 0:
        return hit.finding(None, f"{what}; {rule}: {delivery.citation}")
    diverged = counts[AnomalyName.OFFSET_DIVERGENT]
    if rule == FORBIDDEN and name == AnomalyName.CONSUMER_UNPROCESSED and diverged:
        return hit.finding(
            None,
            f"{what}; the log was rewritten under the group ({diverged} "
            f"offsets diverged), which moves records past committed offsets: {delivery.citation}",
        )
    return hit.judged(rule, FORBIDDEN, delivery.citation, label)


def run_origin_us(result: RunResult, events: Events) -> float:
    """Epoch µs of t=0 for a run: the timeline's origin, else the first event, else 0."""
    origin = result.origin_us()
    if origin is not None:
        return origin
    evidence = RunEvidence.coerce(events)
    stamps = [float(e.ts_us) for e in evidence.events.events if e.ts_us is not None]
    return min(stamps) if stamps else 0.0
