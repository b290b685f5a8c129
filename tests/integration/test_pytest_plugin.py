"""The pytest plugin end to end: a user's test file, run by pytest in a subprocess (the plugin
loaded through its entry point), starts a real cluster, journals its own producer through a
leader kill, is judged, and leaves no container behind (also when interrupted)."""

from __future__ import annotations

import json
import re
from importlib.metadata import entry_points
from pathlib import Path

import docker
import pyarrow.parquet as pq
import pytest

from harness.platform.engine import ensure_engine
from harness.platform.image import ensure_image
from harness.rundir import layout
from harness.settings import load_settings

pytest_plugins = ["pytester"]

# A user's test file: the plugin's public API only.
USER_TESTS = """
import os
import time

import pytest
from confluent_kafka import Producer

from kafka_chaos.testing import ChaosUsageError

pytestmark = pytest.mark.kafka_chaos(version="4.3.1", mode="kraft", brokers=3)
SENDS = 400


def test_acks_all_keeps_every_message_through_a_leader_kill(kafka_chaos):
    print(f"PID {os.getpid()}")
    config = {"bootstrap.servers": kafka_chaos.bootstrap_servers, "acks": "all", "linger.ms": 5}
    journal = kafka_chaos.journal(config)
    producer = Producer(config)
    killed = None
    for sent in range(SENDS):
        if sent == SENDS // 3:
            killed = kafka_chaos.inject("kill", target="leader", partition=0)
        message = journal.message()
        producer.produce(
            kafka_chaos.topic, message.value, message.key, on_delivery=journal.on_delivery
        )
        producer.poll(0)
        time.sleep(0.01)
    assert killed is not None and not killed.healed and len(killed.nodes) == 1
    killed.heal()
    assert producer.flush(60) == 0
    verdict = kafka_chaos.judge()
    print(verdict)
    assert verdict.ok, verdict.reasons
    assert verdict.verdict == "PASS"
    assert verdict.loss == 0
    assert verdict.acked == SENDS
    assert verdict.report is not None and verdict.report.is_file()


def test_a_fault_on_an_unknown_target_is_refused(kafka_chaos):
    with pytest.raises(ChaosUsageError, match="unknown target 'the-leader'; use leader, "):
        kafka_chaos.inject("kill", target="the-leader")
    with pytest.raises(ChaosUsageError, match="'node:7' does not exist: kafka.brokers is 3"):
        kafka_chaos.inject("pause", target="node:7")
"""

# A failing test, then one interrupted (Ctrl-C) while a broker is paused.
INTERRUPTED_TEST = """
import os


def test_failing_after_a_fault(kafka_chaos):
    kafka_chaos.inject("pause", target="follower")
    assert False, "the user's assertion"


def test_interrupted_while_a_broker_is_paused(kafka_chaos):
    print(f"PID {os.getpid()}")
    kafka_chaos.inject("pause", target="leader")
    raise KeyboardInterrupt
"""


@pytest.fixture(scope="module")
def broker_image() -> str:
    """The 4.3.1 broker image the user's tests ask for (found locally, built if missing)."""
    ensure_engine()
    return ensure_image("4.3.1", log=print).tag


@pytest.mark.integration
def test_the_plugin_is_installed_as_a_pytest11_entry_point() -> None:
    plugins = {entry.name: entry.value for entry in entry_points(group="pytest11")}
    assert plugins.get("kafka_chaos") == "kafka_chaos.pytest_plugin", (
        "reinstall the package (pip install -e .) so that pytest finds the plugin"
    )


def _pid(output: str) -> str:
    """The pid the user's test printed: the label of the containers its session created."""
    found = re.search(r"PID (\d+)", output)
    assert found, output[-3000:]
    return found.group(1)


def _run_files(pytester: pytest.Pytester, test: str, name: str) -> set[Path]:
    """A file of the run directories of the tests matching `test` (pytester's basetemp has
    a `-current` link to itself: each file once)."""
    return {path.resolve() for path in pytester.path.glob(f"**/{test}/kafka-chaos/base/0/{name}")}


def _containers_of(pid: str) -> list[str]:
    """The names of containers (any state) a process's clusters left."""
    label = f"{load_settings().label}.pid={pid}"
    return [c.name for c in docker.from_env().containers.list(all=True, filters={"label": label})]


@pytest.mark.integration
def test_a_users_producer_is_judged_through_a_leader_kill(
    pytester: pytest.Pytester, broker_image: str
) -> None:
    pytester.makepyfile(test_users_producer=USER_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s", "-v", timeout=600)
    output = result.stdout.str()
    result.assert_outcomes(passed=2)
    assert "PASS (the documented guarantee held): loss 0 of 400 acked" in output
    assert _containers_of(_pid(output)) == []
    # The run directory is the harness's: the checker's results and the schedule it judged.
    (spec_path,) = _run_files(pytester, "test_acks_all*", layout.SPEC)
    run_dir = spec_path.parent
    spec = json.loads(spec_path.read_text())
    assert spec["config"]["fault_class"] == "leader-kill"
    assert spec["config"]["acks"] == "all"
    assert [step["fault"] for step in spec["schedule"]] == ["kill"]
    assert spec["topic"]["name"].startswith("chaos-")
    assert pq.read_table(run_dir / layout.ACKED).num_rows == 400
    results = json.loads((run_dir / layout.RESULTS).read_text())
    assert results["sensitivity"]["passed"] is True


@pytest.mark.chaos
def test_a_failed_or_interrupted_test_is_healed_and_its_cluster_removed(
    pytester: pytest.Pytester, broker_image: str
) -> None:
    pytester.makepyfile(test_interrupted=INTERRUPTED_TEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s", timeout=600)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    assert _containers_of(_pid(output)) == []
    # The failed test's report names its run directory.
    result.stdout.fnmatch_lines(["*- kafka-chaos -*", "run directory: */kafka-chaos/base/0"])
    (failed_events,) = _run_files(pytester, "test_failing_after*", layout.EVENTS)
    assert '"type": "fault_end"' in failed_events.read_text()
    (events,) = _run_files(pytester, "test_interrupted*", layout.EVENTS)
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    healed = [e for e in lines if e["type"] == "fault_end"]
    assert len(healed) == 1, lines
    spec = json.loads((events.parent / layout.SPEC).read_text())
    assert "ended before judge()" in spec["harness_error"]
