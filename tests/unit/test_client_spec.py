"""workload.client (harness/experiment/clients.py): its forms and refusals, the Java client's
settings and resolved defaults, and a command program's life
(harness/workload/producer/command.py)."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.experiment.clients import ClientSpec, java_durability, java_producer_settings
from harness.experiment.load import parse_experiment
from harness.experiment.matrix import expand
from harness.experiment.model import ProducerSpec
from harness.experiment.problems import SpecError
from harness.rundir import layout
from harness.rundir.events import EventLog
from harness.workload.producer.by_client import properties_text
from harness.workload.producer.command import ClientProgram, CommandProducer
from harness.workload.producer.protocol import ValueFormat
from harness.workload.producer.recorder import Workload


def test_short_forms_and_cell_names():
    experiment = parse_experiment({
        "name": "x", "workload": {"duration_s": 5},
        "matrix": {"workload.client": ["librdkafka", "java:3.8.0"]},
    })  # fmt: skip
    cells = expand(experiment)
    assert [c.name for c in cells] == ["client=librdkafka", "client=java-3.8.0"]
    assert cells[1].spec.workload.client == ClientSpec(kind="java", version="3.8.0")
    assert cells[1].spec.workload.client.label == "java 3.8.0"


@pytest.mark.parametrize(
    ("client", "says"),
    [
        ("java", "needs its version"),
        ("java:three", "not an Apache Kafka release"),
        ({"kind": "command"}, "needs argv"),
        ({"kind": "command", "argv": ["x", "{nope}"]}, "unknown placeholder {nope}"),
        ({"kind": "command", "argv": ["{kafka_tools_classpath:x}"]}, "not an Apache Kafka"),
        ({"kind": "command", "argv": ["{topic:1.0}"]}, "takes no argument"),
        ({"kind": "command", "argv": ["x"], "version": "3.8.0"}, "takes no version"),
        ("librdkafka:two", "not a release number such as 2.16.1"),
        ("franz-go:latest", "not a release number such as 1.22.3"),
        ({"kind": "java", "version": "3.8.0", "argv": ["x"]}, "takes no argv"),
    ],
)
def test_invalid_clients_are_refused_with_the_reason(client, says: str):
    with pytest.raises(SpecError, match=None) as raised:
        parse_experiment({"name": "x", "workload": {"client": client}})
    assert says in str(raised.value)


def test_other_clients_refuse_what_they_cannot_do_yet():
    with pytest.raises(SpecError) as raised:
        parse_experiment({
            "name": "x",
            "workload": {"client": {"kind": "command", "argv": ["x"]}, "transactions": {}},
        })  # fmt: skip
    says = "command x does not play the transactions role that workload.transactions asks for"
    assert says in str(raised.value)
    players = str(raised.value).split("plays it: ")[1].splitlines()[0].split(", ")
    assert players[:3] == ["librdkafka", "java", "franz-go"]
    assert len(players) == len(set(players))  # each named once
    with pytest.raises(SpecError) as raised:
        parse_experiment({
            "name": "x", "workload": {"client": {"kind": "command", "argv": ["x"]}, "producers": 2}
        })  # fmt: skip
    assert "message ids would collide" in str(raised.value)


def test_placeholders_fill_and_tools_versions():
    client = ClientSpec(kind="command", argv=["run", "{topic}", "{kafka_tools_classpath:3.8.0}"])
    assert client.tools_versions() == {"3.8.0"}
    filled = client.fill({"topic": "t"}, lambda name, version: f"<{name} {version}>")
    assert filled == ["run", "t", "<kafka_tools_classpath 3.8.0>"]


def test_java_settings_are_only_what_the_file_set():
    producer = ProducerSpec.model_validate({"acks": "1", "message_timeout_ms": 9000})
    assert java_producer_settings(producer, "3.8.0") == {"acks": "1", "delivery.timeout.ms": 9000}
    # delivery.timeout.ms arrived in 2.1 (KIP-91): older clients do not get it
    assert java_producer_settings(producer, "2.0.1") == {"acks": "1"}
    assert properties_text({"enable.idempotence": True, "acks": "all"}) == (
        "enable.idempotence=true\nacks=all\n"
    )


versions = st.sampled_from(["0.11.0.3", "2.8.2", "3.0.0", "3.1.2", "3.2.0", "3.8.0", "4.1.0"])
settings = st.fixed_dictionaries(
    {},
    optional={
        "acks": st.sampled_from(["0", "1", "all", "-1"]),
        "enable.idempotence": st.booleans(),
        "max.in.flight.requests.per.connection": st.integers(1, 10),
        "retries": st.sampled_from([0, 3, 2147483647]),
    },
)


@given(settings, versions)
def test_java_durability_follows_the_release_defaults(given_settings: dict, version: str):
    acks, idempotent = java_durability(given_settings, version)
    major_minor = tuple(int(p) for p in version.split(".")[:2])
    default_acks = "all" if major_minor >= (3, 0) else "1"
    want_acks = {"-1": "all"}.get(given_settings.get("acks", ""), given_settings.get("acks"))
    assert acks == (want_acks or default_acks)
    if "enable.idempotence" in given_settings:
        assert idempotent is given_settings["enable.idempotence"]
    elif major_minor < (3, 0):
        assert idempotent is False
    else:
        conflict = (
            acks != "all"
            or given_settings.get("max.in.flight.requests.per.connection", 5) > 5
            or given_settings.get("retries") == 0
        )
        assert idempotent is not conflict


def _program(tmp_path: Path, body: str, **options) -> CommandProducer:
    script = tmp_path / "client.py"
    script.write_text(body)
    program = ClientProgram(
        [sys.executable, str(script)], ValueFormat.VERIFIABLE, "test", **options
    )
    return CommandProducer(program, Workload(None, 0.5, None, 100, 4), tmp_path)


def test_a_program_that_exits_with_an_error_says_so_with_its_log(tmp_path: Path):
    producer = _program(tmp_path, "import sys\nsys.stderr.write('boom\\n')\nsys.exit(3)\n")
    producer.run(threading.Event())
    error = producer.close(EventLog(tmp_path / layout.EVENTS))
    assert error is not None and "exited with status 3" in str(error) and "boom" in str(error)


def test_a_program_that_ignores_sigterm_is_killed_and_the_run_is_incomplete(tmp_path: Path):
    body = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(60)\n"
    producer = _program(tmp_path, body, grace_s=0.5, term_s=0.5)
    producer.run(threading.Event())
    assert producer.killed
    error = producer.close(EventLog(tmp_path / layout.EVENTS))
    assert error is not None and "killed" in str(error)


def test_a_program_stopped_at_the_end_of_the_workload_that_reports_shutdown_is_complete(
    tmp_path: Path,
):
    body = (
        "import signal, sys, time\n"
        "def done(*_):\n"
        '    print(\'{"name": "shutdown_complete"}\', flush=True)\n'
        "    sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, done)\n"
        'print(\'{"name":"producer_send_success","value":"0","partition":0,"offset":0}\','
        " flush=True)\n"
        "time.sleep(60)\n"
    )
    producer = _program(tmp_path, body, grace_s=5)
    producer.run(threading.Event())
    assert producer.terminated and not producer.killed
    assert producer.close(EventLog(tmp_path / layout.EVENTS)) is None
    assert producer.stats.ok == 1


def test_a_client_that_ran_another_contract_makes_the_run_incomplete(tmp_path: Path):
    body = (
        'print(\'{"name":"effective_config","config":{"acks":"1"},"idempotent":false}\')\n'
        'print(\'{"name":"shutdown_complete"}\')\n'
    )
    producer = _program(tmp_path, body, expected=("all", True), stops_itself=True)
    producer.run(threading.Event())
    error = producer.close(EventLog(tmp_path / layout.EVENTS))
    assert error is not None and "ran with acks=1, idempotence=False" in str(error)
