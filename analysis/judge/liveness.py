"""The consumer group's liveness and its members' positions judged: each `stuck` window, `reset`
and poll step (`poll_skip`, `nonmonotonic_poll`) against LIVENESS_TABLE (below, citing
docs/kafka-reliability.md, “Consumer liveness”)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from analysis.judge.guarantees import FORBIDDEN, Guarantee
from analysis.judge.history import timeline_t
from analysis.judge.known_bugs import first_shown
from analysis.judge.outcomes import EXAMPLES_IN_REASON, Examples, Finding, Verdict
from analysis.model.anomalies import AnomalyName, Counts, anomaly
from analysis.model.evidence import RunEvidence
from analysis.model.polls import READER, REWRITTEN_STEPS, SKIPS_AFTER_ABORT, UNJOURNALLED_STARTS
from analysis.model.results import Example
from harness.rundir.config import CellConfig

__all__ = [
    "LIVENESS_EVIDENCE",
    "LIVENESS_SOURCE",
    "LIVENESS_TABLE",
    "LivenessRow",
    "judge_liveness",
    "liveness_row",
]

LIVENESS_SOURCE: Final = "docs/kafka-reliability.md, “Consumer liveness”"


@dataclass(frozen=True)
class LivenessRow:
    """The rule of an example of one of these classes showing `case` (first fitting row decides)."""

    anomaly: Literal["stuck", "reset", "poll_skip", "nonmonotonic_poll"]
    case: Literal[
        "lso-held-unclean", "lso-held", "end-below", "commit-lost", "not-rewound", "log-kept", "any"
    ]
    rule: Literal["allowed", "forbidden", "unknown"]
    citation: str


LIVENESS_TABLE: Final[tuple[LivenessRow, ...]] = (
    LivenessRow("stuck", "lso-held-unclean", "unknown", "an unclean leader can lose a transaction "
        "marker, so the last stable offset cannot advance (KAFKA-7408, open; KAFKA-20716)"),
    LivenessRow("stuck", "lso-held", "forbidden", "transaction.timeout.ms: the coordinator is "
        "“proactively aborting the ongoing transaction” then, so none holds the LSO longer"),
    LivenessRow("stuck", "any", "unknown", "Kafka documents no bound on a consumer's progress: "
        "the client or the group coordinator is suspect"),
    LivenessRow("reset", "end-below", "allowed", "auto.offset.reset: “if the current offset does "
        "not exist any more on the server”; the high watermark was seen below the commit"),
    LivenessRow("reset", "commit-lost", "allowed", "the committed position “is the offset that "
        "the consumer will recover to”: the group's commit above it was lost (commit_lost, "
        "judged on its own), so it recovered to an older one"),
    LivenessRow("reset", "log-kept", "forbidden", "the committed position “is the offset that the "
        "consumer will recover to”, and the guarantee forbids loss: the log below it was kept"),
    LivenessRow("reset", "any", "unknown", "the log may have been truncated below the committed "
        "offset between two samples, where auto.offset.reset applies"),
    LivenessRow("poll_skip", "not-rewound", "forbidden", "a transaction commits its reads' "
        "offsets: records only aborted ones read were never processed (Kafka's exactly-once "
        "example seeks back to the committed offsets after an abort)"),
    LivenessRow("poll_skip", "log-kept", "forbidden", "the position is “the offset of the next "
        "record that will be given out”: within one assignment, no record is passed over"),
    LivenessRow("nonmonotonic_poll", "log-kept", "forbidden", "the position “automatically "
        "advances every time the consumer receives messages in a call to poll”"),
    LivenessRow("poll_skip", "any", "unknown", "the guarantee allows loss: where the log was "
        "truncated under a member, truncation detection (KIP-320) moves its position"),
    LivenessRow("nonmonotonic_poll", "any", "unknown", "the guarantee allows loss: truncation "
        "detection (KIP-320) or auto.offset.reset moves a position past a truncation back"),
)  # fmt: skip

LIVENESS_CLASSES: Final = (
    *(AnomalyName.STUCK, AnomalyName.RESET),
    *(AnomalyName.POLL_SKIP, AnomalyName.NONMONOTONIC_POLL),
)
NOT_REWOUND: Final = "not-rewound"  # the case of KAFKA-17582's pattern
# A liveness bug's evidence: the case of LIVENESS_TABLE its examples show (the known-bug
# table's rows explaining a liveness class, by reference).
LIVENESS_EVIDENCE: Final = {"KAFKA-17582": NOT_REWOUND}
VERDICT_OF_RULE: Final = {
    "allowed": Verdict.PASS,
    "forbidden": Verdict.VIOLATION,
    "unknown": Verdict.UNKNOWN,
}


def liveness_row(name: str, cases: frozenset[str]) -> LivenessRow:
    """The first row of class `name` whose case is among `cases` (every example shows "any")."""
    return next(r for r in LIVENESS_TABLE if r.anomaly == name and r.case in cases | {"any"})


def cases_of(
    example: Example,
    config: CellConfig,
    guarantee: Guarantee | None,
    lost_commits: Sequence[Example] = (),
) -> frozenset[str]:
    """The cases of LIVENESS_TABLE an example shows: a stuck window behind a held last stable
    offset (with unclean election enabled or not), a reset whose committed offset a sample saw
    gone, a reset below a commit of its partition acknowledged before it and then lost (one of
    `lost_commits`, the commit_lost examples), a reset or poll step in a cell whose guarantee
    forbids loss (the log below the high watermark kept)."""
    cases: set[str] = set()
    if example.lso_held:
        cases.add("lso-held-unclean" if config.unclean_leader_election else "lso-held")
    if example.end_below:
        cases.add("end-below")
    if example.reset_to is not None and any(
        lost.partition == example.partition
        and (lost.offset or 0) > example.reset_to
        and (lost.at_us or 0) <= (example.at_us or 0)
        for lost in lost_commits
    ):
        cases.add("commit-lost")
    moved = example.reset_to is not None or example.to_offset is not None
    if moved and guarantee is not None and guarantee.loss == FORBIDDEN:
        cases.add("log-kept")
    if not_rewound(example, config):
        cases.add(NOT_REWOUND)
    return frozenset(cases)


def not_rewound(example: Example, config: CellConfig) -> bool:
    """Whether a poll step is the transactions' reader passing over records only aborted
    transactions of its own read, in a cell whose reader is not rewound after an abort."""
    skipped = example.skipped or 0
    return config.txn_reader_rewinds is False and 0 < skipped == example.read_by_aborted


def judge_liveness(
    counts: Counts,
    examples: Examples,
    config: CellConfig,
    guarantee: Guarantee | None,
    events: RunEvidence,
    origin_us: float,
) -> list[Finding]:
    """The findings of a run's stuck windows, resets and poll steps (none for a run without a
    group or a transactions' reader): one per table row its examples fall under; what the
    examples do not show is not judged (UNKNOWN). A run whose samples held no ends cannot say
    whether its group was stuck; member starts without an assignment journal, whether their
    offsets jumped. A reader passing over what it read in aborted transactions is KAFKA-17582's
    pattern, KNOWN-BUG where the cell does not rewind it."""
    if not config.consumers and config.txn_reader_rewinds is None:
        return []
    findings: list[Finding] = []
    if config.consumers and not any(sample.ends for sample in events.samples):
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
    if rewritten := int(counts.get(REWRITTEN_STEPS, 0)):
        detail = (
            f"{rewritten} poll steps not judged: taken on a log since rewritten under the "
            "member (the read-back holds another record, or none, at one of their two offsets), "
            "so it cannot say what that log held between them; the rewrite is inconsistent_reads"
        )
        findings.append(Finding(AnomalyName.POLL_SKIP, Verdict.PASS, detail))
    lost_commits = tuple(examples.get(AnomalyName.COMMIT_LOST) or ())
    for name in LIVENESS_CLASSES:
        shown = tuple(examples.get(name) or ())
        by_row: dict[LivenessRow, list[Example]] = {}
        for example in shown:
            cases = cases_of(example, config, guarantee, lost_commits)
            by_row.setdefault(liveness_row(name, cases), []).append(example)
        unseen = counts.get(name, 0) - len(shown)
        # Beyond the examples, skips of KAFKA-17582's pattern are counted: judged with those shown.
        alike = _unseen_after_abort(name, counts, shown, config)
        findings += [
            _finding(name, row, rows, origin_us, config, alike if row.case == NOT_REWOUND else 0)
            for row, rows in by_row.items()
        ]
        if (unseen := unseen - alike) > 0:
            detail = f"{unseen} more {anomaly(name).label} beyond the examples were not judged"
            findings.append(Finding(name, Verdict.UNKNOWN, detail))
    return findings


def _unseen_after_abort(
    name: AnomalyName, counts: Counts, shown: Sequence[Example], config: CellConfig
) -> int:
    """How many poll skips beyond the examples are KAFKA-17582's pattern in a cell whose
    reader is not rewound (0 otherwise)."""
    if name != AnomalyName.POLL_SKIP or config.txn_reader_rewinds is not False:
        return 0
    seen = sum(not_rewound(example, config) for example in shown)
    return max(0, int(counts.get(SKIPS_AFTER_ABORT, 0)) - seen)


def _finding(
    name: AnomalyName, row: LivenessRow, rows: Sequence[Example], origin: float,
    config: CellConfig, beyond: int = 0,
) -> Finding:  # fmt: skip
    """One row's finding: how many (`beyond` more than the examples), the first examples in
    words, the rule and its citation; a row a known bug of the release explains, KNOWN-BUG
    with the bug's reason first."""
    quoted = tuple(rows[:EXAMPLES_IN_REASON])
    more = ", …" if len(rows) + beyond > len(quoted) else ""
    words = ", ".join(_words(e, origin) for e in quoted) + more
    what = f"{len(rows) + beyond} {anomaly(name).label} ({anomaly(name).meaning}; {words})"
    whose = "consumer group" if rows[0].consumer != READER else "transactions' reader"
    # A liveness bug's evidence is the case its examples show (LIVENESS_EVIDENCE).
    if found := first_shown(
        name,
        config.kafka_version,
        config.client,
        lambda bug: row.case if LIVENESS_EVIDENCE.get(bug.reference) == row.case else "",
    ):
        detail = f"{found[0].reason(config.kafka_version)}; {whose}: {what}"
        return Finding(name, Verdict.KNOWN_BUG, detail, quoted)
    detail = f"{whose}: {what}; {row.rule}: {row.citation} ({LIVENESS_SOURCE})"
    return Finding(name, VERDICT_OF_RULE[row.rule], detail, quoted)


def _words(example: Example, origin: float) -> str:
    """'p0 from t=12.0 s to t=48.5 s at 1200, end 1500' or 'p0 at t=30.1 s: resumed at 0 below
    its commit 5000 (5000 read again)'."""
    if example.to_offset is not None:
        who = "the reader" if example.consumer == READER else f"consumer-{example.consumer}"
        aborted = example.read_by_aborted
        return (
            f"{who} on p{example.partition} at "
            f"{timeline_t(example.at_us, origin)}: {example.from_offset} then {example.to_offset}"
            + (f" ({example.skipped} records between)" if example.skipped else "")
            + (f", {aborted} of them read by aborted transactions" if aborted else "")
        )
    if example.reset_to is not None:
        return (
            f"p{example.partition} at {timeline_t(example.at_us, origin)}: resumed at "
            f"{example.reset_to} below its commit {example.committed} ({example.reprocessed} "
            f"read again{', after a leader change' if example.leader_changed else ''})"
        )
    held = " (the high watermark past a held last stable offset)" if example.lso_held else ""
    return (
        f"p{example.partition} from {timeline_t(example.from_us, origin)} to "
        f"{timeline_t(example.to_us, origin)} at {example.position}, end {example.end}{held}"
    )
