"""What the aiokafka program asks of its library beyond the roles: which errors are fatal to a
transactional producer, how an error is named and described, and its Kafka error code."""

from __future__ import annotations

from aiokafka import errors as kafka_errors

POLL_MS = 200


# Errors after which a transactional producer cannot go on (TransactionalSends.java's list).
FATAL_ERRORS = tuple(
    getattr(kafka_errors, name)
    for name in (
        "ProducerFenced",
        "OutOfOrderSequenceNumber",
        "InvalidProducerEpoch",
        "TransactionalIdAuthorizationFailed",
        "TopicAuthorizationFailedError",
        "GroupAuthorizationFailedError",
        "ClusterAuthorizationFailedError",
        "UnsupportedVersionError",
        "IncompatibleBrokerVersion",
    )
    if hasattr(kafka_errors, name)
)


class TimedOut(Exception):
    """A transactional call did not return within max.block.ms."""


def error_name(exc: BaseException) -> str:
    kind = type(exc)
    return f"{kind.__module__}.{kind.__qualname__}"


def error_code(exc: BaseException) -> int | None:
    """The Kafka protocol error code of a broker's error (aiokafka's `errno`), else None."""
    if isinstance(exc, kafka_errors.BrokerResponseError):
        code = getattr(exc, "errno", None)
        if isinstance(code, int) and code >= 0:
            return code
    return None


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
