"""Bad input gets a clear message, a non-zero exit, and starts nothing."""

from __future__ import annotations

import socket

import pytest

from harness.experiment.load import load_experiment
from harness.experiment.matrix import expand
from harness.platform.cluster import KafkaCluster
from harness.platform.topology import ClusterError
from harness.run.repetition import select_cells, select_shard
from harness.settings import REPO_ROOT
from kafka_chaos.cli import main


def test_invalid_experiment_names_the_field_and_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nproducer: {acks: 2}\n")
    assert main(["run", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "producer.acks" in err


def test_unknown_setting_is_rejected_by_name(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nworkload: {rate: 10, duration_s: 5, speed: 3}\n")
    assert main(["validate", str(bad)]) == 2
    assert "speed" in capsys.readouterr().err


def test_missing_experiment_file(tmp_path, capsys):
    assert main(["validate", str(tmp_path / "nope.yaml")]) == 2
    assert "nope.yaml" in capsys.readouterr().err


def test_validate_lists_the_cells(capsys):
    assert main(["validate", str(REPO_ROOT / "experiments" / "default.yaml")]) == 0
    assert "config=cp__fault=leader-partition" in capsys.readouterr().out


def test_report_without_runs_exits_2(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nothing-here")]) == 2
    assert "no run directory" in capsys.readouterr().err


def test_bad_shard_is_an_argument_error():
    with pytest.raises(SystemExit) as exc:
        main(["run", "experiments/default.yaml", "--shard", "3/2"])
    assert exc.value.code == 2


def test_shards_partition_the_cells():
    cells = expand(load_experiment(REPO_ROOT / "experiments" / "default.yaml"))
    shards = [select_shard(cells, (i, 4)) for i in range(1, 5)]
    names = [c.name for shard in shards for c in shard]
    assert sorted(names) == sorted(c.name for c in cells)
    assert all(shards)


def test_cells_select_by_glob_in_file_order_and_a_glob_matching_none_names_the_cells():
    cells = expand(load_experiment(REPO_ROOT / "experiments" / "disk-faults.yaml"))
    chosen = select_cells(cells, ["*all-lose-unsynced", "fsync=every-message__*torn*"])
    assert [c.name for c in chosen] == [
        "fsync=default__fault=all-lose-unsynced",
        "fsync=every-message__fault=all-lose-unsynced",
        "fsync=every-message__fault=all-torn-write",
    ]
    assert select_cells(cells, None) == cells
    with pytest.raises(ValueError, match="'nope' matches no cell; the cells are: fsync=default"):
        select_cells(cells, ["*lose*", "nope"])


def test_a_cells_glob_matching_none_exits_2_before_any_cluster(capsys):
    assert main(["run", "experiments/quick.yaml", "--cells", "no-such-cell"]) == 2
    assert "matches no cell" in capsys.readouterr().err


def test_port_in_use_is_named_before_anything_starts():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        cluster = KafkaCluster(image="unused", host_ports=[port, port + 1, port + 2])
        with pytest.raises(ClusterError, match=f"{port}.*already in use"):
            cluster.start()
    assert cluster.nodes == [] and cluster.network_name == ""


def test_unexpected_error_is_one_line_naming_the_log_and_exits_2(monkeypatch, tmp_path, capsys):
    import kafka_chaos.cli as cli

    def broken(args, settings):
        raise RuntimeError("the disk [sic] is haunted\nsecond line")

    monkeypatch.setattr(cli.COMMANDS["validate"], "run", broken)
    monkeypatch.setattr(cli.SESSION, "log_path", tmp_path / "harness.log")
    assert main(["validate", "x.yaml"]) == 2
    err = capsys.readouterr().err
    assert "error: RuntimeError: the disk [sic] is haunted" in err
    assert "second line" not in err and "Traceback" not in err
    assert str(tmp_path / "harness.log") in err
    assert "Traceback" in (tmp_path / "harness.log").read_text()


def test_debug_prints_the_traceback(monkeypatch, tmp_path, capsys):
    import kafka_chaos.cli as cli

    def broken(args, settings):
        raise RuntimeError("boom")

    monkeypatch.setattr(cli.COMMANDS["validate"], "run", broken)
    monkeypatch.setattr(cli.SESSION, "log_path", tmp_path / "harness.log")
    assert main(["--debug", "validate", "x.yaml"]) == 2
    assert "Traceback" in capsys.readouterr().err


def test_report_without_java_says_so_before_anything_starts(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no java anywhere
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "needs Java" in err and "openjdk-17" in err


def test_run_without_java_fails_before_the_engine_is_touched(monkeypatch, tmp_path, capsys):
    import harness.platform.engine as engine

    def no_engine():
        raise AssertionError("the engine was touched")

    monkeypatch.setattr(engine, "ensure_engine", no_engine)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))  # no bin/java in it
    assert main(["run", str(REPO_ROOT / "experiments" / "quick.yaml")]) == 2
    assert "has no bin/java" in capsys.readouterr().err


def test_latest_points_at_the_newest_run(tmp_path):
    from harness.run.repetition import point_latest_at

    older, newer = tmp_path / "exp" / "20260101T000000Z", tmp_path / "exp" / "20260102T000000Z"
    for root in (older, newer):
        root.mkdir(parents=True)
        point_latest_at(root)
    latest = tmp_path / "exp" / "latest"
    assert latest.is_symlink() and latest.resolve() == newer.resolve()
    assert [p.name for p in (tmp_path / "exp").iterdir() if p.name.startswith(".")] == []


def test_plan_lists_every_repetition_of_every_shard_with_its_seed(tmp_path):
    from harness.run.repetition import select_shard, write_plan
    from harness.rundir.plan import ExperimentPlan

    experiment = load_experiment(REPO_ROOT / "experiments" / "quick.yaml")
    cells = expand(experiment)
    write_plan(tmp_path, experiment, cells, (2, 3))
    plan = ExperimentPlan.read(tmp_path)
    assert plan is not None and plan.experiment == experiment.name and plan.shard == (2, 3)
    assert len(plan.runs) == len(cells) * experiment.repetitions
    first = plan.runs[0]
    assert first.repetition == 0 and first.seed == experiment.seed
    assert first.axes == cells[0].axes
    for shard in (1, 2, 3):  # each shard's planned cells are those `run --shard i/3` runs
        planned = {run.cell for run in plan.runs if run.shard == shard}
        assert planned == {cell.name for cell in select_shard(cells, (shard, 3))}


def test_an_interrupt_stops_the_processes_the_harness_started():
    # In a process of its own: here it would stop the test session's Spark JVM too.
    import subprocess
    import sys

    script = (
        "import signal, subprocess, sys\n"
        "from kafka_chaos.cli import _stop_own_children\n"
        "child = subprocess.Popen(['sleep', '60'])\n"
        "_stop_own_children()\n"
        "sys.exit(0 if child.wait(10) == -signal.SIGTERM else 1)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], timeout=60, check=False)
    assert done.returncode == 0
