"""The Spark standalone cluster's start-up wait (analysis/spark/spark_cluster.py), without
Spark: the master's state and the daemons are scripted."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from analysis.spark import spark_cluster
from analysis.spark.spark_cluster import ClusterError, StandaloneCluster, _Daemon


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StandaloneCluster:
    monkeypatch.setattr("harness.waiting.time.sleep", lambda s: None)
    cluster = StandaloneCluster(work_dir=tmp_path)
    log = tmp_path / "master.log"
    log.write_text("... bound to port\n")
    process = SimpleNamespace(poll=lambda: None, returncode=None)
    cluster._daemons.append(_Daemon("master", process, log))
    return cluster


def test_it_returns_once_the_master_is_ready(cluster, monkeypatch) -> None:
    states = iter([None, None, {"workers": []}])
    monkeypatch.setattr(cluster, "_master_state", lambda: next(states))
    cluster._wait_for(lambda state: state is not None, "the master to answer")
    assert next(states, "drained") == "drained"


def test_a_daemon_that_exits_ends_the_wait_with_its_log(cluster, monkeypatch) -> None:
    monkeypatch.setattr(cluster, "_master_state", lambda: None)
    cluster._daemons[0].process = SimpleNamespace(poll=lambda: 1, returncode=1)
    with pytest.raises(ClusterError, match=r"Spark master exited with 1 .*\n... bound to port"):
        cluster._wait_for(lambda state: state is not None, "the master to answer")


def test_the_timeout_names_what_it_waited_for_and_every_log(cluster, monkeypatch) -> None:
    monkeypatch.setattr(cluster, "_master_state", lambda: None)
    monkeypatch.setattr(spark_cluster, "START_TIMEOUT_S", 0.0)
    with pytest.raises(ClusterError) as caught:
        cluster._wait_for(lambda state: state is not None, "2 workers")
    assert str(caught.value) == (
        "timed out after 0 s waiting for 2 workers\n--- master\n... bound to port\n"
    )
