"""The workload's clients other than the in-process librdkafka recorder: a program (the Java
recorder built on demand, or any command speaking the verifiable-client protocol) run as the
producer, read line by line into the run's journal.

`client_program` turns a cell's `workload.client` into the program to run; `CommandProducer`
(command.py) runs it as the runner's `Producing`.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import confluent_kafka

from harness.experiment.clients import (
    ClientSpec,
    family_producer_settings,
    java_producer_settings,
)
from harness.experiment.fields import Scalar
from harness.experiment.model import ProducerSpec
from harness.rundir.config import setting_text
from harness.rundir.events import ClientConfig, EventLog
from harness.workload.java_client import tools_classpath
from harness.workload.journal import SOLE, ProducerSlot
from harness.workload.producer.command import ClientProgram, CommandProducer
from harness.workload.producer.fleet import Fleet, shares
from harness.workload.producer.protocol import ValueFormat, decode_with
from harness.workload.producer.recorder import Workload
from harness.workload.programs import producer_program
from harness.workload.readback import Decoder
from harness.workload.values import decode_value

__all__ = [
    "client_program",
    "client_senders",
    "librdkafka_config",
    "properties_text",
    "value_decoder",
]
# librdkafka's defaults (CONFIGURATION.md) for the durability settings the producer section
# may leave to it; the recorder is always given the others.
_LIBRDKAFKA_DEFAULTS = {"retries": "2147483647"}

PRODUCER_PROPERTIES = "producer.properties"  # the client's producer settings, in the run dir
# The names the command's placeholders get for a command client (the producer settings use
# Java's names, as kafkatest's --producer.config files do).
_NAMING_VERSION = "4.3.1"


def properties_text(settings: dict[str, Scalar]) -> str:
    """A Java properties file of `settings` (booleans in lower case, as Kafka parses them)."""
    return "\n".join(f"{key}={setting_text(value)}" for key, value in settings.items()) + "\n"


def _bounded(value: float | None) -> str:
    """A number for a client argument; -1 (the verifiable clients' 'no limit') for None."""
    if value is None:
        return "-1"
    return str(int(value)) if float(value).is_integer() else str(value)


def client_program(
    client: ClientSpec,
    producer: ProducerSpec,
    workload: Workload,
    bootstrap: str,
    topic: str,
    run_dir: Path,
    expected: tuple[str, bool] | None = None,
    slot: ProducerSlot = SOLE,
    overrides: dict[str, Scalar] | None = None,
) -> ClientProgram:
    """The program that sends `workload` for `client` (java or command), its producer settings
    (then `overrides`) written to run_dir/producer.properties; builds the Java recorder if not
    cached. `expected` is the (acks, idempotence) the cell is judged by, checked against what
    the client says."""
    if client.kind == "java" and client.version:
        settings = java_producer_settings(producer, client.version)
    elif client.runs_program:
        settings = family_producer_settings(producer)
    else:
        settings = java_producer_settings(producer, _NAMING_VERSION)
    settings = {**settings, **(overrides or {})}
    config_file = run_dir / PRODUCER_PROPERTIES
    config_file.write_text(properties_text(settings))
    count = workload.count
    if count is None and workload.rate and workload.duration_s:
        count = int(workload.rate * workload.duration_s)
    if client.runs_program:
        argv = [
            *producer_program(client).argv,
            "--bootstrap-server", bootstrap,
            "--topic", topic,
            "--producer.config", str(config_file),
            "--message-bytes", str(workload.message_bytes),
            "--keys", str(workload.keys),
            "--max-messages", _bounded(workload.count),
            "--duration-s", _bounded(workload.duration_s),
            "--throughput", _bounded(workload.rate),
            "--id-base", str(slot.id_base),
            "--key-prefix", slot.key_prefix,
        ]  # fmt: skip
        return ClientProgram(
            argv, ValueFormat.KAFKA_CHAOS, client.label, stops_itself=True, expected=expected
        )
    values = {
        "bootstrap": bootstrap,
        "topic": topic,
        "count": _bounded(count),
        "rate": _bounded(workload.rate),
        "duration_s": _bounded(workload.duration_s),
        "keys": str(workload.keys),
        "message_bytes": str(workload.message_bytes),
        "producer_config": str(config_file),
    }
    fmt = ValueFormat(client.values)
    argv = client.fill(values, lambda name, version: tools_classpath(version))
    return ClientProgram(argv, fmt, client.label, expected=expected)


def value_decoder(client: ClientSpec, keys: int) -> Decoder:
    """How the read-back reads the message id from a record `client` wrote."""
    if (
        client.kind == "command"
        and not client.runs_program
        and client.values == ValueFormat.VERIFIABLE
    ):
        return partial(decode_with, ValueFormat.VERIFIABLE, keys=keys)
    return decode_value


def librdkafka_config(settings: dict[str, Scalar], idempotent: bool) -> ClientConfig:
    """The client_config event of the librdkafka recorder: the settings it was given, and
    librdkafka's defaults for the durability settings it was not."""
    given = {
        key: properties_text({key: value}).strip().split("=", 1)[1]
        for key, value in settings.items()
    }
    return ClientConfig(
        client=f"librdkafka {confluent_kafka.libversion()[0]}",
        config={**_LIBRDKAFKA_DEFAULTS, **given},
        idempotent=idempotent,
    )


def client_senders(
    client: ClientSpec,
    producer: ProducerSpec,
    workload: Workload,
    producers: int,
    endpoint: tuple[str, str],
    run_dir: Path,
    events: EventLog,
    expected: tuple[str, bool] | None = None,
) -> CommandProducer | Fleet:
    """The runner's `Producing` for a program client: one CommandProducer, or a Fleet of
    `producers`, each with its slot and share of `workload` (the total). `endpoint` is
    (bootstrap, topic)."""
    bootstrap, topic = endpoint
    members = []
    for slot, share in shares(workload, producers):
        program = client_program(client, producer, share, bootstrap, topic, run_dir, expected, slot)
        members.append(CommandProducer(program, share, run_dir, slot))
    return members[0] if producers == 1 else Fleet(members, events)
