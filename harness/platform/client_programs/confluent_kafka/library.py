"""What the confluent-kafka program asks of its library beyond the roles: its errors' flags and
descriptions, and the versions of the binding and of librdkafka."""

from __future__ import annotations

import confluent_kafka
from confluent_kafka import KafkaError, KafkaException

POLL_S = 0.2


def kafka_error(exc: BaseException) -> KafkaError | None:
    error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    return error if isinstance(error, KafkaError) else None


def flag(error: KafkaError | None, name: str) -> bool:
    """KafkaError.fatal() / retriable() / txn_requires_abort(), False where it has none."""
    method = getattr(error, name, None)
    return bool(method()) if callable(method) else False


def describe(exc: BaseException) -> str:
    error = kafka_error(exc)
    if error is not None:
        return f"{error.name()}: {error.str()}"
    return f"{type(exc).__name__}: {exc}"


def client_version() -> str:
    """confluent-kafka's and librdkafka's versions (version() is a string in newer releases,
    a (text, number) pair in older ones)."""
    binding: object = confluent_kafka.version()
    library: object = confluent_kafka.libversion()
    binding = binding[0] if isinstance(binding, tuple) else binding
    library = library[0] if isinstance(library, tuple) else library
    return f"confluent-kafka {binding}, librdkafka {library}"
