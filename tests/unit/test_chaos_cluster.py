"""KafkaChaosCluster's builders and its refusals, before any container (no Docker)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_chaos.testing import ChaosUsageError, KafkaChaosCluster


def test_builders_set_the_options_the_cluster_starts_with() -> None:
    cluster = (
        KafkaChaosCluster()
        .with_release("3.9.1")
        .with_mode("zookeeper")
        .with_brokers(5)
        .with_broker_config(unclean_leader_election_enable=True)
    )
    options = cluster.options
    assert (options.version, options.mode, options.brokers) == ("3.9.1", "zookeeper", 5)
    assert options.broker_config == (("unclean.leader.election.enable", True),)


def test_what_needs_a_running_cluster_says_so() -> None:
    cluster = KafkaChaosCluster("4.3.1")
    with pytest.raises(ChaosUsageError, match="not running"):
        cluster.bootstrap_servers()
    with pytest.raises(ChaosUsageError, match="not running"):
        cluster.run(Path("unused"))


def test_a_fault_outside_a_run_names_the_fix() -> None:
    with pytest.raises(ChaosUsageError, match=r"open one with run\(root\)"):
        KafkaChaosCluster().kill("leader")
