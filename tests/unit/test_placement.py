"""The placement check (analysis.checks.placement) against an oracle written here: generated
sends and read-backs, each record judged by its message's sends one record at a time; and its
judgement (analysis.judge.placement)."""

from __future__ import annotations

import re

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.checks.placement import HARNESS_KEY, MISMATCHES, misplaced_records
from analysis.judge.outcomes import Verdict
from analysis.judge.placement import judge_placement
from analysis.model.anomalies import AnomalyName, CountName
from analysis.model.evidence import RunEvidence
from analysis.model.results import Example
from harness.rundir.config import CellConfig

msg_ids = st.integers(0, 6)
keys = st.one_of(st.none(), st.sampled_from(["k0", "k1", "p1-k0", "0", "x"]))
seqs = st.one_of(st.none(), st.integers(0, 2))
partitions = st.integers(0, 2)
sent_rows = st.lists(
    st.tuples(st.one_of(st.none(), msg_ids), keys, seqs, st.one_of(st.none(), partitions)),
    max_size=12,
)
read_rows = st.lists(st.tuples(st.one_of(st.none(), msg_ids), keys, seqs, partitions), max_size=12)


def _sent(rows: list[tuple]) -> pa.Table:
    names = ["msg_id", "key", "key_seq", "partition"]
    types = [pa.int64(), pa.string(), pa.int64(), pa.int32()]
    return pa.table(
        {
            n: pa.array([r[i] for r in rows], t)
            for i, (n, t) in enumerate(zip(names, types, strict=True))
        }
    )


def _read(rows: list[tuple]) -> pa.Table:
    table = _sent(rows)
    return table.append_column("offset", pa.array(range(len(rows)), pa.int64()))


def oracle(sent: list[tuple], read: list[tuple]) -> list[tuple]:
    """(msg_id, partition, offset, mismatch) of each misplaced record, by the module's rules."""
    found = []
    for offset, (msg_id, key, seq, partition) in enumerate(read):
        if msg_id is None:
            continue
        mine = [row for row in sent if row[0] == msg_id]
        sent_partitions = {row[3] for row in mine if row[3] is not None}
        sent_keys = {row[1] for row in mine if row[1] is not None}
        sent_seqs = {row[2] for row in mine if row[2] is not None}
        harness_key = key is not None and re.fullmatch(r"(p[0-9]+-)?k[0-9]+", key)
        if sent_partitions and partition not in sent_partitions:
            found.append((msg_id, partition, offset, "partition"))
        elif sent_keys and harness_key and key not in sent_keys:
            found.append((msg_id, partition, offset, "key"))
        elif sent_seqs and seq not in sent_seqs:
            found.append((msg_id, partition, offset, "key_seq"))
    return sorted(found, key=lambda f: (f[1], f[2]))


@settings(max_examples=300, deadline=None)
@given(sent_rows, read_rows)
def test_misplaced_records_are_the_oracles(sent: list[tuple], read: list[tuple]):
    found = misplaced_records(_sent(sent), _read(read))
    got = list(zip(found.msg_id, found.partition, found.offset, found.mismatch, strict=True))
    assert got == oracle(sent, read)
    assert set(found.mismatch) <= set(MISMATCHES)
    for msg_id, where in zip(found.msg_id, found.sent_partition, strict=True):
        named = [r[3] for r in sent if r[0] == msg_id and r[3] is not None]
        assert where == (min(named) if named else None)


def test_a_record_on_its_sends_partition_with_its_key_is_in_place():
    sent = [(1, "k1", 0, 2), (1, "k1", 0, None)]  # one send reported twice, once without place
    assert misplaced_records(_sent(sent), _read([(1, "k1", 0, 2)])).msg_id == []


def test_the_record_kafka_19012_describes_is_misplaced_once():
    # Message 7 was sent to partition 0; a copy of its bytes went out under partition 1.
    sent = [(7, "k1", 3, 0), (8, "k2", 3, 1)]
    found = misplaced_records(_sent(sent), _read([(7, "k1", 3, 0), (7, "k1", 3, 1)]))
    assert found.rows(5) == [
        {"msg_id": 7, "partition": 1, "offset": 1, "sent_partition": 0, "mismatch": "partition"}
    ]


def test_the_harness_key_pattern_is_the_journals():
    assert re.fullmatch(HARNESS_KEY.strip("^$"), "p12-k3") and not re.fullmatch(
        HARNESS_KEY.strip("^$"), "3"
    )


def _judged(client: str | None, faulted: bool = True, failed: int = 12) -> list[Verdict]:
    config = CellConfig(
        kafka_version="4.3.1", client=client, acks="1", min_insync_replicas=1,
        unclean_leader_election=True, enable_idempotence=False, max_in_flight=5,
        fault_class="leader-slow",
    )  # fmt: skip
    example = Example.of(
        AnomalyName.MISPLACED,
        {"msg_id": 7, "partition": 1, "offset": 3, "sent_partition": 0, "mismatch": "partition"},
    )
    fault = {"type": "fault_start", "ts_us": 5, "fault": "slow", "target": "leader", "nodes": [1]}
    events = RunEvidence.coerce([fault] if faulted else [])
    findings = judge_placement(
        {AnomalyName.MISPLACED: 1, CountName.FAILED: failed, CountName.INDETERMINATE: 0},
        {AnomalyName.MISPLACED: [example]},
        config,
        events,
    )
    return [f.verdict for f in findings]


def test_a_misplaced_record_is_a_violation_in_every_configuration_but_a_known_bugs():
    # Even acks=1 with unclean election: no setting lets Kafka move a record.
    assert _judged("java 4.1.1") == [Verdict.KNOWN_BUG]
    assert _judged("java 4.1.2") == [Verdict.VIOLATION]
    assert _judged("java 2.7.0") == [Verdict.VIOLATION]
    assert _judged(None) == [Verdict.VIOLATION]  # librdkafka: not the Java client's bug
    assert _judged("java 4.1.1", faulted=False) == [Verdict.VIOLATION]  # no evidence
    assert _judged("java 4.1.1", failed=0) == [Verdict.VIOLATION]


def test_no_misplaced_record_no_finding():
    config = CellConfig(kafka_version="4.3.1")
    assert judge_placement({}, {}, config, RunEvidence.coerce([])) == []
