"""Judge reconciled repetitions and cells against the documented guarantees.

Checkers are pure functions of a repetition's result (from results.json) and its events; like
Jepsen's, they answer PASS/VIOLATION/... or UNKNOWN, and an exception inside them becomes
UNKNOWN with the error as reason, never a crash.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Final

from analysis.guarantees import (
    ALLOWED,
    FORBIDDEN,
    FORBIDDEN_UNLESS_ISR_SHRANK,
    Guarantee,
    guarantee_for,
)

__all__ = [
    "COUNT_NAMES",
    "CellStats",
    "CellVerdict",
    "CountStats",
    "RepetitionVerdict",
    "Verdict",
    "cell_stats",
    "exit_code",
    "judge_all",
    "judge_cell",
    "judge_repetition",
    "load_events",
    "load_events_by_run",
    "load_results",
    "run_origin_us",
]

COUNT_NAMES: Final = (
    "sent", "acked", "failed", "indeterminate", "read", "lost", "unseen", "duplicated",
    "offset_divergent", "moved", "failed_present", "indeterminate_present", "reordered",
    "phantom",
)  # fmt: skip
LOSS_CLASSES: Final = ("lost", "offset_divergent", "unseen")
EXAMPLES_IN_REASON: Final = 5
VIOLATION_PREFIX: Final = "forbidden "  # every violation reason starts with it


class Verdict(StrEnum):
    """Outcome of judging a repetition or a cell against the documented guarantee."""

    PASS = "PASS"
    VIOLATION = "VIOLATION"
    EXPECTED_LOSS = "EXPECTED-LOSS"
    NOT_PROVOKED = "NOT-PROVOKED"
    UNKNOWN = "UNKNOWN"


CONSISTENT: Final = frozenset({Verdict.PASS, Verdict.EXPECTED_LOSS, Verdict.NOT_PROVOKED})


@dataclass(frozen=True)
class RepetitionVerdict:
    """The judgement of one repetition, with the reasons and the guarantee it was held to."""

    verdict: Verdict
    reasons: tuple[str, ...]
    guarantee: Guarantee | None
    run_dir: str = ""
    repetition: int = 0
    loss: int | None = None  # lost + offset_divergent + unseen; None when not judged
    acked: int | None = None


@dataclass(frozen=True)
class CountStats:
    """Mean, minimum and maximum of one count over a cell's judged repetitions."""

    mean: float
    min: int
    max: int


@dataclass(frozen=True)
class CellStats:
    """Aggregated counts of a cell; rates are None when nothing was acknowledged."""

    repetitions: int
    counted: int  # repetitions that had counts
    counts: Mapping[str, CountStats]
    loss_rate: float | None  # sum(lost) / sum(acked)
    loss_or_divergence_rate: float | None  # sum(lost + offset_divergent) / sum(acked)


@dataclass(frozen=True)
class CellVerdict:
    """The judgement of one cell over all its repetitions."""

    cell: str
    experiment: str
    config: Mapping[str, Any]
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


# ---------------------------------------------------------------------------------------------
# Loading run directories


def load_events(run_dir: str | Path) -> list[dict[str, Any]]:
    """The events of a run dir in file order; [] when missing; skips torn or non-object lines."""
    path = Path(run_dir) / "events.jsonl"
    if not path.is_file():
        return []
    events: list[dict[str, Any]] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue  # a crashed run may leave a torn last line; the rest is still evidence
        if isinstance(event, dict):
            events.append(event)
    return events


def load_results(run_dirs: Iterable[str | Path]) -> list[dict[str, Any]]:
    """Every results.json in or below the given dirs, one dict per repetition, in path order."""
    results: list[dict[str, Any]] = []
    for root in run_dirs:
        root = Path(root)
        direct = root / "results.json"
        files = [direct] if direct.is_file() else sorted(root.rglob("results.json"))
        for file in files:
            results.extend(_read_results_file(file))
    return results


def _read_results_file(file: Path) -> list[dict[str, Any]]:
    """Parse one results.json holding a result object or a list of them."""
    data = json.loads(file.read_text(encoding="utf-8"))
    if isinstance(data, dict):
        # The file sits in its run dir; trust where it is now over where it was written.
        return [{**data, "run_dir": str(file.parent)}]
    return [item for item in data if isinstance(item, dict)]


def load_events_by_run(results: Iterable[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The events of each result's run dir, keyed by its `run_dir`."""
    return {str(r.get("run_dir", "")): load_events(str(r.get("run_dir", ""))) for r in results}


# ---------------------------------------------------------------------------------------------
# Repetition


def judge_repetition(
    result: Mapping[str, Any], events: Sequence[Mapping[str, Any]]
) -> RepetitionVerdict:
    """Judge one repetition; never raises: a checker failure yields UNKNOWN naming the error."""
    run_dir, repetition = _identity(result)
    try:
        return _judge(result, events, run_dir, repetition)
    except Exception as exc:  # Jepsen: a checker that crashes knows nothing, it does not fail
        return RepetitionVerdict(
            verdict=Verdict.UNKNOWN,
            reasons=(f"checker error: {type(exc).__name__}: {exc}",),
            guarantee=None,
            run_dir=run_dir,
            repetition=repetition,
        )


def _identity(result: Mapping[str, Any]) -> tuple[str, int]:
    """(run_dir, repetition) of a result, tolerating missing or malformed fields."""
    try:
        return str(result.get("run_dir", "")), int(result.get("repetition", 0))
    except (AttributeError, TypeError, ValueError):
        return "", 0


def _judge(
    result: Mapping[str, Any], events: Sequence[Mapping[str, Any]], run_dir: str, repetition: int
) -> RepetitionVerdict:
    """The checker proper; may raise on malformed input."""
    status = result.get("status")
    if status != "complete" or result.get("counts") is None:
        reason = f"run {status or 'without status'}: {result.get('error') or 'no error recorded'}"
        return RepetitionVerdict(
            Verdict.UNKNOWN, (reason,), _guarantee_or_none(result), run_dir, repetition
        )
    counts = _read_counts(result["counts"])
    guarantee = guarantee_for(result["config"])
    acked = counts["acked"]
    if acked == 0:
        reason = (
            f"no message was acknowledged (sent {counts['sent']}, failed {counts['failed']}, "
            f"indeterminate {counts['indeterminate']}): nothing to judge"
        )
        return RepetitionVerdict(
            Verdict.UNKNOWN, (reason,), guarantee, run_dir, repetition, loss=0, acked=0
        )
    examples = result.get("examples") or {}
    origin_us = run_origin_us(result, events)
    findings = [
        _loss_finding(counts, examples, guarantee, events, origin_us),
        *_duplicate_findings(counts, examples, guarantee),
        *_order_findings(counts, examples, guarantee),
        *_legal_anomaly_notes(counts),
    ]
    loss = sum(counts[name] for name in LOSS_CLASSES)
    return RepetitionVerdict(
        verdict=_repetition_outcome(findings, loss),
        reasons=tuple(f.reason for f in sorted(findings, key=lambda f: not f.violation)),
        guarantee=guarantee,
        run_dir=run_dir,
        repetition=repetition,
        loss=loss,
        acked=acked,
    )


def _repetition_outcome(findings: Sequence[_Finding], loss: int) -> Verdict:
    """VIOLATION if any finding is one, else EXPECTED-LOSS if anything was lost, else PASS."""
    if any(f.violation for f in findings):
        return Verdict.VIOLATION
    return Verdict.EXPECTED_LOSS if loss > 0 else Verdict.PASS


def _guarantee_or_none(result: Mapping[str, Any]) -> Guarantee | None:
    """The guarantee of a result's config, or None when the config cannot be read."""
    try:
        return guarantee_for(result["config"])
    except (KeyError, TypeError, ValueError, LookupError):
        return None


def _read_counts(raw: Mapping[str, Any]) -> dict[str, int]:
    """The counts as ints; raises ValueError naming the first missing or non-integer count."""
    counts: dict[str, int] = {}
    for name in COUNT_NAMES:
        value = raw.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"count {name!r} is {value!r}, expected a non-negative int")
        counts[name] = value
    return counts


def _loss_finding(
    counts: Mapping[str, int],
    examples: Mapping[str, Any],
    guarantee: Guarantee,
    events: Sequence[Mapping[str, Any]],
    origin_us: float,
) -> _Finding:
    """Judge lost + offset-divergent + unseen acknowledged messages against the loss rule."""
    acked = counts["acked"]
    if sum(counts[name] for name in LOSS_CLASSES) == 0:
        return _Finding(
            f"no acknowledged message lost: 0 lost, 0 offset-divergent, 0 unseen of {acked} "
            f"acked (loss {guarantee.loss}: {guarantee.citation})"
        )
    what = f"{_describe_loss(counts, examples)} of {acked} acked"
    if guarantee.loss == ALLOWED:
        return _Finding(f"{what}; loss allowed: {guarantee.citation}")
    if guarantee.loss == FORBIDDEN:
        return _Finding(f"{VIOLATION_PREFIX}loss: {what}; {guarantee.citation}", violation=True)
    if guarantee.loss != FORBIDDEN_UNLESS_ISR_SHRANK:
        raise ValueError(f"unknown loss rule {guarantee.loss!r}")
    return _isr_exception_finding(what, examples, guarantee, events, origin_us)


def _describe_loss(counts: Mapping[str, int], examples: Mapping[str, Any]) -> str:
    """Name each non-zero loss class with its count, meaning and example msg_ids."""
    meaning = {
        "lost": "acked, missing although a later offset of its partition was read",
        "offset_divergent": "the acked offset holds another message in the read-back",
        "unseen": "acked beyond the last offset read after the full read-back; counted as loss",
    }
    parts = []
    for name in LOSS_CLASSES:
        if counts[name]:
            label = name.replace("_", "-")
            ids = _example_text(examples, name)
            parts.append(f"{counts[name]} {label} ({meaning[name]}{ids})")
    return "; ".join(parts)


def _example_text(examples: Mapping[str, Any], name: str) -> str:
    """', e.g. msg_id 7 at p0@12 (read-back: 9), …' for the first examples of a class, or ''."""
    rows = [r for r in (examples.get(name) or []) if isinstance(r, Mapping)]
    if not rows:
        return ""
    shown = [_example_one(r) for r in rows[:EXAMPLES_IN_REASON]]
    more = ", …" if len(rows) > EXAMPLES_IN_REASON else ""
    return "; e.g. " + ", ".join(shown) + more


def _example_one(row: Mapping[str, Any]) -> str:
    """One example message: id, where it was acked and what the read-back holds there."""
    text = f"msg_id {row.get('msg_id')}"
    if row.get("partition") is not None:
        text += f" at p{row['partition']}@{row.get('offset')}"
    if row.get("readback_msg_id_at_offset") is not None:
        text += f" (read-back holds msg_id {row['readback_msg_id_at_offset']})"
    return text


def _isr_exception_finding(
    what: str,
    examples: Mapping[str, Any],
    guarantee: Guarantee,
    events: Sequence[Mapping[str, Any]],
    origin_us: float,
) -> _Finding:
    """Loss is allowed only if a sample before the last fault showed an ISR of one replica."""
    partitions = _loss_partitions(examples)
    before_us = _last_fault_start_us(events)
    shrunk = _isr_shrunk_sample(events, partitions, before_us)
    if shrunk is not None:
        ts_us, partition, isr = shrunk
        t = (ts_us - origin_us) / 1e6
        return _Finding(
            f"{what}; allowed because the ISR of partition {partition} had shrunk to {isr} "
            f"at t={t:.1f} s, before the fault: {guarantee.citation}"
        )
    scope = f"partitions {sorted(partitions)}" if partitions else "any partition"
    return _Finding(
        f"{VIOLATION_PREFIX}loss: {what}; no leader/ISR sample before the last fault shows "
        f"an ISR of one replica for {scope}, so the exception does not apply: "
        f"{guarantee.citation}",
        violation=True,
    )


def _loss_partitions(examples: Mapping[str, Any]) -> set[int]:
    """Partitions named by the loss examples (empty: unknown, so any partition counts)."""
    found: set[int] = set()
    for name in LOSS_CLASSES:
        for row in examples.get(name) or []:
            if isinstance(row, Mapping) and row.get("partition") is not None:
                found.add(int(row["partition"]))
    return found


def _last_fault_start_us(events: Sequence[Mapping[str, Any]]) -> float:
    """ts_us of the last fault_start; +inf when there was none (then every sample is before)."""
    starts = [int(e["ts_us"]) for e in events if e.get("type") == "fault_start"]
    return max(starts) if starts else float("inf")


def _isr_shrunk_sample(
    events: Sequence[Mapping[str, Any]], partitions: set[int], before_us: float
) -> tuple[int, int, list[int]] | None:
    """(ts_us, partition, isr) of the first sample before `before_us` with an ISR of size 1."""
    samples = sorted((e for e in events if e.get("type") == "sample"), key=lambda e: e["ts_us"])
    for sample in samples:
        if sample["ts_us"] >= before_us:
            break
        for state in sample.get("partitions") or []:
            isr = list(state.get("isr") or [])
            in_scope = not partitions or state.get("partition") in partitions
            if in_scope and len(isr) == 1:
                return int(sample["ts_us"]), int(state["partition"]), isr
    return None


def _duplicate_findings(
    counts: Mapping[str, int], examples: Mapping[str, Any], guarantee: Guarantee
) -> list[_Finding]:
    """Duplicates are a violation with idempotence on, a counted legal anomaly otherwise."""
    duplicated = counts["duplicated"]
    if duplicated == 0:
        return []
    ids = _example_text(examples, "duplicated")
    what = f"{duplicated} duplicated (message ids read more than once{ids})"
    if guarantee.duplicates == FORBIDDEN:
        reason = f"{VIOLATION_PREFIX}duplicates: {what}; {guarantee.duplicates_citation}"
        return [_Finding(reason, violation=True)]
    return [_Finding(f"{what}; allowed: {guarantee.duplicates_citation}")]


def _order_findings(
    counts: Mapping[str, int], examples: Mapping[str, Any], guarantee: Guarantee
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
    notes = {
        "failed_present": "send failed, yet in the log (legal, e.g. after "
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND)",
        "indeterminate_present": "outcome unknown, in the log (legal)",
        "moved": "found at another offset than acknowledged (not a loss)",
        "phantom": "read but never sent (not judged: points at the harness or a reused topic)",
    }
    return [
        _Finding(f"{counts[name]} {name.replace('_', '-')}: {text}")
        for name, text in notes.items()
        if counts[name] > 0
    ]


def run_origin_us(result: Mapping[str, Any], events: Sequence[Mapping[str, Any]]) -> float:
    """Epoch µs of t=0 for a run: the timeline's origin, else the first event, else 0."""
    timeline = result.get("timeline") or []
    if timeline:
        first = timeline[0]
        return (float(first["epoch_s"]) - float(first["t_s"])) * 1e6
    stamps = [float(e["ts_us"]) for e in events if "ts_us" in e]
    return min(stamps) if stamps else 0.0


# ---------------------------------------------------------------------------------------------
# Cell


def judge_cell(
    results_of_cell: Sequence[Mapping[str, Any]],
    events_by_run: Mapping[str, Sequence[Mapping[str, Any]]],
) -> CellVerdict:
    """Judge a cell from all its repetitions; ValueError if given no repetition at all."""
    if not results_of_cell:
        raise ValueError("judge_cell needs at least one repetition")
    ordered = sorted(results_of_cell, key=lambda r: _identity(r)[1])
    repetitions = tuple(
        judge_repetition(r, events_by_run.get(str(r.get("run_dir", "")), [])) for r in ordered
    )
    guarantee = next((r.guarantee for r in repetitions if r.guarantee is not None), None)
    verdict, reasons = _cell_outcome(repetitions, guarantee)
    first = ordered[0]
    return CellVerdict(
        cell=str(first.get("cell", "")),
        experiment=str(first.get("experiment", "")),
        config=dict(first.get("config") or {}),
        verdict=verdict,
        reasons=reasons,
        repetitions=repetitions,
        stats=cell_stats(ordered),
        guarantee=guarantee,
    )


def _cell_outcome(
    reps: Sequence[RepetitionVerdict], guarantee: Guarantee | None
) -> tuple[Verdict, tuple[str, ...]]:
    """Fold repetition verdicts: VIOLATION > EXPECTED-LOSS > UNKNOWN > NOT-PROVOKED > PASS."""
    n = len(reps)
    by_verdict = {v: [r for r in reps if r.verdict == v] for v in Verdict}
    if violating := by_verdict[Verdict.VIOLATION]:
        head = f"{len(violating)} of {n} repetitions violate the documented guarantee"
        return Verdict.VIOLATION, (head, *_rep_reasons(violating, only_violations=True))
    if lossy := by_verdict[Verdict.EXPECTED_LOSS]:
        head = f"loss allowed and observed in {len(lossy)} of {n} repetitions"
        return Verdict.EXPECTED_LOSS, (head, *_rep_reasons(lossy, first_only=True))
    if unknown := by_verdict[Verdict.UNKNOWN]:
        # An unjudged repetition could have lost data, so neither PASS nor NOT-PROVOKED holds.
        head = f"{len(unknown)} of {n} repetitions could not be judged"
        return Verdict.UNKNOWN, (head, *_rep_reasons(unknown, first_only=True))
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
    lines = []
    for rep in reps:
        reasons = rep.reasons
        if only_violations:
            reasons = tuple(r for r in reasons if r.startswith(VIOLATION_PREFIX)) or reasons
        if first_only:
            reasons = reasons[:1]
        lines.extend(f"rep {rep.repetition}: {reason}" for reason in reasons)
    return lines


def cell_stats(results_of_cell: Sequence[Mapping[str, Any]]) -> CellStats:
    """Mean/min/max per count over repetitions with counts, and the loss rates."""
    rows = [r["counts"] for r in results_of_cell if isinstance(r.get("counts"), Mapping)]
    stats: dict[str, CountStats] = {}
    for name in COUNT_NAMES:
        values = [v for v in (row.get(name) for row in rows) if _is_count(v)]
        if values:
            stats[name] = CountStats(sum(values) / len(values), min(values), max(values))
    return CellStats(
        repetitions=len(results_of_cell),
        counted=len(rows),
        counts=stats,
        loss_rate=_rate(rows, ("lost",)),
        loss_or_divergence_rate=_rate(rows, ("lost", "offset_divergent")),
    )


def _is_count(value: object) -> bool:
    """True for a non-negative int that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _rate(rows: Sequence[Mapping[str, Any]], names: Sequence[str]) -> float | None:
    """sum(names) / sum(acked) over rows with all those counts; None when nothing was acked."""
    usable = [r for r in rows if all(_is_count(r.get(n)) for n in (*names, "acked"))]
    acked = sum(r["acked"] for r in usable)
    if acked == 0:
        return None
    return sum(r[n] for r in usable for n in names) / acked


def judge_all(
    results: Sequence[Mapping[str, Any]],
    events_by_run: Mapping[str, Sequence[Mapping[str, Any]]],
) -> list[CellVerdict]:
    """Group results by (experiment, cell) in first-seen order and judge each group."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for result in results:
        key = (str(result.get("experiment", "")), str(result.get("cell", "")))
        groups.setdefault(key, []).append(result)
    return [judge_cell(group, events_by_run) for group in groups.values()]


def exit_code(cells: Sequence[CellVerdict]) -> int:
    """1 if any cell is a VIOLATION, else 2 if any is UNKNOWN (or none was judged), else 0."""
    verdicts = {c.verdict for c in cells}
    if Verdict.VIOLATION in verdicts:
        return 1
    if not cells or Verdict.UNKNOWN in verdicts:
        return 2
    return 0
