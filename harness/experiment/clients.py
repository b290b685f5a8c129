"""Which client sends the workload (`workload.client`), and the settings it gets.

The kinds:
- `librdkafka` (the default): the harness's recorder on confluent-kafka, in the harness process;
  `librdkafka:<version>` is confluent-kafka at that release, a program in its own virtualenv;
- `java`: the harness's Java recorder on kafka-clients at `version` (any release on Maven
  Central, chosen independently of the brokers'), built on demand;
- `franz-go`, `sarama`, `kafkajs`, `aiokafka`: the harness's program for that library at
  `version` (its current release when none is named), built from its registry on demand
  (harness/experiment/client_families.py);
- `command`: any program speaking Kafka's verifiable-client protocol (docs/clients.md), run
  with `argv`, whose `{placeholders}` the harness fills in.

A file may write the client as a mapping or as a short string: `librdkafka`, `java:3.8.0`,
`franz-go:1.21.5`; `command` needs the mapping (its argv). The Java client honours the producer
settings the file gives and otherwise keeps the client's own defaults (which differ by release: see
`java_durability`), so a cell judges the producer the user would run.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from harness.experiment.client_families import (
    ALL_ROLES,
    FAMILIES,
    PROGRAM_FAMILIES,
    ClientFamily,
    Role,
)
from harness.experiment.fields import PRODUCER_FIELD_KEYS, Scalar
from harness.rundir.release import KafkaVersion, VersionError

__all__ = ["ClientSpec", "family_producer_settings", "java_durability", "java_producer_settings"]

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


# A library release as its registry names it: 1.22.3, 2.6.1, 0.14.0, 1.0.0-rc1.
_RELEASE = re.compile(r"\d+(\.\d+){1,3}([-+.][0-9A-Za-z.]+)?")
# The kinds whose version is optional: the family's current release stands in for none.
_CURRENT_BY_DEFAULT = frozenset(PROGRAM_FAMILIES) - {"librdkafka"}


def _short_form(value: Any) -> Any:
    """`librdkafka`, `java:<version>`, `franz-go[:<version>]` ... or `command` as the mapping
    they stand for; a program family named without a version gets its current release, so the
    run records which release ran."""
    if isinstance(value, str):
        kind, _, version = value.partition(":")
        value = {"kind": kind, **({"version": version} if version else {})}
    if isinstance(value, dict) and value.get("kind") in _CURRENT_BY_DEFAULT:
        current = PROGRAM_FAMILIES[value["kind"]].current
        value = {**value, "version": value.get("version") or current}
    return value


class ClientSpec(BaseModel):
    """The workload's client."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["librdkafka", "java", "command", "franz-go", "sarama", "kafkajs", "aiokafka"] = (
        "librdkafka"
    )
    version: str | None = None  # java: the kafka-clients release; a family: its library's
    argv: list[str] | None = Field(None, min_length=1)  # command: the program and its arguments
    # How the command's record values name their message: the verifiable clients' counter
    # (`[prefix.]<n>`), or the harness's own `<msg_id>:<key_seq>:` head.
    values: Literal["verifiable", "kafka-chaos"] = "verifiable"
    name: str | None = Field(None, min_length=1, max_length=60)  # how reports name a command
    # What a command speaks: the verifiable-client protocol (a producer; argv's placeholders
    # filled in), or the client-program contract (every role; the harness appends the role
    # word and the contract's arguments to argv, as it does for a built family's program).
    protocol: Literal["verifiable", "contract"] = "verifiable"

    @model_validator(mode="after")
    def _fields_of_kind(self) -> ClientSpec:
        if self.kind == "java":
            if not self.version:
                raise ValueError('a java client needs its version, e.g. "java:3.8.0"')
            try:
                KafkaVersion.parse(self.version)
            except VersionError as exc:
                raise ValueError(f"java client version: {exc}") from None
        elif self.kind in PROGRAM_FAMILIES:
            if self.version is not None and not _RELEASE.fullmatch(self.version):
                raise ValueError(
                    f"{self.kind} version {self.version!r} is not a release number such as "
                    f"{PROGRAM_FAMILIES[self.kind].current}"
                )
        elif self.version is not None:
            raise ValueError(f"a {self.kind} client takes no version")
        if self.kind == "command":
            if not self.argv:
                raise ValueError("a command client needs argv: [program, arguments...]")
            self._check_command_argv()
        elif self.argv is not None:
            raise ValueError(f"a {self.kind} client takes no argv (only command does)")
        elif self.protocol != "verifiable":
            raise ValueError(f"a {self.kind} client takes no protocol (only command does)")
        return self

    def _check_command_argv(self) -> None:
        """ValueError naming the problem with a command's argv: an unknown placeholder, or
        under the contract any placeholder (the contract's arguments say everything; its
        programs write the harness's values, whatever `values` says)."""
        for arg in self.argv or []:
            for name, argument in _PLACEHOLDER.findall(arg):
                if self.protocol == "contract":
                    raise ValueError(
                        f"{{{name}}} in argv: a contract program is given the contract's "
                        "arguments after argv (docs/clients.md); remove the placeholder"
                    )
                _check_placeholder(name, argument)

    @property
    def family(self) -> ClientFamily | None:
        """The program family this client is built from (None: java, command or the
        in-process librdkafka recorder)."""
        if self.kind == "librdkafka" and self.version is None:
            return None
        return PROGRAM_FAMILIES.get(self.kind)

    @property
    def runs_program(self) -> bool:
        """Whether the harness runs this client as a program of the client-program contract
        (java and the families, built by the harness, and a command with `protocol:
        contract`), rather than in process or as a verifiable-protocol command."""
        return self.kind == "java" or self.family is not None or self.protocol == "contract"

    @property
    def roles(self) -> frozenset[Role]:
        """The roles this client plays (harness/experiment/client_families.py): a command
        speaking the contract plays every one."""
        if self.kind == "command" and self.protocol == "contract":
            return ALL_ROLES
        if self.kind == "librdkafka" and not self.runs_program:
            return ALL_ROLES
        return FAMILIES[self.kind].roles

    @property
    def label(self) -> str:
        """How reports name the client: `librdkafka`, `java 3.8.0`, `franz-go 1.22.3`,
        `command <program>`."""
        if self.kind == "command" and self.argv:
            return f"command {self.name or self.argv[0].rsplit('/', 1)[-1]}"
        if self.runs_program:
            return f"{self.kind} {self.version}"
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
    fields = set(producer.model_fields_set)
    if KafkaVersion.parse(client_version) < _DELIVERY_TIMEOUT:
        fields.discard("message_timeout_ms")
    return _java_named(producer, fields)


def family_producer_settings(producer: Any) -> dict[str, Scalar]:
    """A family program's producer settings, by Java's names: every durability field of the
    producer section, defaults included (a family's own defaults differ from library to
    library, and the cell is judged by the section: franz-go is idempotent unless told, Sarama
    and KafkaJS are not), then the `config` map verbatim."""
    return _java_named(producer, set(_JAVA_KEYS))


def _java_named(producer: Any, fields: set[str]) -> dict[str, Scalar]:
    """The producer section's `fields` that hold a value, by Java's names, then its `config`
    map verbatim."""
    settings: dict[str, Scalar] = {}
    for field in sorted(fields & _JAVA_KEYS.keys()):
        value = getattr(producer, field)
        if value is not None:
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
