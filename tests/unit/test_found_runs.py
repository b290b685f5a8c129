"""Finding run directories as CI hands them over: each run counted once however it arrived (a
`latest` symlink, or the folder an artifact upload made of it), and the repetitions a plan
names that no run directory holds (a shard that died) judged UNKNOWN with the reason."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.judge.outcomes import Verdict
from analysis.judge.verdicts import judge_repetition
from analysis.model.results import RunStatus
from analysis.spark.reconcile import find_runs, unrun_results, write_results
from harness.rundir.found import find_run_dirs
from harness.rundir.plan import ExperimentPlan, PlannedRun
from harness.rundir.spec import RunSpec
from tests.unit.reconcile_runs import T0_US, in_order, write_run


def started(run_dir: Path, at_us: int) -> Path:
    """Give the run's spec.json the start time the harness records (its identity's last part)."""
    spec = json.loads((run_dir / "spec.json").read_text())
    (run_dir / "spec.json").write_text(json.dumps({**spec, "started_at_us": at_us}))
    return run_dir


def experiment_dir(root: Path) -> Path:
    """runs/exp, where write_run puts its timestamp folder."""
    return root / "runs" / "exp"


def test_a_latest_copied_as_a_folder_and_as_a_symlink_counts_once(tmp_path, capsys) -> None:
    run_dir = started(write_run(tmp_path, "acks=all", *in_order(3)), T0_US)
    stamp = run_dir.parent.parent  # runs/exp/<timestamp>
    shutil.copytree(stamp, experiment_dir(tmp_path) / "latest")  # what upload-artifact makes
    (experiment_dir(tmp_path) / "latest-link").symlink_to(stamp.name, target_is_directory=True)

    found = find_runs([str(tmp_path / "runs"), str(tmp_path / "runs" / "exp" / "*")])

    assert found == [run_dir.resolve()]  # the timestamp folder's, not the copy's
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "1 run directory is a copy" in notes[0], notes
    assert str(experiment_dir(tmp_path).resolve() / "latest" / "acks=all" / "0") in notes[0]


def test_two_runs_of_one_cell_started_apart_are_two_runs(tmp_path, capsys) -> None:
    first = started(write_run(tmp_path, "a", *in_order(2)), T0_US)
    again = tmp_path / "again"
    second = started(write_run(again, "a", *in_order(2)), T0_US + 1)
    assert find_runs([str(tmp_path)]) == sorted([first.resolve(), second.resolve()])
    assert "note:" not in capsys.readouterr().err


def test_a_spec_without_a_start_time_is_known_by_its_path() -> None:
    assert (
        RunSpec.model_validate({"experiment": "e", "cell": "c", "repetition": 0}).identity is None
    )
    spec = {"experiment": "e", "cell": "c", "repetition": 0, "seed": 7, "started_at_us": 5}
    assert RunSpec.model_validate(spec).identity == ("e", "c", 0, 7, 5)


# Each run: (cell index, start µs); then how many folder copies and symlinks of its root.
RUNS = st.lists(
    st.tuples(st.integers(0, 2), st.integers(0, 3)), min_size=1, max_size=4, unique=True
)


@settings(max_examples=20, deadline=None)
@given(runs=RUNS, copies=st.integers(0, 2), links=st.integers(0, 2))
def test_each_run_counts_once_however_many_copies(tmp_path_factory, runs, copies, links) -> None:
    tmp = tmp_path_factory.mktemp("copies")
    for number, (cell, at_us) in enumerate(runs):
        # each run in an experiment root of its own, like the shards of one CI run
        root = tmp / f"run{number}"
        run_dir = started(write_run(root, f"cell{cell}", *in_order(1)), T0_US + at_us)
        stamp = run_dir.parent.parent
        for copy in range(copies):
            shutil.copytree(stamp, stamp.parent / ("latest" if copy == 0 else f"copy{copy}"))
        for link in range(links):
            (stamp.parent / f"link{link}").symlink_to(stamp.name, target_is_directory=True)
    found = find_run_dirs([str(tmp / "*" / "runs" / "exp" / "*"), str(tmp)])
    # The oracle: a run is its (cell, start); every copy of one is the same run.
    assert len(found.run_dirs) == len({(cell, at_us) for cell, at_us in runs})
    assert len(found.copies) == len(runs) * copies
    assert all("latest" not in kept.parts and "copy" not in str(kept) for kept in found.run_dirs)


def write_plan(root: Path, shard: tuple[int, int] | None, cells: list[tuple[str, int]]) -> None:
    """plan.json of an experiment run root: each (cell, shard that runs it), 1 repetition."""
    runs = [PlannedRun(cell=c, repetition=0, seed=7, axes={"acks": "1"}, shard=s) for c, s in cells]
    root.mkdir(parents=True, exist_ok=True)
    ExperimentPlan(experiment="exp", shard=shard, runs=tuple(runs)).write(root)


def test_the_cells_of_a_shard_that_died_are_unknown_with_the_reason(tmp_path) -> None:
    ran = write_run(tmp_path, "a", *in_order(2))
    write_plan(ran.parent.parent, (1, 2), [("a", 1), ("b", 2), ("c", 1)])
    patterns = [str(tmp_path / "runs")]

    missing = unrun_results(patterns, find_runs(patterns))

    by_cell = {result.cell: result for result in missing}
    assert sorted(by_cell) == ["b", "c"]
    assert by_cell["b"].error == "planned, no run directory: did shard 2/2 fail?"
    assert by_cell["b"].status == RunStatus.ERROR and by_cell["b"].axes == {"acks": "1"}
    assert "shard-2-of-2-not-run" in by_cell["b"].run_dir
    verdict = judge_repetition(by_cell["b"], [])
    assert verdict.verdict == Verdict.UNKNOWN
    assert verdict.reasons == ("run error: planned, no run directory: did shard 2/2 fail?",)
    write_results(missing)  # no folder to write results.json into: nothing written, no error
    assert not Path(by_cell["b"].run_dir).exists()


def test_a_planned_repetition_that_stopped_before_its_workload_says_why(tmp_path) -> None:
    root = tmp_path / "runs" / "exp" / "20260101T000000Z"
    write_plan(root, None, [("a", None)])
    (root / "a" / "0").mkdir(parents=True)
    spec = {"experiment": "exp", "cell": "a", "repetition": 0, "harness_error": "no cluster"}
    (root / "a" / "0" / "spec.json").write_text(json.dumps(spec))
    (result,) = unrun_results([str(tmp_path)], [])
    assert result.error == "planned, its run directory holds no acked.parquet: no cluster"


@pytest.mark.parametrize("shard", [None, (2, 2)])
def test_a_plan_every_repetition_of_which_ran_names_none(tmp_path, shard) -> None:
    ran = write_run(tmp_path, "a", *in_order(2))
    write_plan(ran.parent.parent, shard, [("a", shard and 2)])
    assert unrun_results([str(tmp_path)], find_runs([str(tmp_path)])) == []


def test_an_older_plan_a_list_of_the_roots_own_repetitions_still_reads(tmp_path) -> None:
    root = tmp_path / "runs" / "exp" / "20260101T000000Z"
    root.mkdir(parents=True)
    older = [{"cell": "a", "repetition": 0, "seed": 7, "run_dir": str(root / "a" / "0")}]
    (root / "plan.json").write_text(json.dumps(older))
    (result,) = unrun_results([str(tmp_path)], [])
    assert (result.experiment, result.cell, result.repetition) == ("exp", "a", 0)
    assert result.error == "planned, no run directory: did the run stop before it?"


def test_the_merged_report_names_the_dead_shards_cells(tmp_path, monkeypatch) -> None:
    from analysis import pipeline
    from analysis.spark.reconcile import reconcile_in_process

    ran = write_run(tmp_path, "a", *in_order(20))
    write_plan(ran.parent.parent, (1, 2), [("a", 1), ("b", 2)])
    monkeypatch.setattr(pipeline, "reconcile_runs", lambda dirs, *_: reconcile_in_process(dirs))

    analysis = pipeline.analyse([str(tmp_path / "runs")], tmp_path / "report")

    assert [cell.cell for cell in analysis.cells] == ["a", "b"]
    assert analysis.cells[1].verdict == Verdict.UNKNOWN and analysis.exit_code == 2
    junit = analysis.junit.read_text()
    assert 'classname="exp.b"' in junit and "did shard 2/2 fail?" in junit
    assert "did shard 2/2 fail?" in analysis.markdown.read_text()
