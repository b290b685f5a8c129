"""The producer settings a user writes for librdkafka (producer.config), checked by librdkafka
itself when the file is validated: a key it does not know, or a value it refuses, is named
before any cluster starts, with the nearest known name where there is one."""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Mapping

from harness.experiment.fields import Scalar
from harness.rundir.config import setting_text

__all__ = ["librdkafka_refusal"]

_UNKNOWN = re.compile(r'^No such configuration property: "(?P<key>[^"]+)"')
# Names users carry over from the Java client or mistype most: offered as the nearest name.
KNOWN_NAMES = (
    "acks", "batch.size", "batch.num.messages", "compression.type", "compression.codec",
    "delivery.timeout.ms", "enable.idempotence", "linger.ms", "max.in.flight",
    "max.in.flight.requests.per.connection", "message.max.bytes", "message.send.max.retries",
    "message.timeout.ms", "queue.buffering.max.kbytes", "queue.buffering.max.messages",
    "queue.buffering.max.ms", "request.required.acks", "request.timeout.ms", "retries",
    "retry.backoff.ms", "socket.keepalive.enable", "socket.nagle.disable", "socket.timeout.ms",
    "statistics.interval.ms", "sticky.partitioning.linger.ms", "transaction.timeout.ms",
)  # fmt: skip


def librdkafka_refusal(config: Mapping[str, Scalar]) -> tuple[str, str] | None:
    """(key, why) for a setting of `config` that librdkafka refuses, None when it takes them
    all. The key is the one librdkafka names (or the first, when it names none)."""
    return _refusal(tuple(sorted((str(k), setting_text(v)) for k, v in config.items())))


@functools.lru_cache(maxsize=512)
def _refusal(items: tuple[tuple[str, str], ...]) -> tuple[str, str] | None:
    from confluent_kafka import KafkaException, Producer

    if not items:
        return None
    try:
        # No bootstrap.servers: the client is made and let go, and connects to nothing.
        Producer({**dict(items), "log_level": 0})
    except KafkaException as exc:
        reason = exc.args[0].str() if exc.args else str(exc)
        unknown = _UNKNOWN.match(reason)
        key = unknown.group("key") if unknown else _named_key(reason, items)
        if unknown and (near := difflib.get_close_matches(key, KNOWN_NAMES, n=1)):
            reason = f"{reason}; did you mean '{near[0]}'?"
        return key, reason
    return None


def _named_key(reason: str, items: tuple[tuple[str, str], ...]) -> str:
    """The key of `items` that librdkafka's `reason` names (or one it names through an alias,
    e.g. compression.type as compression.codec), else the first."""
    named = [key for key, _ in items if f'"{key}"' in reason]
    return named[0] if named else items[0][0]
