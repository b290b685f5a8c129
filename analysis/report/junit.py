"""Write judged cells as JUnit XML, one test case per cell and repetition, for CI dashboards."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from analysis.judge.outcomes import VERDICT_MEANING, CellVerdict, Events, RepetitionVerdict, Verdict
from analysis.judge.verdicts import DEFAULT_FAIL_ON
from analysis.model.evidence import RunEvidence
from analysis.report.safe import PartFailure, safely
from analysis.report.views import format_rate

__all__ = ["SUITE_NAME", "junit_tree", "repetition_seconds", "write_junit"]

SUITE_NAME: Final = "kafka-chaos"
# Spelled as every other rendering spells the verdict, with the same meaning.
NOT_PROVOKED_MESSAGE: Final = (
    f"{Verdict.NOT_PROVOKED.value}: {VERDICT_MEANING[Verdict.NOT_PROVOKED]}"
)
MESSAGE_CHARS: Final = 500  # CI tools show the message attribute on one line


def repetition_seconds(events: Events) -> float:
    """How long a repetition ran: its first event to its last (ts_us), 0 without two stamps."""
    evidence = RunEvidence.coerce(events)
    stamps = [e.ts_us for e in evidence.events.events if e.ts_us is not None]
    return (max(stamps) - min(stamps)) / 1e6 if stamps else 0.0


def _outcome(cell: CellVerdict, rep: RepetitionVerdict, fail_on: frozenset[Verdict]) -> str:
    """'failure', 'error', 'skipped' or 'passed' for one repetition of a cell: a repetition
    fails where its verdict and its cell's both are in `fail_on`, the gate that decides the exit
    code (UNKNOWN as an error); a NOT-PROVOKED one that does not fail is skipped."""
    if rep.verdict in fail_on and cell.verdict in fail_on:
        return "error" if rep.verdict == Verdict.UNKNOWN else "failure"
    if rep.verdict == Verdict.NOT_PROVOKED:
        return "skipped"
    return "passed"


def _testcase(
    cell: CellVerdict, rep: RepetitionVerdict, seconds: float, fail_on: frozenset[Verdict]
) -> tuple[ET.Element, str]:
    """The <testcase> of one repetition and its outcome under `fail_on`."""
    case = ET.Element(
        "testcase",
        classname=f"{cell.experiment}.{cell.cell}",
        name=f"rep-{rep.repetition}",
        time=_seconds(seconds),
    )
    outcome = _outcome(cell, rep, fail_on)
    text = "\n".join(rep.reasons)
    if outcome in ("failure", "error"):
        child = ET.SubElement(case, outcome, message=_message(rep), type=rep.verdict.value)
        child.text = text
    elif outcome == "skipped":
        ET.SubElement(case, "skipped", message=NOT_PROVOKED_MESSAGE)
    ET.SubElement(
        case, "system-out"
    ).text = f"verdict: {rep.verdict.value}\n{_loss_line(rep)}{text}"
    return case, outcome


def _testcase_or_error(
    cell: CellVerdict,
    rep: RepetitionVerdict,
    events_by_run: Mapping[str, Events],
    fail_on: frozenset[Verdict],
) -> tuple[ET.Element, str, float]:
    """(test case, outcome, seconds) of one repetition; when building it raises, an <error>
    test case naming what failed (check-safe: the other test cases stand)."""

    def build() -> tuple[ET.Element, str, float]:
        seconds = repetition_seconds(events_by_run.get(rep.run_dir) or [])
        return (*_testcase(cell, rep, seconds, fail_on), seconds)

    built = safely(f"the test case of {cell.cell} rep-{rep.repetition}", build)
    if not isinstance(built, PartFailure):
        return built
    text = str(built)
    case = ET.Element(
        "testcase", classname=f"{cell.experiment}.{cell.cell}", name=f"rep-{rep.repetition}"
    )
    case.set("time", _seconds(0.0))
    ET.SubElement(case, "error", message=text[:MESSAGE_CHARS], type="report").text = text
    return case, "error", 0.0


def _seconds(seconds: float) -> str:
    """A JUnit time attribute: seconds with millisecond precision."""
    return f"{seconds:.3f}"


def _loss_line(rep: RepetitionVerdict) -> str:
    """'loss: N of M acked (r %)\n', the one loss figure, or '' when it was not counted."""
    rate = rep.loss_rate
    return "" if rate is None else f"loss: {rep.loss} of {rep.acked} acked ({format_rate(rate)})\n"


def _message(rep: RepetitionVerdict) -> str:
    """The first reason (NOT_PROVOKED_MESSAGE for a repetition that provoked nothing),
    shortened to fit a one-line message attribute."""
    if rep.verdict == Verdict.NOT_PROVOKED:
        return NOT_PROVOKED_MESSAGE
    first = rep.reasons[0] if rep.reasons else rep.verdict.value
    return first if len(first) <= MESSAGE_CHARS else first[: MESSAGE_CHARS - 1] + "…"


def junit_tree(
    cells: Sequence[CellVerdict],
    events_by_run: Mapping[str, Events],
    fail_on: frozenset[Verdict] = DEFAULT_FAIL_ON,
) -> ET.ElementTree:
    """<testsuites> holding one <testsuite name="kafka-chaos"> with correct totals, failing
    the repetitions `fail_on` fails (so CI's test view agrees with the exit code); each test
    case lasts as long as its repetition's events span."""
    suite = ET.Element("testsuite", name=SUITE_NAME)
    tally = {"tests": 0, "failure": 0, "error": 0, "skipped": 0}
    total_seconds = 0.0
    for cell in cells:
        for rep in cell.repetitions:
            case, outcome, seconds = _testcase_or_error(cell, rep, events_by_run, fail_on)
            suite.append(case)
            total_seconds += seconds
            tally["tests"] += 1
            if outcome in tally:
                tally[outcome] += 1
    totals = {
        "tests": str(tally["tests"]),
        "failures": str(tally["failure"]),
        "errors": str(tally["error"]),
        "skipped": str(tally["skipped"]),
        "time": _seconds(total_seconds),
    }
    suite.attrib.update(totals)
    root = ET.Element("testsuites", {"name": SUITE_NAME, **totals})
    root.append(suite)
    ET.indent(root)
    return ET.ElementTree(root)


def write_junit(
    cells: Sequence[CellVerdict],
    events_by_run: Mapping[str, Events],
    path: Path,
    fail_on: frozenset[Verdict] = DEFAULT_FAIL_ON,
) -> Path:
    """Write the JUnit XML for the cells under `fail_on` to `path` (parents created) and
    return it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    junit_tree(cells, events_by_run, fail_on).write(path, encoding="utf-8", xml_declaration=True)
    return path
