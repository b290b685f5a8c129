"""The judgement of a test's run: the same analysis `kafka-chaos report` runs (reconcile in
Spark, judge against the documented guarantees, write the report), as one small value.

`Judge` holds one local Spark session for the whole test session (started at the first
judgement, stopped at the end), so each judgement after the first costs seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analysis.judge.outcomes import VERDICT_MEANING, Verdict

if TYPE_CHECKING:
    from analysis.pipeline import Analysis

__all__ = ["ChaosVerdict", "Judge", "Verdict"]


@dataclass(frozen=True)
class ChaosVerdict:
    """What the checker concluded about one test's run.

    `verdict` is the harness's (PASS, VIOLATION, EXPECTED-LOSS, KNOWN-BUG, NOT-PROVOKED,
    UNKNOWN; `meaning` says what it means); `ok` is True when `kafka-chaos report` would exit
    0 for it: no documented guarantee broken and the run trustworthy (PASS, EXPECTED-LOSS,
    NOT-PROVOKED, and KNOWN-BUG unless judged with fail_on_known_bug). `loss` counts the
    acknowledged messages missing from the final read-back (None when the run could not be
    counted), `acked` the acknowledged sends; `reasons` are the checker's sentences.
    """

    verdict: Verdict
    ok: bool
    loss: int | None
    acked: int | None
    reasons: tuple[str, ...]
    run_dir: Path
    report: Path | None = None  # report.html of the run (None when it was not written)

    @property
    def meaning(self) -> str:
        """What the verdict means, in the words of every report."""
        return VERDICT_MEANING[self.verdict]

    def __str__(self) -> str:
        loss = "?" if self.loss is None else self.loss
        acked = "?" if self.acked is None else self.acked
        lines = [f"{self.verdict} ({self.meaning}): loss {loss} of {acked} acked"]
        lines += [f"  {reason}" for reason in self.reasons]
        lines.append(f"  run directory: {self.run_dir}")
        if self.report is not None:
            lines.append(f"  report: {self.report}")
        return "\n".join(lines)


class Judge:
    """Judges run directories with the analysis pipeline on a Spark session it keeps."""

    def __init__(self, master: str):
        self.master = master
        self._spark: Any = None

    def verdict(
        self, run_dir: Path, report_dir: Path, title: str, *, fail_on_known_bug: bool = False
    ) -> ChaosVerdict:
        """Reconcile and judge the run at `run_dir` and write its report to `report_dir`; an
        analysis that fails is an UNKNOWN verdict naming the error (a checker that crashes
        knows nothing: it does not fail the test's code)."""
        from analysis.judge.verdicts import DEFAULT_FAIL_ON

        known_bug = frozenset({Verdict.KNOWN_BUG}) if fail_on_known_bug else frozenset()
        try:
            analysis = self._analyse(run_dir, report_dir, title, DEFAULT_FAIL_ON | known_bug)
        except Exception as exc:
            return ChaosVerdict(
                Verdict.UNKNOWN,
                False,
                None,
                None,
                (f"the analysis failed: {type(exc).__name__}: {exc}",),
                run_dir,
            )
        if len(analysis.cells) != 1 or len(analysis.cells[0].repetitions) != 1:
            found = sum(len(cell.repetitions) for cell in analysis.cells)
            reason = f"the analysis found {found} runs under {run_dir}, not the test's one"
            return ChaosVerdict(Verdict.UNKNOWN, False, None, None, (reason,), run_dir)
        cell = analysis.cells[0]
        repetition = cell.repetitions[0]
        # One repetition: its own reasons, all of them; a cell's PASS or NOT-PROVOKED is
        # decided over its repetitions, and the cell's sentence cites the guarantee.
        reasons = repetition.reasons
        if cell.verdict in (Verdict.PASS, Verdict.NOT_PROVOKED):
            reasons = (*cell.reasons, *reasons)
        return ChaosVerdict(
            verdict=cell.verdict,
            ok=analysis.exit_code == 0,
            loss=repetition.loss,
            acked=repetition.acked,
            reasons=tuple(dict.fromkeys(reasons)),
            run_dir=run_dir,
            report=analysis.html if analysis.html in analysis.written else None,
        )

    def _analyse(
        self, run_dir: Path, report_dir: Path, title: str, fail_on: frozenset[Verdict]
    ) -> Analysis:
        from analysis.pipeline import analyse
        from analysis.spark.reconcile import spark_session

        if self._spark is None:
            self._spark = spark_session(self.master, app_name="kafka-chaos-pytest")
        return analyse([str(run_dir)], report_dir, master=self.master, title=title, fail_on=fail_on)

    def close(self) -> None:
        """Stop the Spark session (when one was started)."""
        if self._spark is not None:
            spark, self._spark = self._spark, None
            spark.stop()
