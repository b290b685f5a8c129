"""The cross-run summary (Wilson intervals, groups, deciding settings) and the results dataset."""

from __future__ import annotations

import json
from dataclasses import replace
from decimal import Decimal, localcontext
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from analysis.crossrun.dataset import write_dataset
from analysis.crossrun.summary import CONFIDENCE_Z, cross_run_summary, wilson_interval
from analysis.judge.verdicts import judge_all
from analysis.model.anomalies import COUNT_NAMES
from analysis.model.results import RunResult, RunStatus
from analysis.report.render import render_report
from analysis.report.summary_view import summary_view
from harness.rundir.config import CellConfig


@pytest.mark.parametrize(
    ("lossy", "n", "low", "high"),
    [(0, 10, 0.0, 0.2775), (5, 10, 0.2366, 0.7634), (10, 10, 0.7225, 1.0), (1, 3, 0.0615, 0.7923)],
)
def test_wilson_interval_matches_the_formula(lossy: int, n: int, low: float, high: float) -> None:
    interval = wilson_interval(lossy, n)
    # The published four-digit values, and a 40-digit evaluation of the formula to 1e-15.
    assert (round(interval.low, 4), round(interval.high, 4)) == (low, high)
    exact_low, exact_high = _wilson_in_decimal(lossy, n)
    assert abs(Decimal(interval.low) - exact_low) < Decimal("1e-15")
    assert abs(Decimal(interval.high) - exact_high) < Decimal("1e-15")
    # The ends are exact where the formula's are: matplotlib refuses a bar 1e-16 inside out.
    assert (interval.low == 0.0) == (lossy == 0)
    assert (interval.high == 1.0) == (lossy == n)
    assert interval.low <= lossy / n <= interval.high


def _wilson_in_decimal(k: int, n: int) -> tuple[Decimal, Decimal]:
    """The Wilson interval of k of n evaluated with 40 significant digits."""
    with localcontext() as context:
        context.prec = 40
        z, p, trials = Decimal(str(CONFIDENCE_Z)), Decimal(k) / Decimal(n), Decimal(n)
        z2 = z * z
        centre = (p + z2 / (2 * trials)) / (1 + z2 / trials)
        half = z * (p * (1 - p) / trials + z2 / (4 * trials * trials)).sqrt() / (1 + z2 / trials)
        return max(Decimal(0), centre - half), min(Decimal(1), centre + half)


def test_a_count_outside_the_trials_is_refused() -> None:
    with pytest.raises(ValueError, match="0 <= successes <= trials"):
        wilson_interval(5, 4)


def test_no_repetition_says_nothing() -> None:
    assert wilson_interval(0, 0) == wilson_interval(0, 0).__class__(0.0, 1.0)


def test_a_group_with_nothing_counted_has_no_probability_and_shows_no_interval(
    tmp_path: Path,
) -> None:
    errored = replace(
        result(tmp_path, "a", "1", "4.3.1", 0, 0), status=RunStatus.ERROR, counts=None, loss=None
    )
    (group,) = cross_run_summary([errored]).groups
    assert (group.repetitions, group.counted, group.lossy) == (1, 0, 0)
    assert group.loss_probability is None
    assert (group.interval.low, group.interval.high) == (0.0, 1.0)
    (row,) = summary_view(cross_run_summary([errored])).rows
    assert (row.repetitions, row.probability, row.interval) == ("0/1", "-", "-")


def test_malformed_counts_are_not_counted_and_do_not_raise(tmp_path: Path) -> None:
    good = result(tmp_path, "a", "1", "4.3.1", 0, loss=3)
    text = replace(result(tmp_path, "a", "1", "4.3.1", 1, 0), loss="3")  # type: ignore[arg-type]
    more_than_acked = result(tmp_path, "a", "1", "4.3.1", 2, loss=2000)
    flag = replace(result(tmp_path, "a", "1", "4.3.1", 3, 0), loss=True)
    (group,) = cross_run_summary([good, text, more_than_acked, flag]).groups
    assert (group.repetitions, group.counted, group.lossy) == (4, 1, 1)
    assert group.loss_rate is not None and group.loss_rate.max == 3 / 1000


def result(
    tmp: Path, experiment: str, acks: str, version: str, rep: int, loss: int, acked: int = 1000
) -> RunResult:
    """A complete repetition of acks=<acks> under leader-kill that lost `loss` of `acked`."""
    run_dir = tmp / experiment / f"acks{acks}-{version}" / str(rep)
    run_dir.mkdir(parents=True)
    (run_dir / "spec.json").write_text(json.dumps({"started_at_us": 0, "ended_at_us": 2_500_000}))
    counts = {**dict.fromkeys(COUNT_NAMES, 0), "sent": acked, "acked": acked, "lost": loss}
    config = CellConfig.read(
        {
            "acks": acks,
            "min_insync_replicas": 1,
            "fault_class": "leader-kill",
            "kafka_version": version,
        }
    )
    return RunResult(
        run_dir=str(run_dir),
        experiment=experiment,
        cell=f"acks{acks}",
        repetition=rep,
        config=config,
        axes={"acks": acks},
        status=RunStatus.COMPLETE,
        counts=counts,
        loss=loss,
    )


@pytest.fixture
def results(tmp_path: Path) -> list[RunResult]:
    """acks=1 loses in every repetition, acks=all in none, 6 repetitions each, two experiments
    and two Kafka versions."""
    rows = []
    for version in ("4.3.1", "3.9.1"):
        for rep in range(6):
            experiment = "a" if rep < 3 else "b"
            rows.append(result(tmp_path, experiment, "1", version, rep, loss=10 + rep))
            rows.append(result(tmp_path, experiment, "all", version, rep, loss=0))
    return rows


def test_groups_by_configuration_fault_and_version_across_experiments(results) -> None:
    summary = cross_run_summary(results)
    assert len(summary.groups) == 4
    lossy = next(
        g
        for g in summary.groups
        if dict(g.configuration)["acks"] == "1" and g.kafka_version == "4.3.1"
    )
    assert (lossy.repetitions, lossy.lossy, lossy.loss_probability) == (6, 6, 1.0)
    assert lossy.experiments == ("a", "b")
    assert lossy.loss_rate.min == pytest.approx(0.010) and lossy.loss_rate.max == pytest.approx(
        0.015
    )
    assert round(lossy.interval.low, 4) == 0.6097 and lossy.interval.high == 1.0


def test_the_setting_that_changes_the_outcome_is_named(results) -> None:
    summary = cross_run_summary(results)
    assert summary.decisive_settings == ("acks",)
    assert {(e.kafka_version, e.values) for e in summary.effects} == {
        ("3.9.1", ("1", "all")),
        ("4.3.1", ("1", "all")),
    }


def test_overlapping_intervals_decide_nothing(tmp_path: Path) -> None:
    few = [result(tmp_path, "a", "1", "4.3.1", 0, 5), result(tmp_path, "a", "all", "4.3.1", 0, 0)]
    assert cross_run_summary(few).effects == ()


def test_dataset_has_one_row_per_repetition_partitioned(results, tmp_path: Path) -> None:
    cells = judge_all(results, {})
    root = write_dataset(results, cells, tmp_path / "report")
    assert sorted(p.name for p in root.iterdir()) == ["experiment=a", "experiment=b"]
    assert (root / "experiment=a" / "kafka_version=3.9.1").is_dir()
    table = ds.dataset(root, format="parquet", partitioning="hive").to_table()
    assert table.num_rows == len(results)
    row = next(
        r
        for r in table.to_pylist()
        if r["cell"] == "acks1" and r["repetition"] == 4 and r["kafka_version"] == "4.3.1"
    )
    assert (row["experiment"], row["acks"], row["fault"], row["lost"], row["loss"]) == (
        "b",
        "1",
        "leader-kill",
        14,
        14,
    )
    assert row["loss_rate"] == pytest.approx(0.014)
    assert row["duration_s"] == 2.5
    assert row["verdict"] is not None


def test_the_summary_is_in_report_json_and_html(results, tmp_path: Path) -> None:
    cells = judge_all(results, {})
    summary = cross_run_summary(results, cells)
    paths = render_report(cells, results, {}, [], tmp_path / "out", "t", summary)
    document = json.loads(paths.json.read_text())
    assert document["schema_version"] == 3
    assert document["summary"]["decisive_settings"] == ["acks"]
    assert len(document["summary"]["groups"]) == 4
    html = paths.html.read_text()
    assert "Across runs" in html and "6/6 = 100 %" in html and "acks 1 → all" in html
    assert "loss probability by configuration" in html


def test_a_kept_and_a_rewound_transactional_reader_are_groups_of_their_own(
    tmp_path: Path,
) -> None:
    """Settings beyond durability (here the reader's rewind) split groups, the effect between
    them is found, and a label leaves out what the runs did not record."""
    runs = []
    for rewinds, loss in ((True, 0), (False, 40)):
        for rep in range(5):
            run = result(tmp_path, f"r{rewinds}", "all", "4.3.1", rep, loss=loss)
            config = run.config.model_copy(update={"txn_reader_rewinds": rewinds})
            runs.append(replace(run, config=config))
    summary = cross_run_summary(runs)
    labels = sorted(g.label for g in summary.groups)
    assert labels == [
        "acks=all min_insync_replicas=1 txn_reader_rewinds=false",
        "acks=all min_insync_replicas=1 txn_reader_rewinds=true",
    ]
    (effect,) = summary.effects
    assert effect.setting == "txn_reader_rewinds"
    assert summary.decisive_settings == ("txn_reader_rewinds",)
