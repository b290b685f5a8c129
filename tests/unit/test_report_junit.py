"""The JUnit XML written out whole: each outcome's element, the message cut to one line's
length, the loss line, the totals; the verdicts come from the judge, the rest is spelled here."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from analysis.judge.outcomes import CellVerdict, RepetitionVerdict, Verdict
from analysis.report import junit
from analysis.report.junit import write_junit
from tests.unit.report_runs import (
    AP,
    CP,
    _raising,
    events_with_fault_and_leader_change,
    healthy_events,
    judge_all,
    result,
    us,
)


def _rep(cell: CellVerdict, **changes: object) -> CellVerdict:
    (rep,) = cell.repetitions
    return replace(cell, repetitions=(replace(rep, **changes),))


def _three_cells() -> tuple[list[CellVerdict], dict[str, object]]:
    """EXPECTED-LOSS (two repetitions, one lossy), UNKNOWN (a run error) and NOT-PROVOKED, and
    their events."""
    results = [
        result("ap", AP, 0),
        result("ap", AP, 1, lost=3),
        {**result("cp-unknown", CP, 0), "status": "error", "error": "no <cluster>", "counts": None},
        result("quiet", AP, 0),
    ]
    events: dict[str, object] = {
        r["run_dir"]: events_with_fault_and_leader_change() for r in results[:2]
    }
    events[results[3]["run_dir"]] = healthy_events()
    return judge_all(results, events), events


def test_the_junit_file_spells_every_outcome(tmp_path: Path) -> None:
    (ap, unknown, quiet), events = _three_cells()
    assert [ap.verdict, unknown.verdict, quiet.verdict] == [
        Verdict.EXPECTED_LOSS,
        Verdict.UNKNOWN,
        Verdict.NOT_PROVOKED,
    ]
    pass_reason, lost_reason = ap.repetitions[0].reasons[0], ap.repetitions[1].reasons[0]
    (quiet_reason,) = quiet.repetitions[0].reasons
    path = write_junit([ap, unknown, quiet], events, tmp_path / "deep" / "er" / "junit.xml")
    assert path == tmp_path / "deep" / "er" / "junit.xml"
    assert path.read_text("utf-8") == (
        "<?xml version='1.0' encoding='utf-8'?>\n"
        '<testsuites name="kafka-chaos" tests="4" failures="0" errors="1" skipped="1" '
        'time="61.000">\n'
        '  <testsuite name="kafka-chaos" tests="4" failures="0" errors="1" skipped="1" '
        'time="61.000">\n'
        '    <testcase classname="chaos.ap" name="rep-0" time="30.000">\n'
        "      <system-out>verdict: PASS\n"
        "loss: 0 of 1900 acked (0 %)\n"
        f"{pass_reason}</system-out>\n"
        "    </testcase>\n"
        '    <testcase classname="chaos.ap" name="rep-1" time="30.000">\n'
        "      <system-out>verdict: EXPECTED-LOSS\n"
        "loss: 3 of 1900 acked (0.158 %)\n"
        f"{lost_reason}</system-out>\n"
        "    </testcase>\n"
        '    <testcase classname="chaos.cp-unknown" name="rep-0" time="0.000">\n'
        '      <error message="run error: no &lt;cluster&gt;" type="UNKNOWN">'
        "run error: no &lt;cluster&gt;</error>\n"
        "      <system-out>verdict: UNKNOWN\n"
        "run error: no &lt;cluster&gt;</system-out>\n"
        "    </testcase>\n"
        '    <testcase classname="chaos.quiet" name="rep-0" time="1.000">\n'
        '      <skipped message="NOT-PROVOKED: loss is allowed but never happened: the faults '
        'were too weak" />\n'
        "      <system-out>verdict: NOT-PROVOKED\n"
        "loss: 0 of 1900 acked (0 %)\n"
        f"{quiet_reason}</system-out>\n"
        "    </testcase>\n"
        "  </testsuite>\n"
        "</testsuites>"
    )


def test_a_failure_carries_its_first_reason_cut_to_500_characters(tmp_path: Path) -> None:
    cp = result("cp", CP, 0, offset_divergent=1)
    (cell,) = judge_all([cp], {cp["run_dir"]: events_with_fault_and_leader_change()})
    assert cell.verdict == Verdict.VIOLATION

    def failure(reasons: tuple[str, ...], **changes: object) -> tuple[str, str, str]:
        judged = _rep(cell, reasons=reasons, **changes)
        text = write_junit([judged], {}, tmp_path / "j.xml").read_text("utf-8")
        case = text[text.index("<testcase") : text.index("</testcase>")]
        return case, text[: text.index("<testsuite ")], text

    case, _, _ = failure(("x" * 500, "second & last"))
    assert f'<failure message="{"x" * 500}" type="VIOLATION">' in case
    assert f"{'x' * 500}\nsecond &amp; last</failure>" in case
    assert "<system-out>verdict: VIOLATION\n" in case
    case, head, _ = failure(("y" * 501,))
    assert f'<failure message="{"y" * 499}…" type="VIOLATION">' in case
    assert 'failures="1" errors="0" skipped="0"' in head
    case, _, _ = failure((), loss=None, acked=1900)
    assert '<failure message="VIOLATION" type="VIOLATION" />' in case
    assert "<system-out>verdict: VIOLATION\n</system-out>" in case  # no loss line, no reasons
    case, _, _ = failure(("r",), loss=2, acked=0)
    assert "<system-out>verdict: VIOLATION\nr</system-out>" in case  # nothing acked: no rate
    case, _, _ = failure(("r",), loss=1, acked=3)
    assert "<system-out>verdict: VIOLATION\nloss: 1 of 3 acked (33.3 %)\nr</system-out>" in case


def test_a_case_lasts_its_events_span_to_the_millisecond(tmp_path: Path) -> None:
    (cell,) = judge_all([result("cp", CP, 0)], {})
    run_dir = cell.repetitions[0].run_dir
    events = {run_dir: [{"type": "phase", "ts_us": us(1)}, {"type": "phase", "ts_us": us(3.0016)}]}
    text = write_junit([cell], events, tmp_path / "j.xml").read_text("utf-8")
    assert 'name="rep-0" time="2.002"' in text
    assert text.count('time="2.002"') == 3  # the case, the suite and the suites


def test_a_rep_that_passed_in_a_cell_that_did_not_pass_has_no_outcome_element(
    tmp_path: Path,
) -> None:
    (cell,) = judge_all([result("ap", AP, 0), result("ap", AP, 1, lost=1)], {})
    reps = tuple(replace(rep, verdict=Verdict.PASS) for rep in cell.repetitions)
    passed = replace(cell, verdict=Verdict.EXPECTED_LOSS, repetitions=reps)
    text = write_junit([passed], {}, tmp_path / "j.xml").read_text("utf-8")
    assert "<skipped" not in text and "<failure" not in text and "<error" not in text
    assert 'tests="2" failures="0" errors="0" skipped="0" time="0.000"' in text
    unknown_rep = RepetitionVerdict(Verdict.UNKNOWN, ("why",), None, "r", 4)
    odd = replace(cell, repetitions=(unknown_rep,))
    text = write_junit([odd], {}, tmp_path / "j.xml").read_text("utf-8")
    assert '<testcase classname="chaos.ap" name="rep-4" time="0.000">' in text
    assert '<error message="why" type="UNKNOWN">why</error>' in text
    assert 'tests="1" failures="0" errors="1" skipped="0"' in text


def test_an_hour_long_case_lasts_an_hour_to_the_millisecond(tmp_path: Path) -> None:
    (cell,) = judge_all([result("cp", CP, 0)], {})
    run_dir = cell.repetitions[0].run_dir
    events = {run_dir: [{"type": "phase", "ts_us": us(0)}, {"type": "phase", "ts_us": us(3600)}]}
    text = write_junit([cell], events, tmp_path / "j.xml").read_text("utf-8")
    assert text.count('time="3600.000"') == 3  # the case, the suite and the suites


def test_a_case_that_cannot_be_built_is_an_error_naming_it_and_the_rest_stand(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = _raising("bad rep " + "z" * 600, only="runs/chaos/ts/cp/1", at=1)
    broken.real = junit._testcase
    monkeypatch.setattr(junit, "_testcase", broken)
    results = [result("cp", CP, 0), result("cp", CP, 1)]
    events = {r["run_dir"]: events_with_fault_and_leader_change() for r in results}
    (cell,) = judge_all(results, events)
    text = write_junit([cell], events, tmp_path / "j.xml").read_text("utf-8")
    why = f"the test case of cp rep-1 failed: RuntimeError: bad rep {'z' * 600}"
    why += " (the rest of the report stands)"
    head = '<testsuites name="kafka-chaos" tests="2" failures="0" errors="1" skipped="0" '
    assert text.startswith(f"<?xml version='1.0' encoding='utf-8'?>\n{head}time=\"30.000\">")
    assert text.count('time="30.000"') == 3  # the built case, the suite, the suites: 0 s more
    assert (
        '    <testcase classname="chaos.cp" name="rep-1" time="0.000">\n'
        f'      <error message="{why[:500]}" type="report">{why}</error>\n'
        "    </testcase>\n"
    ) in text
    assert '<testcase classname="chaos.cp" name="rep-0" time="30.000">' in text


def _totals(text: str) -> tuple[int, int, int]:
    """(failures, errors, skipped) of a JUnit file's one suite."""
    import xml.etree.ElementTree as ET

    suite = ET.fromstring(text).find("testsuite")
    assert suite is not None
    return tuple(int(suite.attrib[k]) for k in ("failures", "errors", "skipped"))  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("gate", "totals"),
    [
        (frozenset({Verdict.VIOLATION, Verdict.UNKNOWN}), (0, 1, 1)),
        (frozenset({Verdict.VIOLATION, Verdict.UNKNOWN, Verdict.NOT_PROVOKED}), (1, 1, 0)),
        (frozenset({Verdict.EXPECTED_LOSS}), (1, 0, 1)),
        (frozenset({Verdict.VIOLATION}), (0, 0, 1)),
    ],
)
def test_the_verdicts_named_in_fail_on_fail_the_junit_as_the_exit_code(
    tmp_path: Path, gate: frozenset[Verdict], totals: tuple[int, int, int]
) -> None:
    """--fail-on decides the JUnit's failures as it decides the exit code: a NOT-PROVOKED cell
    named there fails, an UNKNOWN not named there is no error."""
    from analysis.judge.verdicts import exit_code

    cells, events = _three_cells()
    text = write_junit(cells, events, tmp_path / "j.xml", gate).read_text("utf-8")
    assert _totals(text) == totals
    failed = totals[0] + totals[1] > 0
    assert failed == (exit_code(cells, fail_on=gate) != 0)
