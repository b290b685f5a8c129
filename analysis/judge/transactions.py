"""What Kafka documents about transactions, and the findings of a transactional repetition.

docs/kafka-reliability.md, section "Transactions (exactly-once)": to read_committed readers a
committed transaction is visible whole, once committed, and an aborted one never. The
judgement rules (same section):

- an aborted read is a violation on every configuration (read_committed filters aborted
  transactions whatever the durability settings), or KNOWN-BUG on a release with a known
  transactional bug whose pattern the run shows;
- a committed message that is in the log (read_uncommitted) but not visible to
  read_committed is a violation of visibility (held back by the last stable offset), or
  KNOWN-BUG KAFKA-20716 after an unclean election of a partition of the topic;
- a torn or lost committed transaction is a violation exactly when the loss of its messages
  is (transactions are as durable as the acks and ISR settings make each write); otherwise it
  is reported beside the allowed loss;
- committed transactions in a cycle of write order (G0) or of write order and reads (G1c) are
  a violation on every configuration (one producer's transactions run one after the other,
  and its sends keep their order per partition), or KNOWN-BUG as for an aborted read;
- a commit refused with INVALID_TXN_STATE after its transaction outlived its timeout
  (analysis.checks.timed_out_commits) is a violation (the coordinator's timeout abort fences
  it: PRODUCER_FENCED), or KNOWN-BUG as for an aborted read (KAFKA-20785);
- a last stable offset held below the high watermark past transaction.timeout.ms and the
  coordinator's sweep, outside faults (analysis.checks.hanging) is a violation (the coordinator
  aborts a transaction left open by then), or KNOWN-BUG as for an aborted read (KAFKA-20090);
  with unclean leader election enabled, KNOWN-BUG KAFKA-20716 after a logged unclean election
  (the lost marker holds it), else UNKNOWN (KAFKA-7408).

Each violation is UNKNOWN instead where several page caches of a partition it names were lost
together before it (docs/kafka-reliability.md says why).

A repetition whose transactional record is in doubt (no transactions.parquet, an incomplete
read_uncommitted read-back) is UNKNOWN.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Final

from analysis.judge.broker_logs import log_evidence
from analysis.judge.history import PartitionHistory, partition_histories
from analysis.judge.known_bugs import first_shown
from analysis.judge.mechanisms import UNCLEAN_NEEDLES, caches_lost
from analysis.judge.outcomes import Examples, Finding, Verdict
from analysis.model.anomalies import AnomalyName, CountName, Counts, anomaly
from analysis.model.evidence import RunEvidence
from analysis.model.results import Example
from harness.rundir.config import CellConfig
from harness.rundir.events import FaultEnd
from harness.rundir.spec import RunSpec, RunSpecError
from harness.rundir.transactions import TxnOutcome, commit_never_requested, read_transactions

__all__ = [
    "RUN_EVIDENCE",
    "transaction_breaches",
    "transaction_findings",
]

SECTION: Final = "docs/kafka-reliability.md, “Transactions (exactly-once)”"
ABORTED_CITATION: Final = (
    f"{SECTION}: “messages of an aborted transaction must never become visible to them” "
    "(read_committed)"
)
VISIBLE_CITATION: Final = (
    f"{SECTION}: “Messages from a transactional producer become visible to read_committed "
    "consumers only once their transaction commits” — and once it commits, they do"
)
ATOMIC_CITATION: Final = (
    f"{SECTION}: “To read_committed readers a committed transaction is all or nothing”"
)
DURABLE_CITATION: Final = (
    f"{SECTION}: a committed transaction is as durable as the acks and ISR settings make each "
    "of its writes; its loss is judged as theirs"
)
ORDER_CITATION: Final = (
    f"{SECTION}: “one transactional producer runs its transactions one after the other, and "
    "Kafka keeps one idempotent producer's sends in order per partition”, so “no cycle can form "
    "among them”"
)
FENCED_CITATION: Final = (
    f"{SECTION}: a transaction that outlived transaction.timeout.ms is fenced, and a commit of "
    "it is answered PRODUCER_FENCED, which the application answers with a new producer, not "
    "the fatal INVALID_TXN_STATE"
)
TIMEOUT_CITATION: Final = (
    "Kafka's producer configuration, transaction.timeout.ms: “The maximum amount of time in "
    "ms that the transaction coordinator will wait for a transaction status update from the "
    "producer before proactively aborting the ongoing transaction” (docs/kafka-reliability.md, "
    "“The last stable offset”)"
)
TXN_FACTS_KEY: Final = CountName.TXN_COMMITTED  # in the counts of every transactional run
CYCLE_CLASSES: Final = (AnomalyName.G0, AnomalyName.G1C)
# Aged this far (workload.transactions.age_commits), a transactional.id reaches epoch 32,766
# within the run's first transactions.
EPOCH_NEAR_LIMIT: Final = 32_000


END_TXN_API_KEY: Final = 26  # Kafka's protocol: EndTxn, the commit or abort of a transaction


def _fault_hit_coordinator_or_leader(events: RunEvidence, quoted: Sequence[Example]) -> str:
    """What held an EndTxn or produce up, as the pattern needs: an EndTxn held until a witness
    transaction was open (late_end_txn), else the first fault that made requests arrive late
    (a shaped fault with direction: in), else the run's first fault."""
    if landed := late_end_txn(events, quoted):
        return landed
    starts = list(events.fault_starts)
    late = [e for e in starts if _arrives_late(e.detail)]
    for event in late or starts:
        how = (
            f"made requests to nodes {event.nodes} arrive late ({event.detail.get('delay_ms')} ms)"
            if event in late
            else f"held requests of an open transaction up (nodes {event.nodes})"
        )
        return f"{event.fault} of {event.target} {how}"
    return ""


def late_end_txn(events: RunEvidence, quoted: Sequence[Example]) -> str:
    """The EndTxn that reached its broker while a witness transaction was open: a connection
    a shaped fault held from an EndTxn on (the shaper names it, with when its first packet
    came) whose hold ended between the transaction's begin and end (Example.from_us, to_us);
    '' when no held EndTxn landed inside a witness."""
    delays = {
        e.fault_id: float(e.detail.get("delay_ms") or 0)
        for e in events.fault_starts
        if isinstance(e.detail, dict)
    }
    for example in quoted:
        if example.txn is None or example.from_us is None or example.to_us is None:
            continue
        for end in events.fault_ends:
            for host, connection, held_us in _held_end_txns(end):
                landed_us = held_us + int(delays.get(end.fault_id, 0) * 1000)
                if example.from_us <= landed_us <= example.to_us:
                    return (
                        f"an EndTxn sent at {_clock(held_us)} on connection {connection} was "
                        f"held by {end.fault} (fault {end.fault_id}) at {host} until "
                        f"{_clock(landed_us)}, while transaction {example.txn} was open "
                        f"({_clock(example.from_us)} to {_clock(example.to_us)}): it ended "
                        f"transaction {example.txn}, not its own"
                    )
    return ""


def _held_end_txns(end: FaultEnd) -> list[tuple[str, str, int]]:
    """(host, connection, first packet's time) of each connection a shaped fault held from
    an EndTxn on, from the shaper's figures in the fault's end detail."""
    shaper = end.detail.get("shaper") if isinstance(end.detail, dict) else None
    held = []
    for host, figures in (shaper or {}).items():
        for connection, hold in ((figures or {}).get("held_connections") or {}).items():
            if isinstance(hold, dict) and hold.get("api_key") == END_TXN_API_KEY:
                held.append((host, connection, int(hold["at_us"])))
    return held


def _clock(ts_us: int) -> str:
    """A time of day, UTC, to the millisecond."""
    return datetime.fromtimestamp(ts_us / 1e6, UTC).strftime("%H:%M:%S.%f")[:-3]


def _end_unconfirmed(events: RunEvidence, quoted: Sequence[Example]) -> str:
    """franz-go@6ecd2f9f's pattern: a transaction read committed although the producer only ever
    asked to abort it, whose abort failed and was retried on the same client (no new client
    for it: no "on timeout: reinit"), the outcome reported unknown (the retried
    EndTransaction returned nil without sending anything); '' otherwise."""
    table = read_transactions(events.run_dir)
    if table is None:
        return ""
    rows = {row["txn"]: row for row in table.to_pylist()}
    for example in quoted:
        row = rows.get(example.txn)
        if row is None or row["outcome"] != TxnOutcome.UNKNOWN:
            continue
        if not commit_never_requested(row["intent"], row["error"]):
            continue
        clauses = (row["error"] or "").split("; ")
        failed = [c for c in clauses if c.startswith("abort: ")]
        if failed and "on timeout: reinit" not in clauses:
            return (
                f"transaction {example.txn} was only ever to be aborted; its abort failed "
                f"({failed[0]}) and was retried on the same client, which kept its epoch, so a "
                "commit in that epoch (the next transaction's, or an earlier one's held EndTxn) "
                "committed its messages"
            )
    return ""


def _outlived_timeout(events: RunEvidence, quoted: Sequence[Example]) -> str:
    """KAFKA-20785's pattern: a commit refused after its transaction outlived its timeout (the
    check counts no other), with the fault that held the commit up when one ran; '' without
    such a transaction."""
    held = (
        f"; {late[0].fault} of {late[0].target} held requests to nodes {late[0].nodes}"
        if (late := [e for e in events.fault_starts if _arrives_late(e.detail)])
        else ""
    )
    for e in quoted:
        if e.from_us is None or e.to_us is None:
            continue
        return (
            f"transaction {e.txn} was open {(e.to_us - e.from_us) / 1e6:.1f} s "
            f"({_clock(e.from_us)} to {_clock(e.to_us)}), past its timeout, so the coordinator "
            f"had aborted it and bumped the epoch before the commit arrived{held}"
        )
    return ""


def _aged_to_the_limit(events: RunEvidence, quoted: Sequence[Example]) -> str:
    """KAFKA-20090's pattern: the workload's transactional.id was aged to within a few
    transactions of the epoch's limit (workload.transactions.age_commits), so a transaction
    can time out at epoch 32,766 and the next at 32,767; '' otherwise."""
    try:
        workload = RunSpec.read(events.run_dir).workload
    except (OSError, RunSpecError):
        return ""
    transactions = workload.get("transactions")
    aged = transactions.get("age_commits") if isinstance(transactions, dict) else None
    if not isinstance(aged, int) or aged < EPOCH_NEAR_LIMIT:
        return ""
    return (
        f"the transactional.id was aged by {aged:,} commits, so its first transactions ran at "
        "producer epochs 32,766 and 32,767, the limit, where the coordinator cannot fence"
    )


def _unclean_election_logged(events: RunEvidence, quoted: Sequence[Example]) -> str:
    """KAFKA-20716's pattern: a controller logged an unclean election of a partition of the
    run's topic (the new leader may hold a transaction's records without its marker); '' when
    none did or the logs were not kept."""
    try:
        topic = RunSpec.read(events.run_dir).topic
    except (OSError, RunSpecError):
        return ""
    needle = UNCLEAN_NEEDLES[:1]  # the KRaft controller's words
    for partition in range(topic.partitions or 0):
        if line := log_evidence(str(events.run_dir), topic.name or "", partition, needle):
            return (
                f"p{partition} was elected uncleanly, so its new leader may hold a transaction's "
                f"records without the marker the coordinator wrote to the old one ({line})"
            )
    return ""


def _arrives_late(detail: object) -> bool:
    """A fault's detail says it made requests arrive late (a shaped fault, direction: in)."""
    return isinstance(detail, dict) and detail.get("direction") == "in"


# Per transactional row of the known-bug table, by reference: what the run's events must
# show ('' when they do not).
RUN_EVIDENCE: Final[dict[str, Callable[[RunEvidence, Sequence[Example]], str]]] = {
    "KAFKA-17754": _fault_hit_coordinator_or_leader,
    "franz-go@6ecd2f9f": _end_unconfirmed,
    "KAFKA-20785": _outlived_timeout,
    "KAFKA-20716": _unclean_election_logged,
    "KAFKA-20090": _aged_to_the_limit,
}


def is_transactional(config: CellConfig, counts: Mapping[str, object]) -> bool:
    """The repetition ran transactions (its config says so, or it has transactional facts)."""
    return bool(config.transactions) or TXN_FACTS_KEY in counts


def transaction_breaches(
    config: CellConfig, counts: Mapping[str, object], events: RunEvidence
) -> list[str]:
    """Reasons the transactional record is in doubt (nothing for a plain run)."""
    if not config.transactions:
        return []
    if TXN_FACTS_KEY not in counts:
        return ["a transactional run without transaction outcomes (transactions.parquet)"]
    uncommitted = (events.readback.uncommitted or {}) if events.readback else {}
    if uncommitted.get("complete") is not True:
        return ["the read_uncommitted read-back is incomplete or was not recorded"]
    return []


def transaction_findings(
    config: CellConfig,
    counts: Counts,
    events: RunEvidence,
    examples: Examples | None = None,
    *,
    loss_is_violation: bool,
    origin_us: float = 0.0,
    histories: Mapping[int, PartitionHistory] | None = None,
) -> list[Finding]:
    """The findings of a transactional repetition (see the module docstring); `examples` are
    the run's (with `txn`), quoted in the reasons; `origin_us`: t=0 of its timeline;
    `histories`: its partitions' (read from `events` when not given)."""
    if not is_transactional(config, counts):
        return []
    run = _Run(config, counts, events, examples or {}, origin_us, histories)
    findings = _aborted_findings(run)
    if hidden := int(counts.get(CountName.TXN_COMMITTED_HIDDEN, 0)):
        findings.append(_hidden_finding(run, hidden))
    if finding := _torn_or_lost_finding(run, loss_is_violation):
        findings.append(finding)
    findings += [f for name in CYCLE_CLASSES if (f := _cycle_finding(run, name))]
    if finding := _refused_commit_finding(run):
        findings.append(finding)
    if finding := _hanging_finding(run):
        findings.append(finding)
    findings.append(Finding(None, Verdict.PASS, _summary(counts)))
    return findings


@dataclass(frozen=True)
class _Run:
    """What the findings of a transactional repetition read: the cell's config, and the run's
    counts, events and examples."""

    config: CellConfig
    counts: Counts
    events: RunEvidence
    examples: Examples
    origin_us: float = 0.0
    histories: Mapping[int, PartitionHistory] | None = None  # None: read from events

    def quoted(self, name: AnomalyName, most: int = 3) -> tuple[Example, ...]:
        """The first `most` examples of a class, the ones a reason quotes."""
        return tuple(self.examples.get(name) or ())[:most]

    def forbidden(
        self,
        name: AnomalyName | CountName,
        what: str,
        detail: str,
        quoted: tuple[Example, ...],
        witnesses: Sequence[Example] | None = None,
    ) -> Finding:
        """KNOWN-BUG when the first transactional bug that explains `name` (an anomaly class,
        or a fact such as hidden commits, which makes a finding about no class) on this release
        and client shows its pattern (read from the events and every example the check kept,
        `witnesses`: those of `name` unless given); else VIOLATION, saying `detail`, or
        UNKNOWN where a partition they name lost several page caches together."""
        kept = self.examples.get(name) or () if witnesses is None else witnesses
        version, client = self.config.kafka_version, self.config.client
        found = first_shown(
            name, version, client, lambda bug: RUN_EVIDENCE[bug.reference](self.events, kept)
        )
        subject = name if isinstance(name, AnomalyName) else None
        # A hold is seen while it lasts; the others at the read-back, after every fault.
        held = [e.to_us for e in kept if e.to_us] if name == AnomalyName.TXN_HANGING else []
        if found is None and (how := self.caches_lost(kept, max(held, default=math.inf))):
            why = "the writes that end a transaction (markers, the coordinator's record) are as"
            detail = (
                f"{detail}; but {how}: {why} durable as those caches, and Kafka documents losing "
                "several at once only as a power loss of all, with no outcome for transactions"
            )
            return Finding(subject, Verdict.UNKNOWN, detail, quoted)
        if found is None:
            return Finding(subject, Verdict.VIOLATION, detail, quoted)
        bug, evidence = found
        detail = f"{bug.reason(version, client or 'librdkafka')}; {what}; {evidence}"
        return Finding(subject, Verdict.KNOWN_BUG, detail, quoted)

    def caches_lost(self, kept: Sequence[Example], until: float) -> str:
        """How several page caches of a partition the examples name (any partition, when they
        name none) were lost together by `until` (mechanisms.caches_lost); '' when not."""
        histories = self.histories or partition_histories(self.events) or {}
        named = {e.partition for e in kept if e.partition is not None} or set(histories)
        for p in sorted(p for p in named if p in histories):
            before = tuple(h for h in histories[p].hits if h.ts_us <= until)
            if how := caches_lost(replace(histories[p], hits=before), self.config, self.origin_us):
                return how
        return ""


def _hidden_finding(run: _Run, hidden: int) -> Finding:
    """Committed messages in the log but invisible to read_committed: a violation of
    visibility, or a known bug whose pattern the run shows."""
    what = (
        f"hidden commits: {hidden} committed messages are in the log (read_uncommitted) but "
        "invisible to read_committed"
    )
    name = CountName.TXN_COMMITTED_HIDDEN
    return run.forbidden(name, what, f"{what}; {VISIBLE_CITATION}", ())


def _torn_or_lost_finding(run: _Run, loss_is_violation: bool) -> Finding | None:
    """Committed transactions lost or torn: judged as the loss of their messages is (None when
    there is none), a known bug where one explains them. Torn transactions are lost ones too,
    so the finding is committed_lost's."""
    lost_name, torn_name = AnomalyName.COMMITTED_LOST, AnomalyName.TORN_TRANSACTION
    torn, lost = run.counts.get(torn_name, 0), run.counts.get(lost_name, 0)
    if not (torn or lost):
        return None
    quoted = run.quoted(torn_name)
    what = (
        f"{lost} {anomaly(lost_name).label} ({anomaly(lost_name).meaning}), "
        f"{torn} {anomaly(torn_name).label}{_shown(quoted)}"
    )
    if not loss_is_violation:
        detail = f"{what}; allowed with the loss: {DURABLE_CITATION}"
        return Finding(lost_name, Verdict.PASS, detail, quoted)
    witnesses = (*(run.examples.get(lost_name) or ()), *(run.examples.get(torn_name) or ()))
    detail = f"torn or lost transactions: {what}; {ATOMIC_CITATION}"
    return run.forbidden(lost_name, what, detail, quoted, witnesses)


def _cycle_finding(run: _Run, name: AnomalyName) -> Finding | None:
    """Committed transactions in a cycle (G0, G1c): a violation, or a known bug whose pattern
    the run shows; None when there is none."""
    if not (found := int(run.counts.get(name, 0))):
        return None
    quoted = run.quoted(name)
    cycles = "; ".join(row.cycle or "" for row in quoted)
    what = f"{found} {anomaly(name).label} ({anomaly(name).meaning}; e.g. {cycles})"
    return run.forbidden(name, what, f"{what}; {ORDER_CITATION}", quoted)


def _refused_commit_finding(run: _Run) -> Finding | None:
    """Commits refused with INVALID_TXN_STATE after their transaction's timeout: a violation,
    or a known bug whose pattern the run shows; None when there is none."""
    name = AnomalyName.COMMIT_INVALID_STATE
    if (found := _spans(run, name, lambda e, s: f"txn {e.txn} open {s:.1f} s")) is None:
        return None
    quoted, what = found
    return run.forbidden(name, what, f"{what}; {FENCED_CITATION}", quoted)


def _spans(
    run: _Run, name: AnomalyName, describe: Callable[[Example, float], str]
) -> tuple[tuple[Example, ...], str] | None:
    """The quoted examples of a class whose examples span time (from_us, to_us), and what
    the finding says of them (`describe`: an example and its seconds); None without any."""
    if not (found := int(run.counts.get(name, 0))):
        return None
    quoted = run.quoted(name)
    shown = ", ".join(
        describe(e, (e.to_us - e.from_us) / 1e6)
        for e in quoted
        if e.to_us is not None and e.from_us is not None
    )
    return quoted, f"{found} {anomaly(name).label} ({anomaly(name).meaning}; e.g. {shown})"


def _hanging_finding(run: _Run) -> Finding | None:
    """Transactions left open past their timeout (a last stable offset held): a violation, a
    known bug whose pattern the run shows, UNKNOWN with unclean election on; None when there
    is none."""
    name = AnomalyName.TXN_HANGING
    held = _spans(run, name, lambda e, s: f"p{e.partition} held at offset {e.offset} for {s:.0f} s")
    if held is None:
        return None
    quoted, what = held
    if run.config.unclean_leader_election:
        # The marker an unclean election lost holds the last stable offset as it hides commits:
        # KAFKA-20716's finding when its pattern shows, else the question stays open.
        lost_marker = run.forbidden(CountName.TXN_COMMITTED_HIDDEN, what, what, quoted)
        if lost_marker.verdict == Verdict.KNOWN_BUG:
            return replace(lost_marker, anomaly=name)
        detail = (
            f"{what}; with unclean leader election enabled a new leader can lack a marker the "
            "coordinator never writes again (KAFKA-7408, open; KAFKA-20716)"
        )
        return Finding(name, Verdict.UNKNOWN, detail, quoted)
    return run.forbidden(name, what, f"{what}; {TIMEOUT_CITATION}", quoted)


def _shown(rows: Sequence[Example]) -> str:
    """' (e.g. txn 4: msg_id 21 at p0@7, ...)' for the examples quoted, or ''."""
    shown = ", ".join(f"txn {r.txn}: msg_id {r.msg_id} at p{r.partition}@{r.offset}" for r in rows)
    return f" (e.g. {shown})" if rows else ""


def _aborted_findings(run: _Run) -> list[Finding]:
    """Aborted reads: a violation, or a known bug whose pattern the run shows; a note when no
    aborted message reached the log, so that nothing was tested."""
    name, counts = AnomalyName.ABORTED_READ, run.counts
    if not (aborted := int(counts.get(name, 0))):
        if counts.get(CountName.TXN_ABORTED, 0) and not counts.get(CountName.TXN_ABORTED_IN_LOG, 0):
            detail = (
                "no message of an aborted transaction reached the log: read_committed had "
                "nothing to filter, so aborted reads were not tested"
            )
            return [Finding(name, Verdict.PASS, detail)]
        return []
    quoted = run.quoted(name)
    what = f"{aborted} {anomaly(name).label} ({anomaly(name).meaning}){_shown(quoted)}"
    return [run.forbidden(name, what, f"aborted reads: {what}; {ABORTED_CITATION}", quoted)]


def _summary(counts: Counts) -> str:
    """The transactions by outcome, as a note."""
    return (
        f"transactions: {counts.get(CountName.TXN_COMMITTED, 0)} committed, "
        f"{counts.get(CountName.TXN_ABORTED, 0)} aborted "
        f"({counts.get(CountName.TXN_ABORTED_IN_LOG, 0)} aborted messages in the log), "
        f"{counts.get(CountName.TXN_UNKNOWN, 0)} unknown outcome (judged only if never asked to "
        f"commit), {counts.get(CountName.TXN_UNJOURNALLED_SENDS, 0)} "
        "sends in no ended transaction"
    )
