"""A test's own producer settings (the dict it gives confluent_kafka.Producer) as the
experiment's `producer:` section, so the checker judges the run by what the client really did.

Pure. The settings that decide durability (acks, idempotence, requests in flight, retries,
timeouts) become the section's fields, read under any of librdkafka's names
(harness.experiment.fields.PRODUCER_KEY_FIELDS); a setting left out is librdkafka's default,
as the client would use it; callbacks and other objects are not settings and are left out;
every other setting goes to the section's `config` as given.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from harness.experiment.fields import PRODUCER_KEY_FIELDS, Scalar
from harness.limits import shown
from kafka_chaos.testing.errors import ChaosUsageError

__all__ = ["LIBRDKAFKA_DEFAULTS", "ProducerSection", "producer_section"]

# The `producer:` section of an experiment document: field → value (None: librdkafka's own
# default), and `config`, the settings no field models (librdkafka name → value).
ProducerSection = dict[str, Scalar | dict[str, Scalar] | None]

# librdkafka's defaults (CONFIGURATION.md of librdkafka 2.x) for the fields a test leaves out;
# retries None is its own default (INT32_MAX), as in an experiment file.
LIBRDKAFKA_DEFAULTS: Final[dict[str, Scalar | None]] = {
    "acks": "all",
    "enable_idempotence": False,
    "max_in_flight": 1_000_000,
    "retries": None,
    "linger_ms": 5,
    "request_timeout_ms": 30_000,
    "message_timeout_ms": 300_000,
}
# What librdkafka sets itself when enable.idempotence is on and the test left them out.
IDEMPOTENT_DEFAULTS: Final[dict[str, Scalar]] = {"acks": "all", "max_in_flight": 5}
# Settings naming the cluster: the plugin's own; they are not recorded.
CLUSTER_KEYS: Final = frozenset({"bootstrap.servers", "metadata.broker.list"})
# A transactional producer needs the harness's transaction journal, which this one is not.
TRANSACTIONAL_KEY: Final = "transactional.id"
_WHOLE_FIELDS: Final = frozenset(
    {"max_in_flight", "retries", "linger_ms", "request_timeout_ms", "message_timeout_ms"}
)
_WHOLE_TEXT = re.compile(r"^\s*[+-]?[0-9]+\s*$")
_FLAG_WORDS: Final = {"true": True, "false": False}


def producer_section(config: Mapping[str, Any]) -> ProducerSection:
    """The `producer:` section of the experiment for a client created with `config`.

    ChaosUsageError when `config` is not a mapping, asks for transactions, or gives a field
    twice under two of its names; the experiment's validation judges the values."""
    if not isinstance(config, Mapping):
        raise ChaosUsageError(
            f"journal(config): config must be the settings mapping given to "
            f"confluent_kafka.Producer (got {shown(config)})"
        )
    if TRANSACTIONAL_KEY in config:
        raise ChaosUsageError(
            f"journal(config): {TRANSACTIONAL_KEY} is set, but the journal records plain sends "
            "only; a transactional workload needs the harness's transactional recorder "
            "(workload.transactions in an experiment file)"
        )
    section: ProducerSection = {}
    named: dict[str, str] = {}  # field -> the name it was given under
    extra: dict[str, Scalar] = {}
    for key, value in config.items():
        if key in CLUSTER_KEYS or not isinstance(value, str | int | float | bool):
            continue  # the plugin's cluster; callbacks, loggers and other objects
        field = PRODUCER_KEY_FIELDS.get(key)
        if field is None:
            extra[key] = value
            continue
        if field in named:
            raise ChaosUsageError(
                f"journal(config): {named[field]!r} and {key!r} are two names of one setting; "
                "give only one"
            )
        named[field] = key
        section[field] = _field_value(field, value)
    if section.get("enable_idempotence"):
        section = {**IDEMPOTENT_DEFAULTS, **section}
    section = {**LIBRDKAFKA_DEFAULTS, **section}
    if extra:
        section["config"] = extra
    return section


def _field_value(field: str, value: Scalar) -> Scalar:
    """A setting as the experiment's field takes it: librdkafka's text forms of numbers and
    booleans read as such; anything else is left for the experiment's validation."""
    if not isinstance(value, str):
        return value
    if field in _WHOLE_FIELDS and _WHOLE_TEXT.match(value):
        return int(value)
    if field == "enable_idempotence" and value.strip().lower() in _FLAG_WORDS:
        return _FLAG_WORDS[value.strip().lower()]
    return value
