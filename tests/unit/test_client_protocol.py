"""The verifiable-client protocol as the harness reads it (harness/workload/producer/protocol.py,
errors.py): any text parses to a Line without raising, send lines round-trip, each client's
output format journals to the same acked rows."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.rundir import layout
from harness.rundir.events import EventLog
from harness.workload.producer.command import ClientProgram, CommandProducer
from harness.workload.producer.protocol import (
    EffectiveConfig,
    OtherLine,
    SendError,
    SendSuccess,
    ValueFormat,
    Violation,
    decode_with,
    parse_line,
)
from harness.workload.producer.recorder import Workload
from harness.workload.producer.send_errors import status_of_error
from tests.unit.finalized import finalized

pytestmark = pytest.mark.property


@given(st.text(max_size=300))
def test_any_text_parses_to_a_line_without_raising(text: str):
    line = parse_line(text)
    assert line is not None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
)


@given(st.dictionaries(st.text(max_size=12), json_values, max_size=6))
def test_any_json_object_is_typed_other_or_a_violation_with_a_reason(data: dict):
    line = parse_line(json.dumps(data))
    if isinstance(line, Violation):
        assert line.reason
    if not isinstance(data.get("name"), str):
        assert isinstance(line, Violation) and line.reason == "no `name` field"


@given(
    value=st.text(max_size=40) | st.none(),
    partition=st.integers(0, 2**31),
    offset=st.integers(0, 2**62),
    latency=st.none() | st.integers(0, 10**9),
)
def test_a_success_round_trips(value, partition, offset, latency):
    line = {"name": "producer_send_success", "value": value, "partition": partition,
            "offset": offset, "topic": "t", "key": None}  # fmt: skip
    if latency is not None:
        line["latency_us"] = latency
    parsed = parse_line(json.dumps(line))
    assert parsed == SendSuccess(
        None if value is None else value.encode(), partition, offset, latency
    )


@given(st.sampled_from(["partition", "offset", "value"]))
def test_a_success_without_a_field_is_a_violation_naming_it(missing: str):
    line = {"name": "producer_send_success", "value": "1", "partition": 0, "offset": 3}
    del line[missing]
    parsed = parse_line(json.dumps(line))
    assert isinstance(parsed, Violation) and missing in parsed.reason


def test_a_java_acks_0_success_has_no_offset():
    line = '{"name":"producer_send_success","value":"7","partition":1,"offset":-1}'
    assert parse_line(line) == SendSuccess(b"7", 1, None)


@given(st.integers(0, 10**15), st.integers(1, 1000), st.text("abc.", max_size=5) | st.none())
def test_verifiable_values_decode_to_their_counter(counter: int, keys: int, prefix):
    value = (f"{prefix}.{counter}" if prefix is not None else str(counter)).encode()
    assert decode_with(ValueFormat.VERIFIABLE, value, keys) == (counter, counter // keys)


@given(st.binary(max_size=20))
def test_any_value_decodes_or_names_no_message(value: bytes):
    for fmt in ValueFormat:
        msg_id, key_seq = decode_with(fmt, value, 4)
        assert (msg_id is None) == (key_seq is None)


def test_errors_name_the_java_class_or_the_librdkafka_code():
    java = parse_line(json.dumps({
        "name": "producer_send_error", "value": "1", "topic": "t",
        "exception": "org.apache.kafka.common.errors.TimeoutException", "message": "expired",
    }))  # fmt: skip
    assert isinstance(java, SendError)
    assert java.error == "org.apache.kafka.common.errors.TimeoutException"
    librdkafka = parse_line(json.dumps({
        "name": "producer_send_error", "value": "1", "topic": "t",
        "message": 'KafkaError{code=_MSG_TIMED_OUT,val=-192,str="Local: Message timed out"}',
    }))  # fmt: skip
    assert isinstance(librdkafka, SendError) and librdkafka.error == "_MSG_TIMED_OUT"


@pytest.mark.parametrize(
    ("name", "status"),
    [
        ("org.apache.kafka.common.errors.TimeoutException", "indeterminate"),
        ("org.apache.kafka.common.errors.NetworkException", "indeterminate"),
        ("org.apache.kafka.common.errors.NotEnoughReplicasAfterAppendException", "indeterminate"),
        ("org.apache.kafka.common.errors.NotEnoughReplicasException", "failed"),
        ("org.apache.kafka.common.errors.RecordTooLargeException", "failed"),
        ("_MSG_TIMED_OUT", "indeterminate"),
        ("NOT_ENOUGH_REPLICAS", "failed"),
        ("an error nobody has seen", "indeterminate"),  # unknown: never a guessed failure
    ],
)
def test_error_status(name: str, status: str):
    assert status_of_error(name) == status


def test_effective_config_and_other_lines():
    line = parse_line('{"name":"effective_config","config":{"acks":"-1"},"idempotent":true}')
    assert line == EffectiveConfig({"acks": "-1"}, True)
    assert parse_line('{"name":"records_consumed","count":3}') == OtherLine("records_consumed")


# One send of each outcome in each client's own output format: the harness's Java recorder
# (as it printed them), Kafka's VerifiableProducer (timestamp, key and value as strings) and
# kafkatest's Python producer (_time; librdkafka's error text).
RECORDED = {
    "java-recorder": (
        ValueFormat.KAFKA_CHAOS,
        [
            '{"name":"startup_complete"}',
            '{"name":"producer_send_success","topic":"t","value":"000000000000000:000000000000:",'
            '"latency_us":1200,"partition":2,"offset":0}',
            '{"name":"producer_send_error","topic":"t","value":"000000000000001:000000000000:",'
            '"latency_us":30000000,"exception":"org.apache.kafka.common.errors.TimeoutException",'
            '"message":"Expiring 1 record(s)"}',
            '{"name":"progress","sent":2}',
            '{"name":"shutdown_complete"}',
        ],
    ),
    "kafka-verifiable-producer": (
        ValueFormat.VERIFIABLE,
        [
            '{"timestamp":1,"name":"startup_complete"}',
            '{"timestamp":2,"name":"producer_send_success","key":"0","value":"0","topic":"t",'
            '"partition":2,"offset":0}',
            '{"timestamp":3,"name":"producer_send_error","key":"1","value":"1","topic":"t",'
            '"exception":"org.apache.kafka.common.errors.TimeoutException","message":"Expiring"}',
            '{"timestamp":4,"name":"shutdown_complete"}',
            '{"timestamp":5,"name":"tool_data","sent":2,"acked":1,"target_throughput":-1}',
        ],
    ),
    "kafkatest-python-producer": (
        ValueFormat.VERIFIABLE,
        [
            '{"name":"producer_send_success","topic":"t","partition":2,"offset":0,"key":"0",'
            '"value":"0","_time":"2026-11-25"}',
            '{"name":"producer_send_error","message":"KafkaError{code=_MSG_TIMED_OUT,val=-192}",'
            '"topic":"t","key":"1","value":"1","_time":"2026-11-25"}',
            '{"name":"shutdown_complete","_qlen":0,"_time":"2026-11-25"}',
        ],
    ),
}


@pytest.mark.parametrize("client", sorted(RECORDED))
def test_every_clients_output_journals_to_the_same_rows(client: str, tmp_path: Path):
    fmt, lines = RECORDED[client]
    script = tmp_path / "client.py"
    script.write_text(f"import sys\nsys.stdout.write({chr(10).join(lines) + chr(10)!r})\n")
    program = ClientProgram(["python3", str(script)], fmt, client, stops_itself=True)
    producer = CommandProducer(program, Workload(None, None, 2, 100, 16), tmp_path)
    producer.run(threading.Event())
    assert producer.close(EventLog(tmp_path / layout.EVENTS)) is None
    table = finalized(tmp_path).select(["msg_id", "status", "partition", "offset"])
    assert table.to_pylist() == [
        {"msg_id": 0, "status": "ok", "partition": 2, "offset": 0},
        {"msg_id": 1, "status": "indeterminate", "partition": None, "offset": None},
    ]
    assert pq.read_table(tmp_path / layout.ACKED).num_rows == 2
