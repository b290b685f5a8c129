"""What each Apache Kafka release has and needs: the one home of version facts.

The image recipe (which jars, which logging), the cluster (which modes, which properties) and
the experiment validation (which settings a version lacks) all ask here, so adding a version
rule is one edit. Facts are spans of releases: `since` is the first release that has the
thing, `until` the first that no longer has it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from harness.rundir.release import KafkaVersion
from harness.rundir.spec import KAFKA_DEFAULTS_MS


def _v(text: str) -> KafkaVersion:
    return KafkaVersion.parse(text)


OLDEST = _v("0.10.2.2")  # the oldest release the harness builds and tests


class Mode(StrEnum):
    """How the cluster keeps its metadata and elects its controller."""

    KRAFT = "kraft"  # combined broker+controller nodes
    KRAFT_DEDICATED = "kraft-dedicated"  # controller-only nodes plus brokers
    ZOOKEEPER = "zookeeper"  # a ZooKeeper ensemble plus brokers, one elected controller


class Feature(StrEnum):
    """Something a release either has or lacks; validation refuses settings it lacks."""

    ZOOKEEPER_MODE = "ZooKeeper mode"
    KRAFT = "KRaft mode"
    LISTENER_NAMES = "named listeners (inter.broker.listener.name)"
    IDEMPOTENCE = "the idempotent producer"
    TRANSACTIONS = "transactions"
    GROUP_REBALANCE_DELAY = "group.initial.rebalance.delay.ms"
    LEADER_EPOCH = "leader-epoch log truncation"
    RECORD_BATCH_V2 = "v2 record batches (message format 2)"
    ELR = "eligible leader replicas"
    DYNAMIC_QUORUM = "a dynamic KRaft controller quorum (controllers added and removed)"
    TRANSACTION_VERSION_2 = "transaction version 2 (each commit raises the producer epoch)"
    REASSIGNMENT_API = "the partition reassignment API (AlterPartitionReassignments)"
    ASSIGNMENT_ORDER = "metadata listing a partition's replicas in assignment order"


@dataclass(frozen=True)
class Span:
    """The releases that have a feature, and where that is documented."""

    since: KafkaVersion | None
    until: KafkaVersion | None
    source: str

    def covers(self, version: KafkaVersion) -> bool:
        """Whether `version` has the feature."""
        after_start = self.since is None or version >= self.since
        return after_start and (self.until is None or version < self.until)

    def describe(self) -> str:
        """The span in words ("Kafka >= 0.11.0.0", "Kafka < 4.0.0"), for messages."""
        if self.since and self.until:
            return f"Kafka {self.since} up to (not including) {self.until}"
        if self.since:
            return f"Kafka >= {self.since}"
        return f"Kafka < {self.until}" if self.until else "every Kafka release"


# The first Java client whose transactions use transaction version 2 where the cluster has it.
TV2_JAVA_CLIENT: Final = _v("4.0.0")

FEATURES: dict[Feature, Span] = {
    Feature.ZOOKEEPER_MODE: Span(None, _v("4.0.0"), "KIP-500: 4.0 removed ZooKeeper mode"),
    # KRaft exists from 2.8 as early access; the harness uses it where it is production-ready.
    Feature.KRAFT: Span(_v("3.3.0"), None, "KIP-833: KRaft production-ready in 3.3"),
    Feature.LISTENER_NAMES: Span(_v("0.10.2.0"), None, "KIP-103 (0.10.2)"),
    Feature.IDEMPOTENCE: Span(_v("0.11.0.0"), None, "KIP-98 (0.11.0)"),
    Feature.TRANSACTIONS: Span(_v("0.11.0.0"), None, "KIP-98 (0.11.0)"),
    Feature.GROUP_REBALANCE_DELAY: Span(_v("0.11.0.0"), None, "KIP-134 (0.11.0)"),
    Feature.LEADER_EPOCH: Span(_v("0.11.0.0"), None, "KIP-101 (0.11.0), KAFKA-1211"),
    Feature.RECORD_BATCH_V2: Span(_v("0.11.0.0"), None, "KIP-98 (0.11.0): message format v2"),
    Feature.ELR: Span(_v("4.0.0"), None, "KIP-966 (preview 4.0, default for new clusters 4.1)"),
    Feature.DYNAMIC_QUORUM: Span(_v("3.9.0"), None, "KIP-853 (3.9)"),
    Feature.TRANSACTION_VERSION_2: Span(_v("4.0.0"), None, "KIP-890 part 2 (4.0)"),
    Feature.REASSIGNMENT_API: Span(_v("2.4.0"), None, "KIP-455 (2.4)"),
    # Before, the brokers passed a partition's replicas among themselves as a set: 0.10.2.2
    # answers them sorted. Checked from 2.2 (KAFKA-7537's controller test reads the replicas
    # as the assignment list; 4.3.1 answers [2, 3, 1]); not checked from 0.11 to 2.1.
    Feature.ASSIGNMENT_ORDER: Span(_v("2.2.0"), None, "KAFKA-7537 (2.2)"),
}


def supports(version: KafkaVersion, feature: Feature) -> bool:
    """Whether `version` has `feature`."""
    return FEATURES[feature].covers(version)


def lacks(version: KafkaVersion, feature: Feature) -> str | None:
    """None when `version` has `feature`, else a sentence saying which releases have it."""
    span = FEATURES[feature]
    if span.covers(version):
        return None
    return f"Kafka {version} lacks {feature} ({span.source}); it needs {span.describe()}."


def modes(version: KafkaVersion) -> tuple[Mode, ...]:
    """The cluster modes `version` can run in."""
    kraft = (Mode.KRAFT, Mode.KRAFT_DEDICATED) if supports(version, Feature.KRAFT) else ()
    zookeeper = (Mode.ZOOKEEPER,) if supports(version, Feature.ZOOKEEPER_MODE) else ()
    return kraft + zookeeper


def default_mode(version: KafkaVersion) -> Mode:
    """The mode a cell runs in when its file names none: KRaft (combined) where available."""
    return Mode.KRAFT if supports(version, Feature.KRAFT) else Mode.ZOOKEEPER


def mode_refusal(version: KafkaVersion, mode: Mode) -> str | None:
    """None when `version` runs in `mode`, else the reason and the fix."""
    feature = Feature.ZOOKEEPER_MODE if mode is Mode.ZOOKEEPER else Feature.KRAFT
    reason = lacks(version, feature)
    if reason is None:
        return None
    allowed = ", ".join(modes(version))
    return f"{reason} Fix: use kafka.mode {allowed} with this version, or another version."


def version_refusal(version: KafkaVersion) -> str | None:
    """None when the harness can build `version`, else the reason and the fix."""
    if version < OLDEST:
        return (
            f"Kafka {version} is older than the oldest release the harness runs ({OLDEST}). "
            f"Fix: use {OLDEST} or newer."
        )
    return None


class Logging(StrEnum):
    """Which logging the broker's jars need on the classpath."""

    LOG4J1_IN_TREE = "log4j 1.2 (in the release's dependency tree)"
    LOG4J1_ADDED = "log4j 1.2 API via reload4j (added: the release declares no binding)"
    LOG4J2_ADDED = "log4j 2 (added: the release carries only the SLF4J API)"


@dataclass(frozen=True)
class Recipe:
    """What the broker image of one release is built from."""

    version: KafkaVersion
    artifact: str  # kafka_<Scala version>: the broker jar on Maven Central
    logging: Logging
    jaxb: bool  # javax.xml.bind for Java 8 era code on the Java 17 base
    zookeeper: bool  # the image can run ZooKeeper (its jar is in the broker's tree)
    kraft: bool  # the image can format KRaft storage and run controllers

    def cache_key(self) -> str:
        """Every choice that changes the image, for the recipe hash."""
        return (
            f"{self.version}|{self.artifact}|{self.logging.name}|jaxb={self.jaxb}"
            f"|zk={self.zookeeper}|kraft={self.kraft}"
        )


def recipe(version: KafkaVersion) -> Recipe:
    """How to build the broker image of `version` to run on Java 17."""
    if version >= _v("4.0.0"):
        logging = Logging.LOG4J2_ADDED
    elif version >= _v("1.1.0"):  # from 1.1 the binding is test-scoped in the release's pom
        logging = Logging.LOG4J1_ADDED
    else:
        logging = Logging.LOG4J1_IN_TREE
    return Recipe(
        version=version,
        # Scala 2.13 builds exist from 2.4.0; 4.0 dropped Scala 2.12.
        artifact="kafka_2.13" if version >= _v("2.4.0") else "kafka_2.12",
        logging=logging,
        # Java 11 (no javax.xml.bind in the JDK) is supported from 2.1.0 (KAFKA-7264).
        jaxb=version < _v("2.1.0"),
        zookeeper=supports(version, Feature.ZOOKEEPER_MODE),
        kraft=supports(version, Feature.KRAFT),
    )


@dataclass(frozen=True)
class BrokerDefaults:
    """Broker settings whose default changed between releases, as `version` has them."""

    unclean_leader_election_enable: bool
    elr_enabled_for_new_clusters: bool
    zookeeper_session_timeout_ms: int
    replica_lag_time_max_ms: int

    def as_properties(self) -> dict[str, str]:
        """Property name -> effective default value, for spec.json."""
        return {
            "unclean.leader.election.enable": str(self.unclean_leader_election_enable).lower(),
            "eligible.leader.replicas.version": "1" if self.elr_enabled_for_new_clusters else "0",
            "zookeeper.session.timeout.ms": str(self.zookeeper_session_timeout_ms),
            "replica.lag.time.max.ms": str(self.replica_lag_time_max_ms),
        }


def broker_defaults(version: KafkaVersion) -> BrokerDefaults:
    """The effective defaults of `version` where they differ between releases."""
    return BrokerDefaults(
        # KIP-106: 0.11.0 turned unclean leader election off by default.
        unclean_leader_election_enable=version < _v("0.11.0.0"),
        # KIP-966: new clusters get ELR from 4.1 (a preview, off, in 4.0).
        elr_enabled_for_new_clusters=version >= _v("4.1.0"),
        # KIP-537 (KAFKA-9102): 2.5.0 raised the ZooKeeper session from 6 s to 18 s and the
        # time a follower may lag before it leaves the ISR from 10 s to 30 s.
        zookeeper_session_timeout_ms=_since_2_5(version, "zookeeper.session.timeout.ms", 6_000),
        replica_lag_time_max_ms=_since_2_5(version, "replica.lag.time.max.ms", 10_000),
    )


def _since_2_5(version: KafkaVersion, name: str, before_ms: int) -> int:
    """A setting's default in `version`: the current one (KAFKA_DEFAULTS_MS) from 2.5.0,
    `before_ms` before it (KIP-537)."""
    return int(KAFKA_DEFAULTS_MS[name]) if version >= _v("2.5.0") else before_ms
