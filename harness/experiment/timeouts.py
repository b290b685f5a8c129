"""The cell's own timeouts, and the bands around them the generic nemesis draws its timings from.

Each timeout is read from the cell's resolved settings (producer section and config, broker and
controller config, the transactions section), with Kafka's default (or the harness's, where it
sets one) when the file leaves it out. A fault that lasts a little less than a timeout, about
as long, or a little longer is where the code paths that handle expiry race the ones that do
not: the bands below, at and above each timeout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from harness.experiment.model import Experiment, WorkloadSpec
from harness.platform.versions import Mode, broker_defaults
from harness.rundir.records import CONSUMER_STUCK_S
from harness.rundir.release import KafkaVersion
from harness.rundir.spec import KAFKA_DEFAULTS_MS, milliseconds

__all__ = [
    "BANDS",
    "CONSUMER_SESSION_TIMEOUT_MS",
    "Band",
    "Timeout",
    "cell_timeouts",
    "stuck_bound_s",
]

# The harness's consumer group members run with this session timeout (SESSION_TIMEOUT_MS of
# harness/workload/consumer_group/librdkafka.py, which this layer may not import; a unit test
# holds the two equal).
CONSUMER_SESSION_TIMEOUT_MS: Final = 6000
OFFSETS_COMMIT_TIMEOUT_MS: Final = 5_000  # the broker's default
SOCKET_TIMEOUT_MS: Final = 60_000  # librdkafka's and the Java client's socket.timeout.ms


@dataclass(frozen=True)
class Timeout:
    """One timeout of the cell: its setting's name and milliseconds."""

    name: str
    ms: float


@dataclass(frozen=True)
class Band:
    """A band around a timeout, as factors of it: [low, high)."""

    name: str
    low: float
    high: float

    def around(self, timeout_ms: float) -> tuple[float, float]:
        """The band's milliseconds around `timeout_ms`."""
        return self.low * timeout_ms, self.high * timeout_ms


BANDS: Final = (Band("below", 0.5, 0.9), Band("at", 0.9, 1.1), Band("above", 1.1, 2.0))


def cell_timeouts(spec: Experiment) -> tuple[Timeout, ...]:
    """The timeouts of the cell `spec`, each once, in a fixed order: the producer's request,
    delivery and socket timeouts, the broker's replica lag and session, the controller's
    election and fetch (KRaft) or ZooKeeper's session, the transaction timeout (transactions)
    and the consumer group's session and its coordinator's commit timeout (consumers). A 0 (no
    limit) is left out."""
    producer, kafka = spec.producer, spec.kafka
    servers = {**kafka.broker_config, **kafka.controller_config}
    found = [
        Timeout("request.timeout.ms", producer.request_timeout_ms),
        Timeout("message.timeout.ms", producer.message_timeout_ms),
        Timeout(
            "socket.timeout.ms",
            milliseconds(producer.config.get("socket.timeout.ms"), SOCKET_TIMEOUT_MS),
        ),
    ]
    names = ["replica.lag.time.max.ms"]
    if kafka.effective_mode() is Mode.ZOOKEEPER:
        names.append("zookeeper.session.timeout.ms")
    else:
        names += [
            "broker.session.timeout.ms",
            "controller.quorum.election.timeout.ms",
            "controller.quorum.fetch.timeout.ms",
        ]
    # Defaults that changed between releases are the cell's version's (KIP-537: 0.10.2's
    # ZooKeeper session is 6 s, not 18 s).
    version = KafkaVersion.parse(kafka.version) if kafka.version else None
    release = broker_defaults(version).as_properties() if version else {}
    found += [
        Timeout(name, milliseconds(servers.get(name, release.get(name)), KAFKA_DEFAULTS_MS[name]))
        for name in names
    ]
    if spec.workload.transactions is not None:
        found.append(Timeout("transaction.timeout.ms", spec.workload.transactions.timeout_ms))
    if spec.workload.consumers:
        session_ms = spec.workload.consumer_session_timeout_ms or CONSUMER_SESSION_TIMEOUT_MS
        found.append(Timeout("session.timeout.ms", session_ms))
        # How long the group coordinator waits for a commit's replication before it fails it.
        commit_ms = milliseconds(
            servers.get("offsets.commit.timeout.ms"), OFFSETS_COMMIT_TIMEOUT_MS
        )
        found.append(Timeout("offsets.commit.timeout.ms", commit_ms))
    return tuple(timeout for timeout in found if timeout.ms > 0)


def stuck_bound_s(workload: WorkloadSpec) -> float:
    """The consumer group's liveness bound: `consumer_stuck_s` when the file gives it, else
    CONSUMER_STUCK_S (for the members' default session timeout) plus what a longer
    `consumer_session_timeout_ms` adds: the coordinator keeps a dead member's partitions for
    its whole session timeout, and that wait is the group's, not a stall."""
    if workload.consumer_stuck_s is not None:
        return workload.consumer_stuck_s
    session_ms = workload.consumer_session_timeout_ms or CONSUMER_SESSION_TIMEOUT_MS
    return CONSUMER_STUCK_S + max(0.0, session_ms - CONSUMER_SESSION_TIMEOUT_MS) / 1000
