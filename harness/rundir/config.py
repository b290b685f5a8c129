"""The flat `config` of spec.json, typed: the settings a cell's documented guarantee depends on.

The harness writes it (harness.experiment.plan.cell_config) and the analysis reads it here, so
acks is normalised once (any of "all", "-1", -1, 1, "1", 0 becomes "0", "1" or "all") and a
bool that travelled as text through the matrix axes is read once. Every field may be missing:
a run that crashed early, or a spec.json written by hand, still parses, and whoever needs a
missing field says so (the checker then answers UNKNOWN).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

__all__ = ["ACKS", "Acks", "CellConfig", "ConfigError", "normalise_acks", "setting_text"]

Acks = Literal["0", "1", "all"]
ACKS: Final[tuple[Acks, ...]] = ("0", "1", "all")
TRUE_WORDS: Final = frozenset({"true", "1", "yes", "on"})


class ConfigError(ValueError):
    """A spec.json `config` value that cannot be read; the message names the key and the fix."""


def normalise_acks(value: object) -> Acks:
    """ "0", "1" or "all" for any spelling of acks; ValueError naming the value otherwise."""
    text = str(value).strip().lower()
    if text in ("all", "-1"):
        return "all"
    if text in ("0", "1"):
        return "1" if text == "1" else "0"
    raise ValueError(f"unknown acks {value!r}: expected 0, 1 or all")


def setting_text(value: object) -> str:
    """A setting as Kafka and librdkafka read it: booleans as true/false, the rest as str."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def read_bool(value: object) -> bool:
    """A bool that may have travelled as text ("true", " On ", "0", ...) through the axes."""
    if isinstance(value, str):
        return value.strip().lower() in TRUE_WORDS
    return bool(value)


class CellConfig(BaseModel):
    """spec.json's flat `config`: the one definition of its keys (unknown keys are kept)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    acks: Acks | None = None
    min_insync_replicas: int | None = None
    unclean_leader_election: bool | None = None
    enable_idempotence: bool | None = None
    max_in_flight: int | None = None
    replication_factor: int | None = None
    partitions: int | None = None
    fault_class: str | None = None
    kafka_version: str | None = None
    kafka_mode: str | None = None  # kraft, kraft-dedicated or zookeeper
    rate: int | float | None = None  # messages per second; None: unthrottled
    message_bytes: int | None = None
    consumers: int | None = None  # members of the consumer group; None: the run had none
    consumer_commit: str | None = None  # harness.rundir.records.CommitMode
    transactions: bool | None = None  # the workload ran transactions (workload.transactions)
    client: str | None = None  # the producer's client when not librdkafka: "java 3.8.0", ...
    # Transactions that read (workload.transactions.reads): whether the reader goes back to the
    # committed position after a transaction that did not commit. None: they do not read.
    txn_reader_rewinds: bool | None = None
    # Every append fsynced before it is acknowledged: the topic's flush.messages (or, when the
    # topic leaves it out, the brokers' log.flush.interval.messages) is 1. Absent: it is not.
    fsync_each_message: bool | None = None

    @field_validator("acks", mode="before")
    @classmethod
    def _acks(cls, value: object) -> object:
        return None if value is None else normalise_acks(value)

    @field_validator(
        "unclean_leader_election",
        "enable_idempotence",
        "transactions",
        "txn_reader_rewinds",
        "fsync_each_message",
        mode="before",
    )
    @classmethod
    def _flag(cls, value: object) -> object:
        return None if value is None else read_bool(value)

    @field_validator("fault_class", "kafka_version", "kafka_mode", mode="before")
    @classmethod
    def _text(cls, value: object) -> object:
        # A version such as 4.0 may arrive as a YAML number; the name is what matters.
        return None if value is None else str(value)

    @classmethod
    def read(cls, raw: Mapping[str, Any]) -> CellConfig:
        """The config of a spec.json object; ConfigError naming the first unreadable key."""
        if not isinstance(raw, Mapping):
            raise ConfigError(f"config is a {type(raw).__name__}, not an object")
        try:
            return cls.model_validate(dict(raw))
        except ValidationError as exc:
            error = exc.errors()[0]
            key = ".".join(str(part) for part in error["loc"]) or "config"
            message = str(error["msg"]).removeprefix("Value error, ")
            raise ConfigError(
                f"config.{key}: {message} (got {error.get('input')!r}); fix spec.json's config"
            ) from None

    def require(self, key: str) -> Any:
        """The value of `key`; ConfigError when the spec.json config does not say it."""
        value = getattr(self, key)
        if value is None:
            raise ConfigError(f"config.{key} is missing: the spec.json config does not say it")
        return value

    def as_json(self) -> dict[str, object]:
        """The spec.json / results.json form: the keys given, values normalised."""
        return self.model_dump(mode="json", exclude_unset=True)
