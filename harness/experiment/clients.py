"""Which client sends the workload (`workload.client`), and the settings it gets.

Three kinds:
- `librdkafka` (the default): the harness's recorder on confluent-kafka, in the harness process;
- `java`: the harness's Java recorder on kafka-clients at `version` (any release on Maven
  Central, chosen independently of the brokers'), built on demand;
- `command`: any program speaking Kafka's verifiable-client protocol (docs/clients.md), run
  with `argv`, whose `{placeholders}` the harness fills in.

A file may write the client as a mapping or as a short string: `librdkafka`, `java:3.8.0`,
`command` needs the mapping (its argv). The Java client honours the producer settings the
file gives and otherwise keeps the client's own defaults (which differ by release: see
`java_durability`), so a cell judges the producer the user would run.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from harness.experiment.fields import PRODUCER_FIELD_KEYS, Scalar
from harness.rundir.release import KafkaVersion, VersionError

__all__ = ["ClientSpec", "java_durability", "java_producer_settings"]

# What a command client's argv may name; the harness fills each in per run.
PLACEHOLDERS = (
    "bootstrap",  # host:port of the brokers
    "topic",
    "count",  # messages to send (the workload's count, or rate x duration)
    "rate",  # messages per second (-1: unthrottled)
    "duration_s",  # seconds to send for (-1: until count)
    "keys",
    "message_bytes",
    "producer_config",  # a properties file with the producer settings (Java names)
    # kafka_tools_classpath:<version>: the classpath of Kafka's tools at that release, with
    # its VerifiableProducer (org.apache.kafka.tools.VerifiableProducer), built on demand
    "kafka_tools_classpath",
)
_WITH_VERSION = frozenset({"kafka_tools_classpath"})
_PLACEHOLDER = re.compile(r"\{([a-z_]+)(?::([^{}]*))?\}")


def _short_form(value: Any) -> Any:
    """`librdkafka`, `java:<version>` or `command` as the mapping they stand for."""
    if not isinstance(value, str):
        return value
    kind, _, version = value.partition(":")
    return {"kind": kind, **({"version": version} if version else {})}


class ClientSpec(BaseModel):
    """The workload's client."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["librdkafka", "java", "command"] = "librdkafka"
    version: str | None = None  # java: the kafka-clients release
    argv: list[str] | None = Field(None, min_length=1)  # command: the program and its arguments
    # How the command's record values name their message: the verifiable clients' counter
    # (`[prefix.]<n>`), or the harness's own `<msg_id>:<key_seq>:` head.
    values: Literal["verifiable", "kafka-chaos"] = "verifiable"
    name: str | None = Field(None, min_length=1, max_length=60)  # how reports name a command

    @model_validator(mode="after")
    def _fields_of_kind(self) -> ClientSpec:
        if self.kind == "java":
            if not self.version:
                raise ValueError('a java client needs its version, e.g. "java:3.8.0"')
            try:
                KafkaVersion.parse(self.version)
            except VersionError as exc:
                raise ValueError(f"java client version: {exc}") from None
        elif self.version is not None:
            raise ValueError(f"a {self.kind} client takes no version (only java does)")
        if self.kind == "command":
            if not self.argv:
                raise ValueError("a command client needs argv: [program, arguments...]")
            for arg in self.argv:
                for name, argument in _PLACEHOLDER.findall(arg):
                    _check_placeholder(name, argument)
        elif self.argv is not None:
            raise ValueError(f"a {self.kind} client takes no argv (only command does)")
        return self

    @property
    def label(self) -> str:
        """How reports name the client: `librdkafka`, `java 3.8.0`, `command <program>`."""
        if self.kind == "java":
            return f"java {self.version}"
        if self.kind == "command" and self.argv:
            return f"command {self.name or self.argv[0].rsplit('/', 1)[-1]}"
        return self.kind

    def tools_versions(self) -> set[str]:
        """The Kafka releases whose tools a command's argv names ({kafka_tools_classpath:v})."""
        return {
            argument
            for arg in self.argv or []
            for name, argument in _PLACEHOLDER.findall(arg)
            if name in _WITH_VERSION and argument
        }

    def fill(self, values: dict[str, str], versioned: Callable[[str, str], str]) -> list[str]:
        """A command client's argv with its placeholders filled: plain ones from `values`, a
        `{name:version}` one by `versioned(name, version)`."""

        def filled(match: re.Match[str]) -> str:
            name, argument = match.group(1), match.group(2)
            if name in _WITH_VERSION and argument:
                return versioned(name, argument)
            return values.get(name, match.group(0))

        return [_PLACEHOLDER.sub(filled, arg) for arg in self.argv or []]


def _check_placeholder(name: str, argument: str) -> None:
    """ValueError naming the problem when `{name}` or `{name:argument}` is not one the harness
    fills in."""
    known = ", ".join(
        f"{{{p}:<version>}}" if p in _WITH_VERSION else f"{{{p}}}" for p in PLACEHOLDERS
    )
    if name not in PLACEHOLDERS:
        raise ValueError(f"unknown placeholder {{{name}}} in argv; known: {known}")
    if name in _WITH_VERSION:
        try:
            KafkaVersion.parse(argument)
        except VersionError as exc:
            raise ValueError(f"{{{name}:{argument}}}: {exc}") from None
    elif argument:
        raise ValueError(f"{{{name}}} takes no argument (got {{{name}:{argument}}})")


ClientField = Annotated[ClientSpec, BeforeValidator(_short_form)]


# The producer section's fields as the Java client names them: as librdkafka does, but
# message_timeout_ms (librdkafka's message.timeout.ms) is Java's delivery.timeout.ms, since 2.1.
_JAVA_KEYS = {field: keys[0] for field, keys in PRODUCER_FIELD_KEYS.items()} | {
    "message_timeout_ms": "delivery.timeout.ms"
}


_DELIVERY_TIMEOUT = KafkaVersion.parse("2.1.0")  # KIP-91 gave Java delivery.timeout.ms
_SAFE_DEFAULTS = KafkaVersion.parse("3.0.0")  # KIP-679: acks=all and idempotence by default


def java_producer_settings(producer: Any, client_version: str) -> dict[str, Scalar]:
    """The Java producer's settings: the producer section's fields the file set (by Java's
    names; delivery.timeout.ms only from 2.1, which introduced it), then its `config` map
    verbatim. Fields the file left out keep the client's own defaults."""
    settings: dict[str, Scalar] = {}
    for field in sorted(producer.model_fields_set & _JAVA_KEYS.keys()):
        value = getattr(producer, field)
        if value is None:
            continue
        if field == "message_timeout_ms" and KafkaVersion.parse(client_version) < _DELIVERY_TIMEOUT:
            continue
        settings[_JAVA_KEYS[field]] = value
    return {**settings, **producer.config}


def java_durability(settings: dict[str, Scalar], client_version: str) -> tuple[str, bool]:
    """(acks, idempotence) the Java client at `client_version` runs with, given `settings`.

    Before 3.0 the defaults are acks=1 and no idempotence. From 3.0 (KIP-679) they are
    acks=all and idempotence on; from 3.2 a producer that did not ask for idempotence but set
    something it cannot have (acks other than all, more than 5 requests in flight, retries=0)
    runs without it rather than failing. The run checks this against what the client prints.
    """
    modern = KafkaVersion.parse(client_version) >= _SAFE_DEFAULTS
    acks = str(settings.get("acks", "all" if modern else "1"))
    acks = "all" if acks == "-1" else acks
    if "enable.idempotence" in settings:
        return acks, str(settings["enable.idempotence"]).lower() == "true"
    if not modern:
        return acks, False
    conflicts = (
        acks != "all"
        or int(str(settings.get("max.in.flight.requests.per.connection", 5))) > 5
        or str(settings.get("retries", "")) == "0"
    )
    return acks, not conflicts
