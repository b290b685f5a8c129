"""The report of the crafted cells is, byte for byte, the one kept in tests/unit/golden/.

The other report tests say what a reader must find; this one says that nothing else moved: a
colour, a line width, a label's place, a row's order. A deliberate change to the report
regenerates the kept copy, and the diff of that copy is the review of the change:

    UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/test_report_golden.py

The rendering is deterministic (SVG ids salted per repetition, the time from SOURCE_DATE_EPOCH,
no paths), and the
versions that draw it are pinned in constraints.txt.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis.report.render import ReportPaths, render_report
from tests.unit.report_runs import (
    AP,
    CP,
    RUNS,
    events_with_fault_and_leader_change,
    judge_all,
    priced,
    result,
    timeline,
)
from tests.unit.results_json import typed

GOLDEN = Path(__file__).parent / "golden"


@pytest.fixture(autouse=True)
def made_at_a_fixed_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The page says when it was made: at 2023-11-14 22:13 UTC, here."""
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")


def first_difference(kept: str, drawn: str) -> str | None:
    """Where `drawn` first differs from `kept`, by line, in a message short enough to print
    (pytest's own diff of two 200 kB strings takes seconds); None when they are equal."""
    if kept == drawn:
        return None
    kept_lines, drawn_lines = kept.splitlines(), drawn.splitlines()
    for number, (old, new) in enumerate(zip(kept_lines, drawn_lines, strict=False), start=1):
        if old != new:
            return f"line {number}: kept {old[:300]!r}, drawn {new[:300]!r}"
    return f"kept {len(kept_lines)} lines, drawn {len(drawn_lines)} (or line ends differ)"


def group_timeline() -> list[dict[str, Any]]:
    """The crafted timeline with a consumer group that read, was refused commits, lagged, got
    stuck and reset, and with acked messages later missing or duplicated."""
    seconds = timeline()
    for second in seconds:
        t = second["t_s"]
        second |= {"processed": 90 + t, "group_lag": 10 * t if t else None}
        second |= {"commits_failed": int(t == 9), "stuck": int(10 <= t <= 12)}
        second |= {"reset": 25 if t == 13 else 0, "missing": 3 if t == 8 else 0}
        second |= {"duplicated": 2 if t == 10 else 0}
    return seconds


@pytest.fixture
def rendered_rich(tmp_path: Path) -> ReportPaths:
    """A report whose repetitions have a price of safety, a consumer group on the timeline,
    latency of a thousand-fold spread, and three cells, one of which lost and duplicated."""
    group = result("ap-group", AP, 0, lost=3, duplicated=2) | {"timeline": group_timeline()}
    wide = timeline()
    wide[5]["ack_latency_p99_ms"] = 9000.0
    raw = [
        group,
        result("cp-leader-kill", CP, 0) | {"timeline": wide},
        result("cp-leader-kill", CP, 1, unseen=1),
        result("ap-leader-partition", AP, 0, lost=40),
    ]
    events = {r["run_dir"]: events_with_fault_and_leader_change() for r in raw}
    cells = judge_all(raw, events)
    results = [typed(r) for r in raw]
    results[0] = priced(results[0], stall_s=3.0, failed=40, recovery_s=1.5)
    results[1] = priced(results[1], stall_s=0.0, failed=0, recovery_s=None)
    results[2] = replace(results[2], availability_error="no events")
    return render_report(cells, results, events, RUNS, tmp_path / "rich", "Rich report")


FILES = ("report.html", "report.md", "report.json")


def test_the_crafted_report_is_the_kept_one(rendered: ReportPaths) -> None:
    assert_kept(rendered.html.parent, "")


def test_the_rich_report_is_the_kept_one(rendered_rich: ReportPaths) -> None:
    assert_kept(rendered_rich.html.parent, "rich-")


def assert_kept(folder: Path, prefix: str) -> None:
    """Each report file in `folder` is tests/unit/golden/`prefix``name`.golden, or is written
    there (UPDATE_GOLDEN=1); one test per report, so that it renders once."""
    differences = []
    for name in FILES:
        drawn = (folder / name).read_text("utf-8")
        kept = GOLDEN / f"{prefix}{name}.golden"  # a data file, not a page or a program
        if os.environ.get("UPDATE_GOLDEN") == "1":
            GOLDEN.mkdir(exist_ok=True)
            kept.write_text(drawn, "utf-8")
        difference = first_difference(kept.read_text("utf-8"), drawn)
        if difference is not None:
            differences.append(f"{name} differs from tests/unit/golden/{kept.name} at {difference}")
    assert not differences, (
        "; ".join(differences) + "; if the change is meant, regenerate with UPDATE_GOLDEN=1 and "
        "review the diff"
    )


@given(st.lists(st.sampled_from(["a", "b", ""]), max_size=6), st.data())
def test_first_difference_is_the_first_line_that_differs(
    kept: list[str], data: st.DataObject
) -> None:
    drawn = data.draw(st.lists(st.sampled_from(["a", "b", "c"]), max_size=6))
    old, new = "\n".join(kept), "\n".join(drawn)
    found = first_difference(old, new)
    old_lines, new_lines = old.splitlines(), new.splitlines()
    # the oracle: the first index where both have a line and the lines differ
    first = next(
        (i for i, (a, b) in enumerate(zip(old_lines, new_lines, strict=False)) if a != b), None
    )
    if old == new:
        assert found is None
    elif first is not None:
        assert found is not None and found.startswith(f"line {first + 1}: ")
    else:
        assert found == (
            f"kept {len(old_lines)} lines, drawn {len(new_lines)} (or line ends differ)"
        )


def test_first_difference_names_the_line() -> None:
    assert first_difference("a\nb\nc", "a\nb\nc") is None
    assert first_difference("a\nb\nc", "a\nx\nc") == "line 2: kept 'b', drawn 'x'"
    assert first_difference("a\nb", "a\nb\nc") == "kept 2 lines, drawn 3 (or line ends differ)"
