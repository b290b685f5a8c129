"""A transactional violation where page caches of several replicas were lost together: the
writes that end a transaction (markers, the coordinator's record) are as durable as those
caches, and Kafka documents no outcome for transactions in that case, so the judge says
UNKNOWN; the same anomaly without such losses, or with every append fsynced, stays a
violation."""

from __future__ import annotations

from analysis.judge.outcomes import Verdict
from analysis.judge.transactions import transaction_findings
from analysis.model.anomalies import AnomalyName, CountName
from analysis.model.evidence import RunEvidence
from analysis.model.results import Example
from harness.rundir.config import CellConfig
from tests.unit.test_caches_lost_together import every_cache_lost, two_caches_lost
from tests.unit.test_mechanisms import sample, start, us

S = 1_000_000


def aborted_read(events: list[dict], **config: object) -> list:
    """The findings on one aborted read of p0 (txn 7) over `events`."""
    counts = {
        CountName.TXN_ABORTED: 1,
        CountName.TXN_ABORTED_IN_LOG: 3,
        AnomalyName.ABORTED_READ: 1,
    }
    # The transaction ended before the losses: they can take its markers afterwards.
    read = Example(txn=7, msg_id=21, partition=0, offset=7, from_us=us(1), to_us=us(2))
    examples = {AnomalyName.ABORTED_READ: [read]}
    cell = CellConfig(kafka_version="4.3.1", client="java 4.3.1", transactions=True, **config)
    found = transaction_findings(
        cell, counts, RunEvidence.coerce(events), examples, loss_is_violation=False
    )
    return [f for f in found if f.anomaly == AnomalyName.ABORTED_READ]


def test_an_aborted_read_after_every_replicas_cache_was_lost_is_unknown() -> None:
    [finding] = aborted_read(every_cache_lost())
    assert finding.verdict == Verdict.UNKNOWN
    assert "the page cache of every replica of p0 lost" in finding.detail
    assert "messages of an aborted transaction must never become visible" in finding.detail


def test_an_aborted_read_after_two_caches_lost_in_one_outage_is_unknown() -> None:
    [finding] = aborted_read(two_caches_lost())
    assert (
        finding.verdict == Verdict.UNKNOWN and "before the first was back in sync" in finding.detail
    )


def test_an_aborted_read_with_one_cache_lost_or_every_append_fsynced_is_a_violation() -> None:
    one = [
        start(10, [1], fault="torn-write", class_kind="power-loss",
              partitions=[{"partition": 0, "leader": 3, "isr": [3, 1, 2], "replicas": [3, 1, 2]}]),
        sample(30, [(0, 3, [3, 1, 2])]),
    ]  # fmt: skip
    [finding] = aborted_read(one)
    assert finding.verdict == Verdict.VIOLATION
    [fsynced] = aborted_read(every_cache_lost(), fsync_each_message=True)
    assert fsynced.verdict == Verdict.VIOLATION
    [bare] = aborted_read([])
    assert bare.verdict == Verdict.VIOLATION


def test_a_transaction_left_open_before_the_caches_were_lost_stays_a_violation() -> None:
    """Only losses before the last moment an example shows can explain it."""
    cell = CellConfig(kafka_version="4.3.1", client="java 4.3.1", transactions=True)
    counts = {CountName.TXN_COMMITTED: 3, AnomalyName.TXN_HANGING: 1}

    def hanging(until_s: float) -> Verdict:
        held = Example(partition=0, offset=5, from_us=us(1), to_us=us(until_s))
        found = transaction_findings(
            cell,
            counts,
            RunEvidence.coerce(every_cache_lost()),
            {AnomalyName.TXN_HANGING: [held]},
            loss_is_violation=False,
        )
        (finding,) = [f for f in found if f.anomaly == AnomalyName.TXN_HANGING]
        return finding.verdict

    assert hanging(until_s=5) == Verdict.VIOLATION
    assert hanging(until_s=200) == Verdict.UNKNOWN
