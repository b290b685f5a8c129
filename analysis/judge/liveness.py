"""The consumer group's liveness and its members' positions judged: each `stuck` window, `reset`
and poll step (`poll_skip`, `nonmonotonic_poll`) against LIVENESS_TABLE
(analysis/judge/guarantees.py, citing docs/kafka-reliability.md, “Consumer liveness”)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from analysis.judge.guarantees import (
    FORBIDDEN,
    LIVENESS_SOURCE,
    LIVENESS_TABLE,
    Guarantee,
    LivenessRow,
)
from analysis.judge.outcomes import EXAMPLES_IN_REASON, Examples, Finding, Verdict
from analysis.model.anomalies import AnomalyName, Counts, anomaly
from analysis.model.evidence import RunEvidence
from analysis.model.polls import UNJOURNALLED_STARTS
from analysis.model.results import Example
from harness.rundir.config import CellConfig

__all__ = ["judge_liveness", "liveness_row"]

LIVENESS_CLASSES: Final = (
    *(AnomalyName.STUCK, AnomalyName.RESET),
    *(AnomalyName.POLL_SKIP, AnomalyName.NONMONOTONIC_POLL),
)
VERDICT_OF_RULE: Final = {
    "allowed": Verdict.PASS,
    "forbidden": Verdict.VIOLATION,
    "unknown": Verdict.UNKNOWN,
}


def liveness_row(name: str, cases: frozenset[str]) -> LivenessRow:
    """The first row of class `name` whose case is among `cases` (every example shows "any")."""
    return next(r for r in LIVENESS_TABLE if r.anomaly == name and r.case in cases | {"any"})


def cases_of(example: Example, config: CellConfig, guarantee: Guarantee | None) -> frozenset[str]:
    """The cases of LIVENESS_TABLE an example shows: a stuck window behind a held last stable
    offset (with unclean election enabled or not), a reset whose committed offset a sample saw
    gone, a reset or poll step in a cell whose guarantee forbids loss (the log below the high
    watermark kept)."""
    cases: set[str] = set()
    if example.lso_held:
        cases.add("lso-held-unclean" if config.unclean_leader_election else "lso-held")
    if example.end_below:
        cases.add("end-below")
    moved = example.reset_to is not None or example.to_offset is not None
    if moved and guarantee is not None and guarantee.loss == FORBIDDEN:
        cases.add("log-kept")
    return frozenset(cases)


def judge_liveness(
    counts: Counts,
    examples: Examples,
    config: CellConfig,
    guarantee: Guarantee | None,
    events: RunEvidence,
    origin_us: float,
) -> list[Finding]:
    """The findings of a run's stuck windows, resets and poll steps (none for a run without a
    group): one per table row its examples fall under; what the examples do not show is not
    judged (UNKNOWN). A run whose samples held no ends cannot say whether its group was stuck;
    member starts without an assignment journal, whether their offsets jumped."""
    if not config.consumers:
        return []
    findings: list[Finding] = []
    if not any(sample.ends for sample in events.samples):
        findings.append(
            Finding(
                AnomalyName.STUCK,
                Verdict.PASS,
                "stuck not judged: the run recorded no partition ends (a harness before them)",
            )
        )
    if unjournalled := int(counts.get(UNJOURNALLED_STARTS, 0)):
        detail = (
            f"poll skips and backward polls not judged for {unjournalled} member starts "
            "without an assignment journal (a harness before it)"
        )
        findings.append(Finding(AnomalyName.POLL_SKIP, Verdict.PASS, detail))
    for name in LIVENESS_CLASSES:
        shown = tuple(examples.get(name) or ())
        by_row: dict[LivenessRow, list[Example]] = {}
        for example in shown:
            by_row.setdefault(liveness_row(name, cases_of(example, config, guarantee)), []).append(
                example
            )
        findings += [_finding(name, row, rows, origin_us) for row, rows in by_row.items()]
        if (unseen := counts.get(name, 0) - len(shown)) > 0:
            detail = f"{unseen} more {anomaly(name).label} beyond the examples were not judged"
            findings.append(Finding(name, Verdict.UNKNOWN, detail))
    return findings


def _finding(
    name: AnomalyName, row: LivenessRow, rows: Sequence[Example], origin: float
) -> Finding:
    """One row's finding: how many, the first examples in words, the rule and its citation."""
    quoted = tuple(rows[:EXAMPLES_IN_REASON])
    more = ", …" if len(rows) > len(quoted) else ""
    words = ", ".join(_words(e, origin) for e in quoted) + more
    verdict = VERDICT_OF_RULE[row.rule]
    detail = (
        f"consumer group: {len(rows)} {anomaly(name).label} ({anomaly(name).meaning}; {words}); "
        f"{row.rule}: {row.citation} ({LIVENESS_SOURCE})"
    )
    return Finding(name, verdict, detail, quoted)


def _words(example: Example, origin: float) -> str:
    """'p0 from t=12.0 s to t=48.5 s at 1200, end 1500' or 'p0 at t=30.1 s: resumed at 0 below
    its commit 5000 (5000 read again)'."""
    if example.to_offset is not None:
        return (
            f"consumer-{example.consumer} on p{example.partition} at "
            f"t={_t(example.at_us, origin)}: {example.from_offset} then {example.to_offset}"
            + (f" ({example.skipped} records between)" if example.skipped else "")
        )
    if example.reset_to is not None:
        return (
            f"p{example.partition} at t={_t(example.at_us, origin)}: resumed at "
            f"{example.reset_to} below its commit {example.committed} ({example.reprocessed} "
            f"read again{', after a leader change' if example.leader_changed else ''})"
        )
    held = " (the high watermark past a held last stable offset)" if example.lso_held else ""
    return (
        f"p{example.partition} from t={_t(example.from_us, origin)} to "
        f"t={_t(example.to_us, origin)} at {example.position}, end {example.end}{held}"
    )


def _t(stamp_us: int | None, origin_us: float) -> str:
    """Seconds from the run's origin, as the timeline counts them."""
    return "?" if stamp_us is None else f"{(stamp_us - origin_us) / 1e6:.1f} s"
