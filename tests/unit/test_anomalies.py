"""The anomaly registry's typed vocabulary: the name enums agree with ANOMALIES, and every
check's counts are keyed by exactly the classes the registry says it decides."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from analysis.checks import consumers, transactions
from analysis.checks.messages import classes
from analysis.checks.messages.index import Messages, Progress
from analysis.model.anomalies import (
    ANOMALIES,
    ANOMALY_NAMES,
    COUNT_NAMES,
    SEND_COUNTS,
    AnomalyName,
    Check,
    CountName,
    classes_of,
)
from analysis.model.evidence import RunEvidence
from harness.rundir.records import Status

NONE = np.zeros(0, dtype=np.int64)
FLAGS = np.zeros(0, dtype=bool)


def test_the_anomaly_names_are_the_registry_s_in_its_order() -> None:
    assert tuple(AnomalyName) == tuple(a.name for a in ANOMALIES) == ANOMALY_NAMES
    assert all(type(a.name) is AnomalyName for a in ANOMALIES)


def test_count_names_are_the_send_counts_read_and_every_anomaly_class() -> None:
    assert (*SEND_COUNTS, CountName.READ, *AnomalyName) == COUNT_NAMES
    assert SEND_COUNTS == ("sent", "acked", "failed", "indeterminate")
    assert not set(CountName) & set(AnomalyName)
    # The send counts after `sent` are the statuses' counts, one per Status, in its order.
    assert len(SEND_COUNTS[1:]) == len(Status)


def test_counts_keyed_by_the_enums_serialise_to_the_results_json_keys() -> None:
    counts = {CountName.ACKED: 3, AnomalyName.OFFSET_DIVERGENT: 1}
    assert json.dumps(counts) == '{"acked": 3, "offset_divergent": 1}'
    assert (
        json.loads(json.dumps(counts))["offset_divergent"]
        == counts[AnomalyName("offset_divergent")]
    )


def test_every_class_is_decided_by_one_check() -> None:
    decided = [name for check in Check for name in classes_of(check)]
    assert sorted(decided) == sorted(ANOMALY_NAMES)
    assert classes_of(Check.ORDER) == (AnomalyName.REORDERED,)


def test_classify_returns_exactly_the_message_check_s_classes() -> None:
    none, flags = NONE, FLAGS
    messages = Messages(
        msg_id=none,
        in_acked=flags,
        acked_rows=none,
        status=none,
        partition=none,
        offset=none,
        send_ts=none,
        slot_read=flags,
        holder=none,
        holds_self=flags,
        reads=none,
        first_read=none,
    )
    masks = classes.classify(messages, Progress({}, {}), {})
    assert tuple(masks) == classes_of(Check.MESSAGE)
    assert all(type(name) is AnomalyName for name in masks)


def test_the_consumer_check_counts_exactly_its_classes(tmp_path: Path) -> None:
    acked = consumers.AckedOffsets(NONE, NONE, NONE)
    facts = consumers.consumer_facts(RunEvidence(tmp_path), NONE, NONE, NONE, acked)
    assert tuple(facts.counts) == tuple(facts.examples) == classes_of(Check.CONSUMERS)


def test_the_transaction_check_counts_its_classes_then_its_facts() -> None:
    txns = transactions.Transactions(
        NONE, NONE, NONE, np.zeros(0, dtype=np.int8), np.zeros(0, dtype=bool), NONE, NONE, ()
    )
    view = transactions.MessageView(NONE, FLAGS, NONE, NONE, NONE, NONE, NONE, FLAGS, NONE)
    facts = transactions.check(txns, view, None)
    assert classes_of(Check.TRANSACTIONS) == transactions.TXN_CLASSES
    assert tuple(facts.counts) == (*transactions.TXN_CLASSES, *transactions.TXN_FACTS)
    assert tuple(facts.examples) == transactions.TXN_CLASSES
