"""The verifiable-client protocol as the harness reads it: one JSON object a line on a client's
stdout (Kafka's VerifiableProducer, kafkatest's verifiable_client.py, and the harness's own Java
recorder all speak it; docs/clients.md).

Each line becomes one typed `Line`: a send's outcome (`SendSuccess`, `SendError`), a client
event the harness uses (`StartupComplete`, `EffectiveConfig`, `Progress`, `ShutdownComplete`,
`ToolData`, `TransactionEnd`), an event it ignores (`OtherLine`: any other `name`), or a
`Violation` saying why the line breaks the protocol (not JSON, not an object, no name, a send
without its fields).
Parsing never raises: a client that breaks the protocol gets a verdict with the reason.

Record values are read by a `ValueFormat`: the harness's own (`<msg_id>:<key_seq>:` ...) or
the verifiable clients' (`[<prefix>.]<counter>`), so a message's id is known either way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

from harness.rundir.transactions import Intent, TxnOutcome
from harness.workload.values import VALUE_HEAD_BYTES, decode_value, encode_value

__all__ = [
    "EffectiveConfig",
    "Line",
    "OtherLine",
    "Progress",
    "SendError",
    "SendSuccess",
    "ShutdownComplete",
    "ToolData",
    "TransactionEnd",
    "ValueFormat",
    "Violation",
    "decode_with",
    "parse_line",
]


class ValueFormat(StrEnum):
    """How a client's record values name their message."""

    KAFKA_CHAOS = "kafka-chaos"  # `<msg_id>:<key_seq>:` then padding (values.encode_value)
    VERIFIABLE = "verifiable"  # `<counter>` or `<prefix>.<counter>`: VerifiableProducer's


def decode_with(fmt: ValueFormat, value: bytes | None, keys: int) -> tuple[int | None, int | None]:
    """(msg_id, key_seq) of a record value in format `fmt`; Nones when it names no message.

    A verifiable client's counter is the message id; with `keys` keys assigned round-robin
    (`--repeating-keys`), its key sequence is counter // keys, as the harness's own.
    """
    if fmt is ValueFormat.KAFKA_CHAOS:
        return decode_value(value)
    if not value:
        return None, None
    counter = value.rsplit(b".", 1)[-1]
    if not counter.isdigit() or len(counter) > 18:
        return None, None
    msg_id = int(counter)
    return msg_id, msg_id // keys


@dataclass(frozen=True)
class SendSuccess:
    """producer_send_success: the broker acknowledged the send at (partition, offset)."""

    value: bytes | None
    partition: int
    offset: int | None  # None: the broker returned none (acks=0: the Java client says -1)
    latency_us: int | None = None


@dataclass(frozen=True)
class SendError:
    """producer_send_error: the client reported the send failed; `error` names the error (the
    Java exception's class, or librdkafka's error code name) and `message` says what it said."""

    value: bytes | None
    error: str
    message: str
    latency_us: int | None = None


@dataclass(frozen=True)
class StartupComplete:
    """startup_complete: the client is ready."""


@dataclass(frozen=True)
class EffectiveConfig:
    """effective_config (the harness's extension): the producer's settings with the client's
    defaults resolved, and whether it runs idempotent (None: the client cannot tell)."""

    config: dict[str, str]
    idempotent: bool | None


@dataclass(frozen=True)
class Progress:
    """progress (the harness's extension): how many sends the client has handed over so far."""

    sent: int


@dataclass(frozen=True)
class ToolData:
    """tool_data: VerifiableProducer's closing summary (sends, acks, throughputs)."""

    sent: int | None
    acked: int | None


@dataclass(frozen=True)
class TransactionEnd:
    """transaction_end (the harness's extension): a transaction of the transactional Java
    recorder ended; its `messages` sends from `first_msg_id` on, what the plan meant and what
    it became (the Java client's contract), the errors on the way, its times (epoch us)."""

    transaction: int
    first_msg_id: int
    messages: int
    intent: Intent
    outcome: TxnOutcome
    error: str | None
    begin_ts_us: int
    end_ts_us: int


@dataclass(frozen=True)
class ShutdownComplete:
    """shutdown_complete: the client has reported every send it will report."""


@dataclass(frozen=True)
class OtherLine:
    """A well-formed line of a kind the harness does not use (records_consumed, ...)."""

    name: str


@dataclass(frozen=True)
class Violation:
    """A line that breaks the protocol, and why."""

    reason: str
    line: str


Line = (
    SendSuccess
    | SendError
    | StartupComplete
    | EffectiveConfig
    | Progress
    | ToolData
    | ShutdownComplete
    | TransactionEnd
    | OtherLine
    | Violation
)
_E = TypeVar("_E", Intent, TxnOutcome)
_SHOWN = 200  # characters of a broken line kept as evidence


def parse_line(text: str) -> Line:
    """One stdout line of a client as a typed Line; a Violation (never an exception) when it
    breaks the protocol."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        return Violation(f"not JSON ({exc.args[0] if exc.args else exc})", text[:_SHOWN])
    except RecursionError:
        return Violation("not JSON (nested too deeply)", text[:_SHOWN])
    if not isinstance(data, dict):
        return Violation(f"a JSON {type(data).__name__}, not an object", text[:_SHOWN])
    name = data.get("name")
    if not isinstance(name, str):
        return Violation("no `name` field", text[:_SHOWN])
    try:
        return _typed(name, data)
    except _Missing as missing:
        return Violation(f"{name} without {missing}", text[:_SHOWN])


class _Missing(Exception):
    """A field a line of its kind must have is absent or of the wrong type."""


def _typed(name: str, data: Mapping[str, object]) -> Line:
    match name:
        case "producer_send_success":
            return SendSuccess(
                _value(data),
                _whole(data, "partition"),
                _offset(data),
                _optional_whole(data, "latency_us"),
            )
        case "producer_send_error":
            return SendError(
                _value(data),
                _error_name(data),
                str(data.get("message", "")),
                _optional_whole(data, "latency_us"),
            )
        case "startup_complete":
            return StartupComplete()
        case "effective_config":
            config = data.get("config")
            if not isinstance(config, dict):
                raise _Missing("a `config` object")
            idempotent = data.get("idempotent")
            return EffectiveConfig(
                {str(k): str(v) for k, v in config.items()},
                idempotent if isinstance(idempotent, bool) else None,
            )
        case "progress":
            return Progress(_whole(data, "sent"))
        case "tool_data":
            return ToolData(_optional_whole(data, "sent"), _optional_whole(data, "acked"))
        case "shutdown_complete":
            return ShutdownComplete()
        case "transaction_end":
            return _transaction_end(data)
    return OtherLine(name)


def _transaction_end(data: Mapping[str, object]) -> TransactionEnd:
    error = data.get("error")
    if error is not None and not isinstance(error, str):
        raise _Missing("a string or null `error`")
    return TransactionEnd(
        _whole(data, "transaction"),
        _whole(data, "first_msg_id"),
        _whole(data, "messages"),
        _member(Intent, data, "intent"),
        _member(TxnOutcome, data, "outcome"),
        error,
        _whole(data, "begin_ts_us"),
        _whole(data, "end_ts_us"),
    )


def _member(kind: type[_E], data: Mapping[str, object], key: str) -> _E:
    """The member of `kind` a line's `key` names (its value, e.g. `commit`)."""
    value = data.get(key)
    if not isinstance(value, str) or value not in kind._value2member_map_:
        raise _Missing(f"`{key}` one of {', '.join(m.value for m in kind)}")
    return kind(value)


def _value(data: Mapping[str, object]) -> bytes | None:
    """The record value of a send line (a string, or null for a null value); it must be there."""
    if "value" not in data:
        raise _Missing("`value`")
    value = data["value"]
    if value is None:
        return None
    if not isinstance(value, str):
        raise _Missing("a string `value`")
    return value.encode()


def _whole(data: Mapping[str, object], key: str) -> int:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Missing(f"a whole `{key}`")
    return value


def _offset(data: Mapping[str, object]) -> int | None:
    """A success's offset; -1 (no offset known, as the Java client reports acks=0) is None."""
    if data.get("offset") == -1:
        return None
    return _whole(data, "offset")


def _optional_whole(data: Mapping[str, object], key: str) -> int | None:
    return _whole(data, key) if data.get(key) is not None else None


# How a send error is named when a program reports Kafka's protocol error code: kafka-error-19.
PROTOCOL_PREFIX = "kafka-error-"


def _error_name(data: Mapping[str, object]) -> str:
    """The error a send error names: the Kafka protocol error a family program reports as
    `error_code` (named `kafka-error-<code>`), else Java's `exception` class, else the code
    librdkafka's message carries (`KafkaError{code=_MSG_TIMED_OUT,...}`), else the message."""
    code = data.get("error_code")
    if isinstance(code, int) and not isinstance(code, bool):
        return f"{PROTOCOL_PREFIX}{code}"
    exception = data.get("exception")
    if isinstance(exception, str) and exception:
        return exception
    message = str(data.get("message", ""))
    if "code=" in message:
        return message.split("code=", 1)[1].split(",", 1)[0].split("}", 1)[0]
    if not message:
        raise _Missing("`exception` or `message`")
    return message


def journal_value(msg_id: int | None, key_seq: int | None) -> bytes | None:
    """The value the journal reads a report's id from (values.encode_value's head)."""
    if msg_id is None:
        return None
    return encode_value(msg_id, key_seq or 0, VALUE_HEAD_BYTES)
