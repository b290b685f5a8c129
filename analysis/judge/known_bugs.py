"""The known-bug table: every published Kafka bug, or design gap a KIP closed, that the checker
recognises, by the releases it affects, the anomaly it explains and its mechanism.

A finding the documentation forbids is KNOWN-BUG, never VIOLATION, when a row affects the
release (and client) that ran and the run shows that row's evidence. The evidence a row needs
is read where its anomaly is judged: a loss bug's from one partition's history
(analysis.judge.mechanisms.PARTITION_EVIDENCE), a transactional bug's from the run's events
(analysis.judge.transactions.RUN_EVIDENCE), a consumer position's bug from the case its poll
steps show (analysis.judge.liveness.LIVENESS_EVIDENCE), a client's duplicating bug from the
run's faults and sends (analysis.judge.duplicates.DUPLICATE_EVIDENCE), each keyed by the row's
reference.
docs/known-bugs.md shows this table with each row's experiment and what it measured.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

from analysis.model.anomalies import AnomalyName, CountName
from harness.rundir.release import KafkaVersion

__all__ = [
    "BUG_REASON",
    "KNOWN_BUGS",
    "KnownBug",
    "bugs_explaining",
    "client_kind",
    "first_shown",
    "references_in",
]

# How a known bug's finding begins ("known bug KAFKA-17754 of Kafka 3.8.1 ..."): a cell's
# summary puts these reasons first.
BUG_REASON: Final = "known bug "


@dataclass(frozen=True)
class KnownBug:
    """One bug: the releases it affects, the count it explains, how it happens."""

    reference: str  # the JIRA, or the KIP where the fix was a design change
    explains: str  # CountName.LOSS for a loss bug, else the AnomalyName it produces
    mechanism: str
    fixed_in: str | None  # the first release with the server's side of the fix; None: open
    first_affected: str | None  # None: every release before fixed_in
    # The release of the row's client family (client_family; the Java client for a server's
    # bug) from which the client has its side of the fix. A server's bug whose fix needs the
    # client too (KIP-890: the client bumps its epoch per transaction) stays affecting, past
    # fixed_in, every producer without it (librdkafka); a client's own bug with no server
    # fix (fixed_in None) ends with this release of its client. None: no client fix.
    client_fixed_in: str | None = None
    # The client family whose bug it is ("librdkafka"): producers of other clients are never
    # affected, whatever the server's release. None: a server's bug, every client.
    client_family: str | None = None
    # Other families' releases with the client side of a server's fix, (family, release):
    # KIP-890's epoch bump is not only Java's.
    also_fixed_in: tuple[tuple[str, str], ...] = ()
    # The first release of the row's client family (Java for None) the bug affects; None:
    # every release before the fix.
    client_first_affected: str | None = None
    # Other families' first affected releases, (family, release), beside client_first_affected:
    # a server's bug of transaction version 2 reaches every client that speaks it.
    also_first_affected: tuple[tuple[str, str], ...] = ()
    # Releases past fixed_in that lack the fix all the same: a later line branched before the
    # fix and was released without it (bench/fix_in_releases.py reads the jars).
    still_in: tuple[str, ...] = ()
    # The first releases of older lines that carry a backport of the fix (4.2.2 for a fix of
    # 4.3.1): the releases of such a line from it on are not affected.
    backported_in: tuple[str, ...] = ()
    log_needles: tuple[str, ...] = ()  # broker-log fragments quoted as evidence
    experiment: str = ""  # the experiment file (and cell) that provokes it

    def affects(self, version: str | None, client: str | None = None) -> bool:
        """True when Kafka `version` lies in the affected range, or past it while the
        producer's `client` (CellConfig.client: "java 4.3.1", "franz-go 1.21.5"; None for
        librdkafka) lacks its side of the fix, and never for a client before its first
        affected release (client_first_affected, also_first_affected); a client's bug
        (client_family) affects that family's producers only, and, with no server fix, only
        its releases before client_fixed_in. An image of unknown version is affected by
        nothing."""
        if self.client_family is not None and client_kind(client) != self.client_family:
            return False
        family = self.client_family or "java"
        if self.client_first_affected is not None:
            firsts = ((family, self.client_first_affected), *self.also_first_affected)
            if not any(_client_at_least(client, kind, first) for kind, first in firsts):
                return False
        try:
            release = KafkaVersion.parse(version or "")
        except ValueError:
            return False
        if self.first_affected is not None and release < KafkaVersion.parse(self.first_affected):
            return False
        if any(_same_line_from(release, KafkaVersion.parse(b)) for b in self.backported_in):
            return False
        if self.fixed_in is not None and release < KafkaVersion.parse(self.fixed_in):
            return True
        if any(release == KafkaVersion.parse(unfixed) for unfixed in self.still_in):
            return True
        if self.client_fixed_in is None and not self.also_fixed_in:
            return self.fixed_in is None  # no client fix: open, or fixed by the server alone
        return not self.client_protected(client)

    def client_protected(self, client: str | None) -> bool:
        """Whether `client` has the client side of the fix: the row's family (Java for a
        server's bug) at client_fixed_in or later, or another family at its also_fixed_in."""
        family = self.client_family or "java"
        fixes = ((family, self.client_fixed_in), *self.also_fixed_in)
        return any(_client_at_least(client, kind, release) for kind, release in fixes if release)

    def fixed_where(self) -> str:
        """Where the fix lies, as a reason says it."""
        if self.fixed_in is None and self.client_fixed_in is None:
            return "open upstream: no release fixes it yet"
        if self.fixed_in is None:
            return f"fixed in {self.client_family or 'the Java client'} {self.client_fixed_in}"
        if self.client_fixed_in is None:
            unfixed = f", not in {', '.join(self.still_in)}" if self.still_in else ""
            ported = ", ".join(self.backported_in)
            backports = f", backported to {ported}" if ported else ""
            return f"fixed in {self.fixed_in}{backports}{unfixed}"
        java = f"fixed in {self.fixed_in} with the Java client {self.client_fixed_in} or later"
        others = ", ".join(f"{kind} {release}" for kind, release in self.also_fixed_in)
        return f"{java} (or {others} or later)" if others else java

    def reason(self, version: str | None, client: str = "") -> str:
        """How a finding of it begins: 'known bug <reference> of Kafka <version> (with
        <client>) (<fixed_where>): <mechanism>'."""
        kafka = f"Kafka {version} with {client}" if client else f"Kafka {version}"
        return f"{BUG_REASON}{self.reference} of {kafka} ({self.fixed_where()}): {self.mechanism}"


def _same_line_from(release: KafkaVersion, first: KafkaVersion) -> bool:
    """Whether `release` is `first` or a later release of its line (4.2.x for 4.2.2; 0.11.0.x
    for 0.11.0.3)."""
    line = 2 if first.key[0] >= 1 else 3
    return release.key[:line] == first.key[:line] and release >= first


def client_kind(client: str | None) -> str:
    """The family of CellConfig.client: "librdkafka" (also for None), "java", "command"."""
    return (client or "librdkafka").partition(" ")[0]


def _client_at_least(client: str | None, family: str, release: str) -> bool:
    """Whether `client` ("java 4.3.1", "franz-go 1.22.3") is of `family` at `release` or
    later (a client without a release, librdkafka's in-process one, never is)."""
    kind, _, version = (client or "librdkafka").partition(" ")
    if kind != family:
        return False
    try:
        return KafkaVersion.parse(version) >= KafkaVersion.parse(release)
    except ValueError:
        return False


KAFKA_17754_SERVER = "server-side defense: KIP-890, transaction version 2 in 4.0"


def _kafka_17754(explains: AnomalyName, mechanism: str) -> KnownBug:
    """A row of KAFKA-17754 (Jepsen 2024): the transaction protocol assumes ordered delivery;
    one row per anomaly it explains, the same range and experiment for each."""
    return KnownBug(
        reference="KAFKA-17754",
        explains=explains,
        mechanism=f"{mechanism} ({KAFKA_17754_SERVER})",
        fixed_in="4.0.0",
        first_affected="3.0.0",
        client_fixed_in="4.0.0",
        # franz-go bumps its epoch per transaction on transaction version 2 from 1.19.3: KIP-890
        # came with twmb/franz-go#960 in 1.19.0, and 1.19.2 and 1.19.3 fixed its opt-in
        # ("fully fixes ... the KIP-890 problem", its CHANGELOG).
        also_fixed_in=(("franz-go", "1.19.3"),),
        experiment="experiments/jepsen-2024-late-connections.yaml",
    )


KNOWN_BUGS: Final[tuple[KnownBug, ...]] = (
    KnownBug(
        reference="KAFKA-1211",
        explains=CountName.LOSS,
        mechanism="a follower truncated to its high watermark (which trails the leader's by a "
        "fetch round) when it restarted or became follower, then was elected leader without the "
        "acknowledged tail",
        fixed_in="0.11.0",
        first_affected=None,
        log_needles=("Truncating log",),
        experiment="experiments/kafka-history.yaml (scenario=hw-truncation-*)",
    ),
    KnownBug(
        reference="KAFKA-6361",
        explains=CountName.LOSS,
        mechanism="replicas diverged after fast successive leader failovers",
        fixed_in="2.0.0",
        first_affected="0.11.0",
        log_needles=("Truncating",),
        experiment="experiments/kafka-history.yaml (scenario=hw-truncation-0.11.0.3)",
    ),
    KnownBug(
        reference="KIP-966",
        explains=CountName.LOSS,
        mechanism="last replica standing: a member of the ISR (its leader, or a follower not yet "
        "dropped) came back without its unflushed tail while the others were down, and led, "
        "although they held the data, and later writes took the lost offsets; Eligible Leader "
        "Replicas let a clean one lead instead (default for new KRaft clusters from 4.1)",
        fixed_in="4.1.0",
        first_affected=None,
        experiment="experiments/kafka-history.yaml (scenario=last-replica-*), "
        "experiments/known-bugs/kafka-fsync.yaml",
    ),
    KnownBug(
        reference="KIP-966 part 2",
        explains=CountName.LOSS,
        mechanism="the last known leader elected uncleanly: every replica of the partition had "
        "shut down uncleanly, so none stayed eligible (ELR), and the controller elected the "
        "last known leader (an UNCLEAN partition change, although unclean leader election is "
        "off) without its unflushed tail while another replica held it; KIP-966's unclean "
        "recovery, which would pick the longest log, is not released",
        fixed_in=None,
        first_affected="4.1.0",
        experiment="experiments/known-bugs/kafka-fsync.yaml (release=4.3.1-kraft)",
    ),
    KnownBug(
        reference="KAFKA-17582",
        explains=AnomalyName.POLL_SKIP,
        mechanism="a consumer's position is not moved back when the transaction that read its "
        "records aborts, unless a rebalance happens: the next committed transaction commits "
        "offsets past records no committed transaction read (Jepsen 2024; the application has "
        "to seek back to the committed offsets itself)",
        fixed_in=None,
        first_affected=None,
        experiment="experiments/known-bugs/KAFKA-17582.yaml (*reader=kept)",
    ),
    KnownBug(
        reference="KAFKA-20634",
        explains=AnomalyName.COMMIT_LOST,
        mechanism="a group coordinator whose __consumer_offsets partition became a follower "
        "stays active until it is unloaded; the high watermark re-replicated from the new leader "
        "passes over its own truncated records and completes their pending offset commits with "
        "success, so the new coordinator never holds them (apache/kafka#22444 gates the high "
        "watermark on the leader epoch)",
        fixed_in="4.3.1",
        first_affected="4.0.0",
        backported_in=("4.2.2",),  # apache/kafka#22444's backport; the jar probe finds it
        log_needles=("HighWatermarkUpdate failed",),
        experiment="experiments/known-bugs/KAFKA-20634.yaml",
    ),
    KnownBug(
        reference="KAFKA-20785",
        explains=AnomalyName.COMMIT_INVALID_STATE,
        mechanism="under transaction version 2 the coordinator's own abort of a transaction "
        "that outlived its timeout bumps the producer epoch; a commit sent before the abort "
        "carries the epoch below, which the coordinator takes for a retry of an ended "
        "transaction, and its state check (COMPLETE_ABORT, but COMMIT asked) answers "
        "INVALID_TXN_STATE, fatal to the producer, where version 1 answers PRODUCER_FENCED "
        "(apache/kafka#23204 answers PRODUCER_FENCED there too)",
        fixed_in="4.3.2",
        first_affected="4.0.0",
        still_in=("4.4.0",),  # released from a branch cut before the fix reached trunk
        # The clients of transaction version 2: Java from 4.0, franz-go from 1.19.3.
        client_first_affected="4.0.0",
        also_first_affected=(("franz-go", "1.19.3"),),
        log_needles=("but received transaction marker result to send: COMMIT",),
        experiment="experiments/known-bugs/KAFKA-20785.yaml (release=4.3.1)",
    ),
    KnownBug(
        reference="KAFKA-20090",
        explains=AnomalyName.TXN_HANGING,
        mechanism="under transaction version 2 a transaction that times out at producer epoch "
        "32,766 is fenced to 32,767 and aborted without a new producer id; its late abort "
        "passes for a retry, and the producer goes on at 32,767. When a transaction at that "
        "epoch times out in turn, the coordinator refuses to fence it (Cannot fence producer "
        "with epoch equal to Short.MaxValue) and leaves it open, so the last stable offset of "
        "its partitions stops (apache/kafka#21469 logs and goes on, #21506 gives such an "
        "abort a new producer id)",
        fixed_in="4.3.0",
        first_affected="4.0.0",
        # Transaction version 2 from the client too: Java from 4.0, franz-go from 1.19.3.
        client_first_affected="4.0.0",
        also_first_affected=(("franz-go", "1.19.3"),),
        log_needles=("Cannot fence producer with epoch equal to Short.MaxValue",),
        experiment="experiments/known-bugs/KAFKA-20090.yaml",
    ),
    KnownBug(
        reference="KAFKA-20716",
        explains=CountName.TXN_COMMITTED_HIDDEN,
        mechanism="an unclean leader election makes leader a replica that holds a "
        "transaction's records but not the COMMIT or ABORT marker the coordinator wrote to the "
        "old leader; the coordinator has completed the transaction and sends no marker again, "
        "so the new leader's last stable offset stays at the transaction's first offset and "
        "read_committed readers see nothing past it, unless the same producer writes the "
        "partition again (open: the maintainers hold that an unclean election cannot keep "
        "exactly-once, and apache/kafka#22937 documents it)",
        fixed_in=None,
        first_affected=None,
        log_needles=("UNCLEAN partition change",),
        experiment="experiments/known-bugs/KAFKA-20716.yaml (unclean=on)",
    ),
    KnownBug(
        reference="KAFKA-19012",
        explains=AnomalyName.MISPLACED,
        mechanism="the Java producer returns a batch's pooled buffer to its pool when the batch "
        "expires or its connection breaks, while the network thread may still be sending it; "
        "the buffer, refilled with another batch, goes out under the first request's topic and "
        "partition, which the record checksum does not cover: records land on another "
        "partition or topic, or carry another message's bytes (clients from 2.8.0, which "
        "stopped copying the buffer before the send; apache/kafka#21065 stops reusing it)",
        fixed_in=None,
        first_affected=None,
        client_family="java",
        client_first_affected="2.8.0",
        client_fixed_in="4.1.2",
        experiment="experiments/known-bugs/KAFKA-19012.yaml",
    ),
    KnownBug(
        reference="librdkafka#4953",
        explains=AnomalyName.DUPLICATED,
        mechanism="the idempotent librdkafka producer bumps its producer epoch after a message "
        "timeout or an error whose write may have been persisted, restarts its sequence "
        "numbers and sends its queue again, so the broker cannot tell the new epoch's copies "
        "from the writes the old one already made: acknowledged messages are duplicated "
        "(every librdkafka release up to at least 2.16.0; the fix proposed in "
        "confluentinc/librdkafka#4972 is not merged; the Java client does not bump the epoch "
        "on the out-of-order responses that follow a failed request)",
        fixed_in=None,
        first_affected=None,
        client_family="librdkafka",
        experiment="experiments/known-bugs/librdkafka-4953.yaml (client=librdkafka)",
    ),
    KnownBug(
        reference="franz-go@6ecd2f9f",
        explains=AnomalyName.ABORTED_READ,
        mechanism="franz-go before 1.21.6 forgets a transaction whose EndTxn failed with an "
        "unconfirmed outcome (timed out, retries exhausted, UNKNOWN_SERVER_ERROR): the "
        "documented retry of EndTransaction returns nil sending nothing and the producer keeps "
        "its epoch, so under transaction version 2 (KIP-890 part 2) the next transaction's "
        "sends join the transaction still open on the coordinator and its commit (or an earlier "
        "transaction's held EndTxn, in the same epoch) commits the earlier one's messages, "
        "which the producer meant to abort (the fix, commit 6ecd2f9f in franz-go 1.21.6's "
        "CHANGELOG, flags the producer id for reload, and the InitProducerId that follows "
        "aborts the open transaction)",
        fixed_in=None,
        first_affected="4.0.0",
        client_fixed_in="1.21.6",
        client_family="franz-go",
        experiment="experiments/known-bugs/franz-go-endtxn.yaml "
        "(client=franz-go-1.21.5__on_timeout=retry)",
    ),
    *(
        _kafka_17754(explains, mechanism)
        for explains, mechanism in (
            (
                AnomalyName.ABORTED_READ,
                "a delayed EndTxn (commit) or produce of an earlier transaction reaches the "
                "broker after the producer moved on, in the same producer epoch, and commits or "
                "joins a later transaction: writes the producer never committed become visible",
            ),
            (
                AnomalyName.COMMITTED_LOST,
                "a delayed EndTxn (abort) of an earlier transaction reaches the coordinator "
                "after the producer moved on, in the same producer epoch, and aborts a later "
                "transaction: writes of a committed transaction are lost or torn",
            ),
            (
                AnomalyName.G0,
                "a delayed produce of an earlier transaction lands after the producer moved "
                "on, behind a later transaction's writes in one partition but not in another, "
                "so the committed transactions follow one another in a cycle",
            ),
            (
                AnomalyName.G1C,
                "a delayed produce of an earlier transaction lands after the producer moved "
                "on, behind a later transaction's writes in one partition but not in another, "
                "so the committed transactions follow one another in a cycle with what they "
                "read",
            ),
        )
    ),
)


def bugs_explaining(explains: str) -> tuple[KnownBug, ...]:
    """The rows that explain `explains` (CountName.LOSS or an AnomalyName), in table order."""
    return tuple(bug for bug in KNOWN_BUGS if bug.explains == explains)


def first_shown(
    explains: str, version: str | None, client: str | None, shown: Callable[[KnownBug], str]
) -> tuple[KnownBug, str] | None:
    """The first row explaining `explains` that affects `version` and `client` and whose
    evidence the run shows, with that evidence in words (`shown`: '' when it does not show);
    None when no row does."""
    for bug in bugs_explaining(explains):
        if bug.affects(version, client) and (evidence := shown(bug)):
            return bug, evidence
    return None


def references_in(reasons: Iterable[str]) -> frozenset[str]:
    """The references of the rows whose findings (KnownBug.reason) are among `reasons`: read
    against the table, since a reference may hold spaces ("KIP-966 part 2")."""
    return frozenset(
        bug.reference
        for bug in KNOWN_BUGS
        for reason in reasons
        if f"{BUG_REASON}{bug.reference} of " in reason
    )
