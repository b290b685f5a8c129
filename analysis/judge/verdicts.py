"""Judge reconciled repetitions and cells against the documented guarantees.

Checkers are pure functions of a repetition's RunResult and its events; like Jepsen's, they
answer PASS/VIOLATION/... or UNKNOWN, and an exception inside them becomes UNKNOWN with the
error as reason, never a crash.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from analysis.judge.cell import cell_stats, is_count
from analysis.judge.commits import judge_commits
from analysis.judge.contract import contract_breaches
from analysis.judge.findings import (
    LossContext,
    judge_consumers,
    judge_divergence,
    judge_duplicates,
    judge_loss,
    judge_order,
    legal_anomaly_notes,
    run_origin_us,
)
from analysis.judge.guarantees import (
    ALLOWED,
    Guarantee,
    guarantee_for,
)
from analysis.judge.history import partition_histories
from analysis.judge.known_bugs import BUG_REASON
from analysis.judge.liveness import judge_liveness
from analysis.judge.outcomes import (
    CellVerdict,
    Events,
    Examples,
    Finding,
    RepetitionVerdict,
    Subject,
    Verdict,
    most_severe,
)
from analysis.judge.placement import judge_placement
from analysis.judge.stopped import stopped_notes
from analysis.judge.transactions import transaction_findings
from analysis.model.anomalies import COUNT_NAMES, AnomalyName, CountName, Counts, loss_of
from analysis.model.evidence import RunEvidence
from analysis.model.results import PartitionCounts, RunResult, RunStatus
from harness.rundir.config import CellConfig

__all__ = [
    "exit_code",
    "judge_all",
    "judge_cell",
    "judge_repetition",
    "read_evidence_by_run",
]

# ---------------------------------------------------------------------------------------------
# Loading run directories


def read_evidence_by_run(results: Iterable[RunResult]) -> dict[str, RunEvidence]:
    """The evidence (typed events) of each result's run dir, keyed by its `run_dir`: the events
    reconcile parsed and carried with the result, read from the run dir only for a result
    without them."""
    return {r.run_dir: r.evidence or RunEvidence.read(r.run_dir) for r in results}


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
    loss, acked = loss_of(counts), counts[CountName.ACKED]
    unknown = RepetitionVerdict(Verdict.UNKNOWN, (), guarantee, run_dir, repetition, loss, acked)
    if breaches := contract_breaches(result, events):
        return dataclasses.replace(unknown, reasons=tuple(breaches))
    if acked == 0:
        reason = (
            f"no message was acknowledged (sent {counts[CountName.SENT]}, failed "
            f"{counts[CountName.FAILED]}, indeterminate {counts[CountName.INDETERMINATE]}): "
            "nothing to judge"
        )
        return _unacknowledged(unknown, reason, result, {**result.counts, **counts}, events)
    examples = result.examples
    partitions: dict[Subject, PartitionCounts] = {
        CountName.LOSS: result.loss_by_partition,
        AnomalyName.OFFSET_DIVERGENT: result.divergence_by_partition,
        AnomalyName.NONMONOTONIC_SEND: partitions_shown(
            examples, counts, AnomalyName.NONMONOTONIC_SEND
        ),
    }
    evidence = LossContext(
        events,
        run_origin_us(result, events),
        partitions,
        result.config,
        run_dir,
        partition_histories(events),
    )
    loss_finding = judge_loss(counts, examples, guarantee, evidence)
    facts = {**result.counts, **counts}  # the counts and the facts beside them
    transactional = transaction_findings(
        result.config,
        facts,
        events,
        examples,
        loss_is_violation=loss_finding.violation,
        origin_us=evidence.origin_us,
        histories=evidence.histories,
    )
    findings = [
        _explained_by_transactions(loss_finding, transactional),
        *judge_divergence(counts, examples, guarantee, evidence),
        *judge_duplicates(counts, examples, guarantee, result.config, events),
        *judge_order(counts, examples, guarantee),
        *legal_anomaly_notes(counts),
        *judge_consumers(counts, examples, result.config, events),
        *judge_commits(counts, examples, result.config, guarantee, events),
        *judge_placement(counts, examples, result.config, events),
        *judge_liveness(facts, examples, result.config, guarantee, events, evidence.origin_us),
        *transactional,
        *stopped_notes(events, evidence.origin_us),
    ]
    return RepetitionVerdict(
        verdict=most_severe(findings),
        reasons=tuple(
            f.reason for f in sorted(findings, key=lambda f: (not f.violation, not f.unknown))
        ),
        guarantee=guarantee,
        run_dir=run_dir,
        repetition=repetition,
        loss=loss,
        acked=acked,
        violations=tuple(f.reason for f in findings if f.violation),
        known_bugs=tuple(f.reason for f in findings if f.verdict == Verdict.KNOWN_BUG),
    )


def partitions_shown(examples: Examples, counts: Counts, name: AnomalyName) -> PartitionCounts:
    """Partition → how many of a class's examples are there, when every one it counted is shown
    (a send backwards is judged by what rewrote its partition, as the loss is); else all
    "unknown", which the cell's rule judges."""
    shown = examples.get(name) or ()
    if len(shown) != counts.get(name, 0) or any(e.partition is None for e in shown):
        return {"unknown": counts.get(name, 0)}
    return dict(Counter(str(e.partition) for e in shown))


def _unacknowledged(
    unknown: RepetitionVerdict,
    reason: str,
    result: RunResult,
    facts: Counts,
    events: RunEvidence,
) -> RepetitionVerdict:
    """A repetition without one acknowledged message: UNKNOWN for its loss, unless its
    transactions still show a finding that needs no acknowledgement (a transaction left open,
    an aborted read: every transaction may have been aborted by plan), which then decides."""
    findings = transaction_findings(
        result.config,
        facts,
        events,
        result.examples,
        loss_is_violation=False,
        origin_us=run_origin_us(result, events),
    )
    shown = [f for f in findings if f.verdict != Verdict.PASS]
    if not shown:
        return dataclasses.replace(unknown, reasons=(reason,))
    return dataclasses.replace(
        unknown,
        verdict=most_severe(shown),
        reasons=(*(f.reason for f in shown), reason.replace("nothing to judge", "loss not judged")),
        violations=tuple(f.reason for f in shown if f.violation),
    )


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
        if not is_count(value):
            raise ValueError(f"count {str(name)!r} is {value!r}, expected a non-negative int")
        counts[name] = value
    return counts


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
    if verdict == Verdict.NOT_PROVOKED:  # each repetition showed nothing: said in the cell's words
        repetitions = tuple(dataclasses.replace(r, verdict=verdict) for r in repetitions)
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
        head = f"a known bug of this release showed in {len(buggy)} of {n} repetitions"
        return Verdict.KNOWN_BUG, (head, *_rep_reasons(buggy, first_only=True, first_of=BUG_REASON))
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
            PROVOKE_REMEDY,
        )
    held = (
        f"all {n} repetitions kept every acknowledged message ({acked} acked); "
        f"loss {guarantee.loss}: {guarantee.citation}"
    )
    return Verdict.PASS, (held, ONE_REPETITION_REMEDY) if n == 1 else (held,)


# What a reader can change in the experiment file when a cell shows too little (the field
# names of docs/experiment-files.md).
PROVOKE_REMEDY: Final = (
    "to provoke it: more repetitions (`repetitions`), a longer or repeated fault "
    "(`duration_s` of the `faults.schedule` steps, or `faults.generate`), or more traffic in "
    "flight when it hits (`workload.rate`)"
)
ONE_REPETITION_REMEDY: Final = (
    "one repetition shows what can happen, not how often: raise `repetitions` for a loss "
    "probability with its interval"
)


def _rep_reasons(
    reps: Sequence[RepetitionVerdict],
    *,
    only_violations: bool = False,
    first_only: bool = False,
    first_of: str = "",
) -> list[str]:
    """Repetition reasons prefixed with their repetition number; with `first_of`, the reasons
    that begin with it come first (a known bug's, which names the JIRA and its evidence)."""
    lines: list[str] = []
    for rep in reps:
        reasons = rep.reasons
        if only_violations:
            reasons = rep.violations or reasons
        if first_of:
            reasons = tuple(sorted(reasons, key=lambda r: not r.startswith(first_of)))
        if first_only:
            reasons = reasons[:1]
        lines.extend(f"rep {rep.repetition}: {reason}" for reason in reasons)
    return lines


def judge_all(
    results: Sequence[RunResult], events_by_run: Mapping[str, Events]
) -> list[CellVerdict]:
    """Group results by (experiment, cell) in first-seen order and judge each group."""
    groups: dict[tuple[str, str], list[RunResult]] = {}
    for result in results:
        groups.setdefault((result.experiment, result.cell), []).append(result)
    return [judge_cell(group, events_by_run) for group in groups.values()]


def _explained_by_transactions(loss: Finding, transactional: Sequence[Finding]) -> Finding:
    """The loss finding, a KNOWN-BUG where a known transactional bug explains the committed
    transactions lost: in a transactional run a missing acknowledged message is a message of
    a committed transaction, so that bug explains the loss too."""
    explained = any(
        f.anomaly == AnomalyName.COMMITTED_LOST and f.verdict == Verdict.KNOWN_BUG
        for f in transactional
    )
    if not (loss.violation and explained):
        return loss
    detail = f"{loss.detail}; explained by the known bug of the committed transactions lost"
    return dataclasses.replace(loss, verdict=Verdict.KNOWN_BUG, detail=detail)


# The exit code of a cell's verdict when the verdict fails the command (`--fail-on`), the one
# table `run`, `report`, their help and docs/cli.md give. A known bug of an old release, loss
# the documentation allows, and a fault too weak to provoke any are what the user asked to
# see, not failures of the Kafka under test, unless they name them.
EXIT_CODES: Final[dict[Verdict, int]] = {
    Verdict.VIOLATION: 1,
    Verdict.KNOWN_BUG: 1,
    Verdict.EXPECTED_LOSS: 1,
    Verdict.NOT_PROVOKED: 1,
    Verdict.UNKNOWN: 2,
}
DEFAULT_FAIL_ON: Final = frozenset({Verdict.VIOLATION, Verdict.UNKNOWN})


def exit_code(
    cells: Sequence[CellVerdict], *, fail_on: frozenset[Verdict] = DEFAULT_FAIL_ON
) -> int:
    """The worst exit code of EXIT_CODES among the cells whose verdict is in `fail_on` (1
    before 2: a violation is said first), 2 when no cell was judged, else 0."""
    codes = {EXIT_CODES[c.verdict] for c in cells if c.verdict in fail_on}
    if 1 in codes:
        return 1
    if not cells or 2 in codes:
        return 2
    return 0


def parse_fail_on(text: str) -> frozenset[Verdict]:
    """The verdicts of a `--fail-on` list ("violation,unknown,known-bug", any case, '-' or '_');
    ValueError naming the unknown one and the choices."""
    chosen = set()
    for word in filter(None, (part.strip() for part in text.split(","))):
        name = word.upper().replace("_", "-")
        if name not in {v.value for v in EXIT_CODES}:
            choices = ", ".join(v.value.lower() for v in EXIT_CODES)
            raise ValueError(f"unknown verdict {word!r} in --fail-on; choose from {choices}")
        chosen.add(Verdict(name))
    if not chosen:
        raise ValueError("--fail-on names no verdict; give at least one, e.g. violation")
    return frozenset(chosen)


def exit_code_table() -> list[str]:
    """EXIT_CODES as the lines help and docs print: one line a verdict, then the others."""
    default = {v.value.lower() for v in DEFAULT_FAIL_ON}
    lines = [
        f"{verdict.value}: {code} when named in --fail-on"
        + (" (default)" if verdict.value.lower() in default else "")
        for verdict, code in EXIT_CODES.items()
    ]
    return [
        "PASS: 0",
        *lines,
        "no cell judged, or a harness error: 2",
        "interrupted: 130 (Ctrl-C), 143 (SIGTERM)",
    ]
