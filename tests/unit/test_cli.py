"""Bad input gets a clear message, a non-zero exit, and starts nothing."""

from __future__ import annotations

import socket

import pytest

from harness.experiment.load import load_experiment
from harness.experiment.matrix import expand
from harness.platform.cluster import ClusterError, KafkaCluster
from harness.run.runner import select_shard
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


def test_port_in_use_is_named_before_anything_starts():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        cluster = KafkaCluster(image="unused", host_ports=[port, port + 1, port + 2])
        with pytest.raises(ClusterError, match=f"{port}.*already in use"):
            cluster.start()
    assert cluster.nodes == [] and cluster.network_name == ""
