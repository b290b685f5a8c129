"""report.md line by line: the summary sentence, the matrix with its alignment and price of
safety, each cell's heading, guarantee and reasons, and the provenance tables. The expected
text is written out here; the columns of the anomaly registry are spelled from it, so a new
anomaly class adds its column here too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from analysis.judge.guarantees import SOURCE
from analysis.judge.outcomes import CellVerdict
from analysis.model.anomalies import ANOMALY_NAMES, COUNT_LABELS
from analysis.report.markdown import render_markdown
from analysis.report.provenance import provenance_views
from analysis.report.render import render_report
from tests.unit.report_runs import (
    AP,
    CP,
    RUNS,
    events_with_fault_and_leader_change,
    judge_all,
    priced,
    result,
)
from tests.unit.results_json import typed

AP_CONFIG = (
    "acks=1 · min.insync=1 · unclean=off · idempotence=off · in-flight=5 · RF=3 · "
    "partitions=2 · fault=leader-partition · Kafka=3.9.0"
)
CP_CONFIG = (
    "acks=all · min.insync=2 · unclean=off · idempotence=on · in-flight=5 · RF=3 · "
    "partitions=2 · fault=leader-kill · Kafka=3.9.0"
)
PRICE_HEAD = ["partition stall (s)", "topic stall (s)", "failed sends", "first ack after heal (s)"]


# The classes the crafted cells counted above zero: the only ones the matrix shows.
SHOWN = ("lost", "offset_divergent", "moved")


def _head(priced: bool) -> list[str]:
    return [
        "cell",
        "verdict",
        "loss",
        "loss rate",
        *(PRICE_HEAD if priced else []),
        "sent",
        "acked",
        *(COUNT_LABELS[name][0] for name in SHOWN),
        "configuration",
    ]


def _anomalies(**shown: str) -> list[str]:
    return [shown.get(name, "0") for name in SHOWN]


FOLDED_LINE = (
    "Zero in every cell, so not shown: "
    + ", ".join(COUNT_LABELS[name][0] for name in ANOMALY_NAMES if name not in SHOWN)
    + "."
)


def _crafted() -> tuple[list[CellVerdict], list[Any], dict[str, Any]]:
    results = [
        result("ap-leader-partition", AP, 0),
        result("ap-leader-partition", AP, 1, lost=3),
        result("cp-leader-kill", CP, 0, offset_divergent=1, moved=1),
    ]
    events = {r["run_dir"]: events_with_fault_and_leader_change() for r in results}
    return judge_all(results, events), [typed(r) for r in results], events


def _reasons(cell: CellVerdict) -> list[str]:
    g = cell.guarantee
    assert g is not None
    return [
        f"### {cell.cell}: {cell.verdict.value}",
        "",
        f"_{AP_CONFIG if cell.cell.startswith('ap') else CP_CONFIG}_",
        "",
        f"Guarantee: loss {g.loss}, duplicates {g.duplicates}, order {g.order}. "
        f"{g.citation} ({SOURCE})",
        "",
        *(f"- {reason}" for reason in cell.reasons),
        "",
        *_notes(cell),
    ]


def _notes(cell: CellVerdict) -> list[str]:
    """The repetitions' reasons the cell's own do not quote as `rep N: reason`, folded."""
    notes = [
        f"- rep {rep.repetition} ({rep.verdict.value}): {reason}"
        for rep in cell.repetitions
        for reason in rep.reasons
        if f"rep {rep.repetition}: {reason}" not in cell.reasons
    ]
    if not notes:
        return []
    word = "reason" if len(notes) == 1 else "reasons"
    summary = f"<details><summary>{len(notes)} more {word} of its repetitions</summary>"
    return [summary, "", *notes, "", "</details>", ""]


def test_a_pass_cell_shows_its_repetitions_notes_folded() -> None:
    """A PASS cell quotes none of its repetitions' reasons: the note of a node that stopped on
    its own is still in report.md, under the cell's reasons, folded."""
    from dataclasses import replace

    from analysis.judge.outcomes import Verdict

    (cell,) = judge_all([result("cp-quiet", CP, 0)], {})
    note = "kafka-3 stopped with no fault acting on it: last seen up at t=21.8 s"
    rep = replace(cell.repetitions[0], verdict=Verdict.PASS, reasons=("kept all", note))
    passing = replace(cell, verdict=Verdict.PASS, reasons=("all 1 kept",), repetitions=(rep,))
    section = render_markdown([passing], (), "T").split("### cp-quiet: PASS")[1]
    assert section.split("## Provenance")[0].endswith(
        "- all 1 kept\n\n<details><summary>2 more reasons of its repetitions</summary>\n\n"
        f"- rep 0 (PASS): kept all\n- rep 0 (PASS): {note}\n\n</details>\n\n"
    )
    quoting = replace(passing, reasons=("all 1 kept", "rep 0: kept all", f"rep 0: {note}"))
    assert "<details>" not in render_markdown([quoting], (), "T")


PROVENANCE_LINES = [
    "## Provenance",
    "",
    "Runs under `runs/chaos/ts`:",
    "",
    "| | |",
    "|---|---|",
    "| git revision | 0123abcd0123abcd0123abcd0123abcd0123abcd |",
    "| command line | kafka-chaos run 'experiments/chaos file.yaml' --quiet |",
    "| seed | 42 (repetition r runs with seed + r) |",
    "| image | kafka-chaos/kafka:4.3.1-abc |",
    "| image id | sha256:feed |",
    "| Kafka version | 4.3.1 |",
    "| confluent-kafka | 2.12.0 |",
    "| librdkafka | 2.12.1 |",
    "| cores | 2 |",
    "| memory | 8.0 GiB |",
    "",
    "Runs under `runs/old/ts`:",
    "",
    "| | |",
    "|---|---|",
    "| provenance | not recorded: no provenance.json: the run was made by an older harness |",
    "",
]


def _row(values: list[str]) -> str:
    return "| " + " | ".join(values) + " |"


def test_the_markdown_report_reads_line_by_line_with_the_price_of_safety(tmp_path: Path) -> None:
    cells, results, events = _crafted()
    results[2] = priced(results[2], 9.25, 40, None)
    paths = render_report(cells, results, events, RUNS, tmp_path, "Chaos report")
    head = _head(priced=True)
    numbers = ["---:"] * (2 + 4 + 2 + len(SHOWN))  # loss, rate, price, sent, acked, classes
    alignment = ["---", "---", *numbers, "---"]
    assert len(alignment) == len(head)
    expected = [
        "# Chaos report",
        "",
        "**Failed (--fail-on violation,unknown): 1 of 2 cells violate the documented guarantees. "
        "Acknowledged messages were lost in 1 of 2 cells (3 messages; all where the documentation "
        "allows it).** Exit code 1. Verdicts: PASS 0 · VIOLATION 1 · EXPECTED-LOSS 1 · "
        "KNOWN-BUG 0 · NOT-PROVOKED 0 · UNKNOWN 0.",
        "",
        "Counts are per repetition: mean (min–max) when repetitions disagree.",
        "",
        _row(head),
        "|" + "|".join(alignment) + "|",
        _row(
            [
                "`ap-leader-partition`",
                "**EXPECTED-LOSS**",
                "1.5 (0–3)",
                "0.0789 %",
                "— (0 of 2 reps)",
                "—",
                "—",
                "—",
                "2,000",
                "1,900",
                *_anomalies(lost="1.5 (0–3)"),
                AP_CONFIG,
            ]
        ),
        _row(
            [
                "`cp-leader-kill`",
                "**VIOLATION**",
                "0",
                "0 %",
                "9.2",
                "4.6",
                "40 (60 indeterminate)",
                "never (1 heal with no ack after)",
                "2,000",
                "1,900",
                *_anomalies(offset_divergent="1", moved="1"),
                CP_CONFIG,
            ]
        ),
        "",
        FOLDED_LINE,
        "",
        "## Reasons",
        "",
        *_reasons(cells[0]),
        *_reasons(cells[1]),
        *PROVENANCE_LINES,
    ]
    assert paths.markdown.read_text("utf-8") == "\n".join(expected) + "\n"
    assert paths.failures == ()


def test_without_results_the_matrix_has_no_price_columns() -> None:
    cells, _, _ = _crafted()
    text = render_markdown(cells, provenance_views(()), "T")
    lines = text.splitlines()
    head = _head(priced=False)
    assert lines[6] == _row(head)
    numbers = ["---:"] * (2 + 2 + len(SHOWN))
    assert lines[7] == "|" + "|".join(["---", "---", *numbers, "---"]) + "|"
    assert lines[8].startswith(
        "| `ap-leader-partition` | **EXPECTED-LOSS** | 1.5 (0–3) | 0.0789 % |"
    )
    assert text.endswith("\n## Provenance\n\n")


def test_a_cell_name_and_texts_are_kept_inside_their_table_cells() -> None:
    piped = result("a|b", CP, 0)
    cells = judge_all([piped], {})
    text = render_markdown(cells, (), "T|itle", {})
    assert text.startswith("# T|itle\n")
    (row,) = [line for line in text.splitlines() if line.startswith("| `a")]
    assert row.startswith("| `a\\|b` | **UNKNOWN** | 0 | 0 % | — (0 of 1 reps) | — | — | — |")
    assert row.endswith(" | acks=all · min.insync=2 · unclean=off · idempotence=on · in-flight=5 · "
                        "RF=3 · partitions=2 · fault=leader-kill · Kafka=3.9.0 |")  # fmt: skip
    assert "### a|b: " in text


def test_a_cell_without_a_guarantee_has_no_guarantee_line() -> None:
    unknown = {**result("odd", {**CP, "fault_class": "leader-nonsense"}, 0)}
    (cell,) = judge_all([unknown], {})
    assert cell.guarantee is None
    text = render_markdown([cell], (), "T")
    section = text[text.index("### odd: ") : text.index("## Provenance")]
    config = CP_CONFIG.replace("leader-kill", "leader-nonsense")
    reasons = "".join(f"- {reason}\n" for reason in cell.reasons)
    assert section == f"### odd: {cell.verdict.value}\n\n_{config}_\n\n{reasons}\n"


def test_a_provenance_text_with_a_newline_or_a_pipe_stays_in_its_table_row() -> None:
    """A command-line argument holding a newline or a pipe keeps the provenance table whole:
    the newline reads as a space, the pipe is escaped."""
    from harness.rundir.provenance import ExperimentProvenance
    from tests.unit.report_runs import PROVENANCE

    command = ("kafka-chaos", "run", "--set", "a=1\nb=2|3")
    recorded = PROVENANCE.model_copy(update={"command_line": command})
    run = ExperimentProvenance("runs/x", recorded)
    text = render_markdown([], provenance_views([run]), "T")
    assert "| command line | kafka-chaos run --set 'a=1 b=2\\|3' |\n" in text
