"""The kafka-chaos pytest plugin: test your own producer code on a real Kafka cluster under
the harness's faults, and judge it with the harness's checker.

Installed with the package (entry point `pytest11: kafka_chaos`); docs/pytest-plugin.md
has a complete example. Loading it imports no Kafka client, Docker or Spark: the fixtures do,
when a test uses them.

Fixtures:
- `kafka_chaos` (function): a `kafka_chaos.testing.Chaos`, the test's run on a fresh topic
  of the session's cluster: `.journal(config)` records the test's own producer,
  `.inject(fault, target, partition=0, params=None, duration_s=None)` injects a fault of
  the registry and returns a `FaultHandle`, `.judge()` heals, reads back and returns a
  `ChaosVerdict`. Its run directory lies under the test's `tmp_path` (`kafka-chaos/`).
- `kafka_chaos_cluster` (function): the session's running `KafkaCluster` for the test's
  options, for tests that want the cluster alone.
- `kafka_chaos_options` (function): the `ChaosOptions` in force for the test.
- `kafka_chaos_clusters` (session): the session's clusters and Spark session; every
  cluster is removed at the end of the session, after a failure or Ctrl-C too.

Options, each from the closest `@pytest.mark.kafka_chaos(...)` keyword, else the command
line, else the ini file, else the experiment's default: version, image, mode, brokers on the
command line (`--kafka-chaos-version 3.9.1`, ini `kafka_chaos_version = 3.9.1`); the marker
also takes zookeeper_nodes, broker_config, partitions, replication_factor,
min_insync_replicas, unclean_leader_election, topic_config, seed and final_heal_timeout_s.
Session settings: `--kafka-chaos-spark-master` (ini kafka_chaos_spark_master; default
KCHAOS_SPARK_MASTER, else local[*]) and `--kafka-chaos-remove-leftovers` (ini
kafka_chaos_remove_leftovers = true: first remove what dead processes' clusters left).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from kafka_chaos.testing.errors import ChaosError, ChaosUsageError
from kafka_chaos.testing.options import (
    CLI_OPTIONS,
    MARKER,
    ChaosOptions,
    experiment_name,
    flag_of,
    ini_of,
    resolve_options,
)

if TYPE_CHECKING:
    from harness.platform.cluster import KafkaCluster
    from kafka_chaos.testing.chaos import Chaos
    from kafka_chaos.testing.clusters import ClusterPool
    from kafka_chaos.testing.verdict import Judge

__all__ = [
    "ChaosSession",
    "kafka_chaos",
    "kafka_chaos_cluster",
    "kafka_chaos_clusters",
    "kafka_chaos_options",
]

log = logging.getLogger("kafka_chaos.pytest")
SPARK_MASTER = "spark_master"
REMOVE_LEFTOVERS = "remove_leftovers"
RUN_KEY = pytest.StashKey["Chaos"]()
SESSION_KEY = pytest.StashKey["ChaosSession"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """The --kafka-chaos-* options and their ini twins."""
    group = parser.getgroup("kafka-chaos", "kafka-chaos: your producer under Kafka faults")
    master = "Spark master of the judgement (default: KCHAOS_SPARK_MASTER, else local[*])"
    for option, text in {**CLI_OPTIONS, SPARK_MASTER: master}.items():
        group.addoption(flag_of(option), dest=ini_of(option), default=None, help=text)
        parser.addini(ini_of(option), text, default=None)
    sweep = "first remove the containers of clusters whose process is gone (kafka-chaos clean)"
    group.addoption(
        flag_of(REMOVE_LEFTOVERS),
        dest=ini_of(REMOVE_LEFTOVERS),
        action="store_true",
        default=None,
        help=sweep,
    )
    parser.addini(ini_of(REMOVE_LEFTOVERS), sweep, type="bool", default=False)


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker."""
    config.addinivalue_line(
        "markers",
        f"{MARKER}(version=..., mode=..., brokers=..., partitions=..., ...): the cluster and "
        "topic of the test's kafka_chaos run (see docs/pytest-plugin.md)",
    )


def _setting(config: pytest.Config, option: str) -> Any:
    """An option's value: the command line's, else the ini file's (None: not given)."""
    given = config.getoption(ini_of(option))
    if given is not None:
        return given
    value = config.getini(ini_of(option))
    return None if value in (None, "") else value


class ChaosSession:
    """What the session shares: its clusters (`pool`) and its judge (Spark)."""

    def __init__(self, config: pytest.Config):
        from harness.settings import load_settings
        from kafka_chaos.testing.clusters import ClusterPool
        from kafka_chaos.testing.verdict import Judge

        master = _setting(config, SPARK_MASTER) or load_settings().spark_master
        self.pool: ClusterPool = ClusterPool(
            remove_leftovers_first=bool(_setting(config, REMOVE_LEFTOVERS)),
            log_line=log.info,
        )
        self.judge: Judge = Judge(master)

    def close(self) -> None:
        """Remove every cluster, stop Spark (idempotent)."""
        try:
            self.pool.close()
        finally:
            self.judge.close()


@pytest.fixture(scope="session")
def kafka_chaos_clusters(pytestconfig: pytest.Config) -> Iterator[ChaosSession]:
    """The session's clusters (started on first use, one running at a time) and its Spark
    session; all removed and stopped when the session ends, after a failure or Ctrl-C too."""
    session = ChaosSession(pytestconfig)
    pytestconfig.stash[SESSION_KEY] = session
    try:
        yield session
    finally:
        session.close()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """A second net: clusters are removed even if the fixture's teardown never ran. Last:
    after pytest's own teardown of the fixtures (an interrupted session's), which heals."""
    chaos_session = session.config.stash.get(SESSION_KEY, None)
    if chaos_session is not None:
        chaos_session.close()


@pytest.fixture
def kafka_chaos_options(request: pytest.FixtureRequest) -> ChaosOptions:
    """The options in force for this test: its `kafka_chaos` markers (the closest wins), then
    the command line, then the ini file."""
    config = request.config
    command_line = {option: _setting(config, option) for option in CLI_OPTIONS}
    markers = [(mark.args, mark.kwargs) for mark in request.node.iter_markers(MARKER)]
    try:
        return resolve_options(command_line, markers)
    except ChaosUsageError as exc:
        pytest.fail(str(exc), pytrace=False)


def _live_cluster(session: ChaosSession, options: ChaosOptions, name: str) -> Any:
    """The pool's cluster for these options; a clean failure naming the problem if none."""
    from harness.experiment.problems import SpecError
    from kafka_chaos.testing.chaos import experiment_of, options_error

    try:
        return session.pool.cluster_for(experiment_of(options, name))
    except SpecError as exc:
        pytest.fail(str(options_error(exc)), pytrace=False)
    except ChaosError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture
def kafka_chaos_cluster(
    request: pytest.FixtureRequest,
    kafka_chaos_clusters: ChaosSession,
    kafka_chaos_options: ChaosOptions,
) -> KafkaCluster:
    """The session's running cluster for this test's options (started on first use)."""
    name = experiment_name(request.node.name)
    return _live_cluster(kafka_chaos_clusters, kafka_chaos_options, name).cluster


@pytest.fixture
def kafka_chaos(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    kafka_chaos_clusters: ChaosSession,
    kafka_chaos_options: ChaosOptions,
) -> Iterator[Chaos]:
    """This test's run on a fresh topic of the session's cluster; at its end every fault is
    healed and the topic deleted (a cluster left damaged is replaced for the next test)."""
    from kafka_chaos.testing.chaos import Chaos

    name = experiment_name(request.node.name)
    live = _live_cluster(kafka_chaos_clusters, kafka_chaos_options, name)
    try:
        chaos = Chaos(
            live, kafka_chaos_options, name, tmp_path / "kafka-chaos", kafka_chaos_clusters.judge
        )
    except ChaosError as exc:
        pytest.fail(str(exc), pytrace=False)
    request.node.stash[RUN_KEY] = chaos
    try:
        yield chaos
    finally:
        if not chaos.close():
            log.warning("a node did not come back after the test's heal: replacing the cluster")
            kafka_chaos_clusters.pool.discard(live)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A failed test's report names its run directory and judgement."""
    report = yield
    chaos = item.stash.get(RUN_KEY, None)
    if chaos is not None and report.failed and report.when == "call":
        lines = [f"run directory: {chaos.run_dir}"]
        verdict = chaos.verdict
        if verdict is not None:
            lines.append(str(verdict))
        report.sections.append(("kafka-chaos", "\n".join(lines)))
    return report
