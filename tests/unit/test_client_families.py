"""The client families (harness/experiment/client_families.py): how a file names them, the
roles validation holds them to, the settings their programs get, how a program's broker error
is classified, and `kafka-chaos list clients`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.experiment.client_families import FAMILIES, PROGRAM_FAMILIES, Role
from harness.experiment.clients import family_producer_settings
from harness.experiment.load import parse_experiment
from harness.experiment.matrix import expand
from harness.experiment.model import ProducerSpec
from harness.experiment.plan import client_durability
from harness.experiment.problems import SpecError
from harness.workload.producer.by_client import value_decoder
from harness.workload.producer.protocol import SendError, parse_line
from harness.workload.producer.send_errors import status_of_error
from harness.workload.programs import group_member, producer_program


def test_a_family_without_a_version_runs_its_current_release_and_names_its_cells():
    experiment = parse_experiment({
        "name": "x", "workload": {"duration_s": 5},
        "matrix": {"workload.client": ["franz-go", "sarama:1.60.0", "librdkafka:2.6.1"]},
    })  # fmt: skip
    cells = expand(experiment)
    clients = [cell.spec.workload.client for cell in cells]
    assert [c.label for c in clients] == ["franz-go 1.22.3", "sarama 1.60.0", "librdkafka 2.6.1"]
    assert all(c.runs_program for c in clients)
    assert [c.name for c in cells] == [
        "client=franz-go-1.22.3", "client=sarama-1.60.0", "client=librdkafka-2.6.1",
    ]  # fmt: skip


def test_librdkafka_without_a_version_stays_the_in_process_recorder():
    spec = parse_experiment({"name": "x", "workload": {"client": "librdkafka"}})
    assert not spec.workload.client.runs_program
    assert spec.workload.client.family is None


@pytest.mark.parametrize("name", sorted(PROGRAM_FAMILIES))
def test_every_family_plays_every_role_it_lists(name: str):
    version = PROGRAM_FAMILIES[name].current
    workload = {"client": f"{name}:{version}", "consumers": 2, "transactions": {}}
    producer = {"message_timeout_ms": 10_000}  # librdkafka's bound by the transaction timeout
    spec = parse_experiment({"name": "x", "workload": workload, "producer": producer})
    assert spec.workload.client.family is PROGRAM_FAMILIES[name]
    assert client_durability(spec) == ("all", True)  # transactions: acks=all and idempotence


def test_a_role_the_client_lacks_is_refused_naming_client_role_and_the_fix():
    with pytest.raises(SpecError) as raised:
        parse_experiment({
            "name": "x",
            "workload": {"client": {"kind": "command", "argv": ["x"]}, "transactions": {}},
        })  # fmt: skip
    text = str(raised.value)
    assert "command x does not play the transactions role" in text
    assert "Fix: drop workload.transactions" in text
    assert "or a command with protocol: contract" in text


def test_a_command_speaking_the_contract_plays_every_role_as_its_argv_and_the_role_word():
    client = {"kind": "command", "protocol": "contract", "argv": ["python3", "c.py"]}
    workload = {"client": client, "consumers": 2, "transactions": {}, "producers": 1}
    producer = {"message_timeout_ms": 10_000}
    spec = parse_experiment({"name": "x", "workload": workload, "producer": producer})
    command = spec.workload.client
    assert command.runs_program and command.roles == frozenset(Role)
    assert command.label == "command python3"  # argv[0], unless `name` says otherwise
    assert producer_program(command).argv == ("python3", "c.py", "produce")
    member = group_member(command)
    assert member is not None and member.argv == ("python3", "c.py", "consume")
    # Many producer processes: the contract gives each its --id-base.
    many = parse_experiment({"name": "x", "workload": {"client": client, "producers": 3}})
    assert many.workload.producers == 3


@pytest.mark.parametrize(
    ("client", "problem"),
    [
        ({"argv": ["p", "{topic}"]}, "{topic} in argv: a contract program is given"),
    ],
)
def test_a_contract_command_refuses_placeholders(client: dict, problem: str):
    client = {"kind": "command", "protocol": "contract", **client}
    with pytest.raises(SpecError) as raised:
        parse_experiment({"name": "x", "workload": {"client": client}})
    assert problem in str(raised.value)


def test_a_contract_command_survives_its_spec_json():
    client = {"kind": "command", "protocol": "contract", "argv": ["python3", "c.py"]}
    spec = parse_experiment({"name": "x", "workload": {"client": client, "duration_s": 5}})
    again = parse_experiment(json.loads(spec.model_dump_json()))
    assert again.workload.client == spec.workload.client and again.workload.client.runs_program


def test_only_a_command_takes_a_protocol():
    with pytest.raises(SpecError, match="a franz-go client takes no protocol"):
        parse_experiment({"name": "x", "workload": {"client": {"kind": "franz-go",
                          "protocol": "contract"}}})  # fmt: skip


def test_the_in_process_reads_are_refused_for_a_librdkafka_program():
    with pytest.raises(SpecError, match="reads"):
        parse_experiment({
            "name": "x", "producer": {"message_timeout_ms": 10_000},
            "workload": {"client": "librdkafka:2.6.1", "transactions": {"reads": 2}},
        })  # fmt: skip


def test_a_family_program_gets_every_durability_field_defaults_included():
    settings = family_producer_settings(ProducerSpec.model_validate({"config": {"x.y": 1}}))
    assert settings["acks"] == "all"
    assert settings["enable.idempotence"] is False  # the section's default, said out loud
    assert settings["delivery.timeout.ms"] == 30000  # Java's name for message_timeout_ms
    assert settings["x.y"] == 1
    assert "retries" not in settings  # None: left to the client


# The oracle: the protocol codes of the Java exceptions whose write is known not to be in the log
# (org.apache.kafka.common.protocol.Errors), written out by hand.
REFUSED_BEFORE_APPEND = {
    2: "CORRUPT_MESSAGE", 3: "UNKNOWN_TOPIC_OR_PARTITION", 6: "NOT_LEADER_OR_FOLLOWER",
    10: "MESSAGE_TOO_LARGE", 17: "INVALID_TOPIC_EXCEPTION", 18: "RECORD_LIST_TOO_LARGE",
    19: "NOT_ENOUGH_REPLICAS", 21: "INVALID_REQUIRED_ACKS", 29: "TOPIC_AUTHORIZATION_FAILED",
    31: "CLUSTER_AUTHORIZATION_FAILED", 35: "UNSUPPORTED_VERSION",
    43: "UNSUPPORTED_FOR_MESSAGE_FORMAT", 47: "INVALID_PRODUCER_EPOCH", 87: "INVALID_RECORD",
    90: "PRODUCER_FENCED",
}  # fmt: skip


@given(st.integers(min_value=-200, max_value=200), st.text(max_size=20))
def test_a_program_s_broker_error_is_failed_only_when_refused_before_the_append(code, name):
    line = json.dumps({
        "name": "producer_send_error", "value": "x", "exception": name or "E",
        "message": "m", "error_code": code,
    })  # fmt: skip
    parsed = parse_line(line)
    assert isinstance(parsed, SendError)
    expected = "failed" if code in REFUSED_BEFORE_APPEND else "indeterminate"
    assert status_of_error(parsed.error) == expected


def test_a_send_error_without_a_code_keeps_the_exception_s_name():
    line = '{"name":"producer_send_error","value":"x","exception":"KafkaJSError","message":"m"}'
    parsed = parse_line(line)
    assert isinstance(parsed, SendError) and parsed.error == "KafkaJSError"
    assert status_of_error(parsed.error) == "indeterminate"


def test_list_clients_names_every_family_with_its_roles():
    out = subprocess.run(
        [sys.executable, "-m", "kafka_chaos", "list", "clients", "--json"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    listed = {entry["name"]: entry for entry in json.loads(out)["clients"]}
    assert set(FAMILIES) - {"librdkafka"} <= set(listed)
    assert {"librdkafka", "librdkafka:<version>"} <= set(listed)
    for name in PROGRAM_FAMILIES:
        entry = listed[name if name != "librdkafka" else "librdkafka:<version>"]
        roles = next(d for d in entry["details"] if d.startswith("roles: "))
        assert roles == "roles: " + ", ".join(r.value for r in Role)


@pytest.mark.parametrize(
    ("client", "verifiable"),
    [
        ("librdkafka", False),  # the in-process recorder writes the harness's values
        ("java:4.3.1", False),
        ("franz-go", False),
        ({"kind": "command", "argv": ["p"]}, True),  # the verifiable protocol's default
        ({"kind": "command", "argv": ["p"], "values": "kafka-chaos"}, False),
        ({"kind": "command", "protocol": "contract", "argv": ["p"]}, False),
    ],
)
def test_the_read_back_decodes_values_as_the_client_writes_them(client, verifiable: bool):
    spec = parse_experiment({"name": "x", "workload": {"client": client, "duration_s": 5}})
    decode = value_decoder(spec.workload.client, spec.workload.keys)
    head = b"%015d:%012d:" % (42, 3) + b"." * 20
    assert decode(head) == ((None, None) if verifiable else (42, 3))
    assert decode(b"payload.7") == ((7, 7 // spec.workload.keys) if verifiable else (None, None))
