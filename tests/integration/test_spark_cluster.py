"""The reconciliation on a real Spark standalone cluster (a master and two workers on
127.0.0.1, started from pyspark's own jars) gives the same results as local mode."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from analysis.spark.reconcile import find_runs
from analysis.spark.spark_cluster import StandaloneCluster, compare_with_local
from tests.unit.reconcile_runs import EVENTS, SCENARIOS, write_run
from tests.unit.test_sensitivity import three_partitions

pytestmark = pytest.mark.chaos


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """Two one-core workers, so both fit on a 2-core machine; stopped even when a test fails."""
    with StandaloneCluster(workers=2, cores=1, memory="1g") as started:
        yield started


def write_runs(root: Path) -> list[Path]:
    """Every anomaly scenario of the unit tests, plus a run big enough for the probe's sample."""
    for (cell, repetition), (acked, readback) in SCENARIOS.items():
        acks = "0" if cell == "acks0" else "1"
        events = EVENTS.get((cell, repetition))
        write_run(root, cell, acked, readback, repetition=repetition, acks=acks, events=events)
    write_run(root, "sampled", *three_partitions(3000))
    return find_runs([str(root)])


def test_cluster_results_equal_local_mode(cluster: StandaloneCluster, tmp_path: Path) -> None:
    run_dirs = write_runs(tmp_path)
    assert len(run_dirs) == len(SCENARIOS) + 1
    report = compare_with_local(run_dirs, cluster)
    assert report.identical, f"differ between local[2] and the cluster: {report.differing}"
    assert cluster.alive_workers() == 2
    # The job really ran on the cluster: the master lists it, finished, with executor cores.
    apps = cluster.master_state()["completedapps"]
    assert any(app["name"] == "kafka-chaos-reconcile" and app["cores"] > 0 for app in apps)


def test_the_daemons_stop_when_the_block_fails(tmp_path: Path) -> None:
    started = StandaloneCluster(workers=1, cores=1, memory="512m", work_dir=tmp_path)
    with pytest.raises(RuntimeError, match="planted"), started:
        pids = started.pids()
        assert len(pids) == 2 and started.alive_workers() == 1
        raise RuntimeError("planted")
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
