"""The transactional checks on hand-made run directories: one anomaly class each."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analysis.checks import messages as checker
from analysis.checks.messages import RunInput
from harness.chaos.coordinators import java_string_hash, partition_for
from harness.rundir import layout
from harness.rundir.records import ACKED_SCHEMA, PROCESSED_SCHEMA, READBACK_SCHEMA
from harness.rundir.streams import StreamWriter
from harness.rundir.transactions import TRANSACTION_SCHEMA, TXN_READ_SCHEMA
from tests.examples import examples

T0_US = 1_700_000_000_000_000
SIZE, PARTITIONS = 3, 3
# Transaction outcomes by number: 0 and 2 committed, 1 aborted, 3 unknown; msg 12 was sent in
# a transaction that never ended (no row).
OUTCOMES = ("committed", "aborted", "committed", "unknown")
SENT = SIZE * len(OUTCOMES) + 1
COMMITTED = [m for m in range(SENT - 1) if OUTCOMES[m // SIZE] == "committed"]


def location(msg_id: int) -> tuple[int, int]:
    """(partition, offset) of msg_id in the log: round-robin, every message written once."""
    return msg_id % PARTITIONS, msg_id // PARTITIONS


def write_txn_run(
    root: Path,
    committed_view: list[int],
    uncommitted_view: list[int],
    unknown_end: tuple[str, str | None] = ("commit", None),
) -> Path:
    """A transactional run directory; every send was delivered (ok) at its location; the
    unknown transaction (3) has the intent and error `unknown_end`."""
    run_dir = root / "exp" / "t" / "cell" / "0"
    run_dir.mkdir(parents=True)
    spec = {"experiment": "exp", "cell": "cell", "repetition": 0, "config": {"acks": "all"}}
    (run_dir / layout.SPEC).write_text(json.dumps(spec))
    acked = [
        {
            "msg_id": m, "key": f"k{m}", "key_seq": 0, "status": "ok",
            "partition": location(m)[0], "offset": location(m)[1], "error": None,
            "send_ts_us": T0_US + m, "ack_ts_us": T0_US + m + 10,
        }
        for m in range(SENT)
    ]  # fmt: skip
    pq.write_table(pa.Table.from_pylist(acked, schema=ACKED_SCHEMA), run_dir / layout.ACKED)
    for name, view in (
        (layout.READBACK, committed_view),
        (layout.READBACK_UNCOMMITTED, uncommitted_view),
    ):
        rows = [
            {"msg_id": m, "key": f"k{m}", "key_seq": 0, "partition": location(m)[0],
             "offset": location(m)[1], "ts_us": T0_US}
            for m in view
        ]  # fmt: skip
        pq.write_table(pa.Table.from_pylist(rows, schema=READBACK_SCHEMA), run_dir / name)
    txns = [
        {
            "txn": t, "first_msg_id": t * SIZE, "messages": SIZE, "intent": "commit",
            "outcome": outcome, "error": None, "begin_ts_us": T0_US, "end_ts_us": T0_US,
            **(dict(zip(("intent", "error"), unknown_end, strict=True)) if t == 3 else {}),
        }
        for t, outcome in enumerate(OUTCOMES)
    ]  # fmt: skip
    table = pa.Table.from_pylist(txns, schema=TRANSACTION_SCHEMA)
    pq.write_table(table, run_dir / layout.TRANSACTIONS)
    return run_dir


def facts_of(
    tmp_path: Path,
    committed_view: list[int],
    uncommitted_view: list[int] | None = None,
    unknown_end: tuple[str, str | None] = ("commit", None),
):
    everything = list(range(SENT))
    run_dir = write_txn_run(tmp_path, committed_view, uncommitted_view or everything, unknown_end)
    return checker.check_run(RunInput(run_dir, complete=True, unlocated_acks=False))


def test_a_clean_transactional_run_has_no_anomaly(tmp_path: Path) -> None:
    facts = facts_of(tmp_path, COMMITTED)
    counts = facts.counts
    assert counts["sent"] == SENT
    assert counts["acked"] == len(COMMITTED)  # acknowledged means committed
    assert counts["failed"] == SIZE  # the aborted transaction's messages
    assert counts["indeterminate"] == SIZE + 1  # the unknown one and the unjournalled send
    for name in ("aborted_read", "committed_lost", "torn_transaction", "lost", "unseen"):
        assert counts[name] == 0, name
    assert counts["txn_committed"] == 2 and counts["txn_aborted"] == 1
    assert counts["txn_unknown"] == 1 and counts["txn_unjournalled_sends"] == 1
    assert counts["txn_aborted_in_log"] == SIZE
    assert facts.sensitivity is not None and facts.sensitivity.passed


def test_a_message_of_an_aborted_transaction_read_committed_is_an_aborted_read(
    tmp_path: Path,
) -> None:
    facts = facts_of(tmp_path, [*COMMITTED, 4])
    assert facts.counts["aborted_read"] == 1
    example = facts.examples["aborted_read"][0]
    assert example["msg_id"] == 4 and example["txn"] == 1
    assert (example["partition"], example["offset"]) == location(4)
    assert facts.counts["committed_lost"] == 0


def test_a_committed_transaction_partly_visible_is_torn_and_lost(tmp_path: Path) -> None:
    facts = facts_of(tmp_path, [m for m in COMMITTED if m != 7])
    counts = facts.counts
    assert counts["torn_transaction"] == 1 and counts["committed_lost"] == 1
    assert counts["lost"] + counts["unseen"] == 1  # the one committed message, as loss
    assert facts.examples["torn_transaction"][0]["msg_id"] == 7
    assert facts.examples["torn_transaction"][0]["txn"] == 2
    assert counts["txn_committed_hidden"] == 1  # it is in the log: read_committed hid it
    missing = facts.examples["lost"] + facts.examples["unseen"]
    assert [e["msg_id"] for e in missing] == [7]  # the message classes' examples stay


def test_a_wholly_missing_committed_transaction_is_lost_not_torn(tmp_path: Path) -> None:
    facts = facts_of(tmp_path, [0, 1, 2], [0, 1, 2, 3, 4, 5])
    counts = facts.counts
    assert counts["committed_lost"] == 1 and counts["torn_transaction"] == 0
    assert counts["txn_committed_hidden"] == 0  # not in the log either


def test_an_unknown_outcome_is_never_loss_nor_aborted_read(tmp_path: Path) -> None:
    # The unknown transaction (9-11) and the unjournalled send (12): one read, the rest absent.
    facts = facts_of(tmp_path, [*COMMITTED, 10])
    counts = facts.counts
    assert counts["lost"] == counts["unseen"] == 0
    assert counts["aborted_read"] == 0 and counts["committed_lost"] == 0
    assert counts["indeterminate_present"] == 1


@pytest.mark.parametrize(
    "intent,error,aborted_read",
    [
        ("abort", "abort: InvalidTxnStateException: invalid state", 1),
        ("abort", None, 1),
        ("abort", "abort: TimeoutException: 10000ms; on timeout: reinit", 1),
        ("abort", "commit: TimeoutException: 10000ms; on timeout: abort; abort: x", 0),
        ("commit", "commit: InvalidTxnStateException: invalid state", 0),
    ],
)
def test_a_transaction_never_asked_to_commit_must_stay_invisible_whatever_its_abort_became(
    tmp_path: Path, intent: str, error: str | None, aborted_read: int
) -> None:
    # Transaction 3 (9-11) ended unknown; message 10 is read committed. A producer that only
    # ever asked to abort it (KAFKA-17754: a late EndTxn of an earlier transaction committed
    # it) was not obeyed: an aborted read. One that asked to commit may have committed it.
    facts = facts_of(tmp_path, [*COMMITTED, 10], unknown_end=(intent, error))
    assert facts.counts["aborted_read"] == aborted_read
    assert facts.counts["txn_unknown"] == 1  # still an unknown end, as the producer learnt it
    if aborted_read:
        assert facts.examples["aborted_read"][0]["txn"] == 3


def test_a_committed_message_read_twice_is_a_duplicate(tmp_path: Path) -> None:
    run_dir = write_txn_run(tmp_path, COMMITTED, list(range(SENT)))
    readback = pq.read_table(run_dir / layout.READBACK).to_pylist()
    readback.append({**readback[0], "offset": 100})  # msg 0 again, at another offset
    table = pa.Table.from_pylist(readback, schema=READBACK_SCHEMA)
    pq.write_table(table, run_dir / layout.READBACK)
    facts = checker.check_run(RunInput(run_dir, complete=True, unlocated_acks=False))
    assert facts.counts["duplicated"] == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", 0), ("hello", 99162322), ("polygenelubricants", -(2**31)), ("é", 233)],
)
def test_java_string_hash_matches_java(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_partition_for_maps_min_value_to_zero() -> None:
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) is 0
    assert partition_for("hello", 50) == 99162322 % 50


def test_a_producer_killed_inside_its_first_transaction_is_judged(tmp_path: Path) -> None:
    """transactions.parquet with zero rows: every send is of an unended transaction."""
    run_dir = write_txn_run(tmp_path, [], [])
    empty = pa.Table.from_pylist([], schema=TRANSACTION_SCHEMA)
    pq.write_table(empty, run_dir / layout.TRANSACTIONS)
    facts = checker.check_run(RunInput(run_dir, complete=True, unlocated_acks=False))
    counts = facts.counts
    assert counts["acked"] == 0 and counts["indeterminate"] == SENT
    assert counts["txn_unjournalled_sends"] == SENT
    for name in ("aborted_read", "committed_lost", "torn_transaction", "lost", "unseen"):
        assert counts[name] == 0, name
    assert facts.sensitivity is not None and not facts.sensitivity.applies


def write_processed(run_dir: Path, consumed: list[int]) -> None:
    """A consumer group member's processed journal holding `consumed`, in that order."""
    rows = [
        {"msg_id": m, "partition": location(m)[0], "offset": location(m)[1], "consumer": 0,
         "ts_us": T0_US + m}
        for m in consumed
    ]  # fmt: skip
    writer = StreamWriter(run_dir / layout.consumer_journal(0, 0).processed, PROCESSED_SCHEMA)
    writer.write(pa.RecordBatch.from_pylist(rows, schema=PROCESSED_SCHEMA))
    writer.close()


ABORTED = [m for m in range(SENT - 1) if OUTCOMES[m // SIZE] == "aborted"]


@pytest.mark.property
@settings(
    max_examples=examples(0.2),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    st.lists(st.integers(0, SENT + 3), max_size=12),
    st.sets(st.sampled_from(ABORTED)),
)
def test_an_aborted_message_a_consumer_processed_during_the_run_is_an_aborted_read(
    tmp_path_factory: pytest.TempPathFactory, consumed: list[int], read_back: set[int]
) -> None:
    run_dir = write_txn_run(
        tmp_path_factory.mktemp("run"), [*COMMITTED, *read_back], list(range(SENT))
    )
    write_processed(run_dir, consumed)
    facts = checker.check_run(RunInput(run_dir, complete=True, unlocated_acks=False))
    # The oracle: an aborted message seen at the end or by a consumer while the run went on.
    seen = {m for m in ABORTED if m in read_back or m in consumed}
    assert facts.counts["aborted_read"] == len(seen)
    examples = facts.examples["aborted_read"]
    assert {e["msg_id"] for e in examples} == seen
    for example in examples:
        assert example["consumed"] == consumed.count(example["msg_id"])
        held = example["msg_id"] in read_back
        assert example["reads"] == int(held)
    assert facts.sensitivity is not None and facts.sensitivity.passed


calls = st.sampled_from(["commit", "abort", "send"])
# A clause's words may themselves mention a commit ("... while awaiting commit: ..."): only
# the call that opens a clause counts.
words = st.text(st.characters(exclude_characters=";"), max_size=20) | st.just("after commit: 5s")
clauses = st.tuples(calls, words)


@given(st.sampled_from(["commit", "abort"]), st.lists(clauses, max_size=4), st.booleans())
def test_commit_never_requested_is_an_abort_with_no_commit_clause(intent, made, answered):
    """The oracle knows which calls it wrote into the error: the producer never asked to
    commit exactly when it meant to abort and wrote no commit clause."""
    from harness.rundir.transactions import TIMEOUT_ANSWERED, commit_never_requested

    text = [f"{call}: {what}" for call, what in made]
    if answered:
        text.append(TIMEOUT_ANSWERED.format("reinit"))
    error = "; ".join(text) or None
    expected = intent == "abort" and all(call != "commit" for call, _ in made)
    assert commit_never_requested(intent, error) == expected


def _rewritten(path: Path, change) -> None:
    """Rewrite a Parquet file's rows with change(rows) -> rows, keeping its schema."""
    table = pq.read_table(path)
    pq.write_table(pa.Table.from_pylist(change(table.to_pylist()), schema=table.schema), path)


@pytest.mark.parametrize("base", [0, 2**62])
def test_each_message_the_group_processed_is_counted_to_it_across_int64(
    tmp_path: Path, base: int
) -> None:
    # The unjournalled send (12, the highest msg_id) becomes transaction 4's, aborted; the
    # group processed aborted 4 once and 12 twice, none in the read-back. With every msg_id
    # moved by `base` (2^62: past what a float tells apart), each count stays its message's.
    run_dir = write_txn_run(tmp_path, COMMITTED, list(range(SENT)))
    aborted = {"txn": 4, "first_msg_id": SENT - 1, "messages": 1, "intent": "abort"}
    _rewritten(
        run_dir / layout.TRANSACTIONS,
        lambda rows: [*rows, {**rows[1], **aborted}],
    )

    def moved(rows: list[dict]) -> list[dict]:
        return [
            {**r, **{k: r[k] + base for k in ("msg_id", "first_msg_id") if k in r}} for r in rows
        ]

    for name in (layout.ACKED, layout.READBACK, layout.READBACK_UNCOMMITTED, layout.TRANSACTIONS):
        _rewritten(run_dir / name, moved)
    rows = [
        {"msg_id": base + m, "partition": 0, "offset": 0, "consumer": 0, "ts_us": T0_US}
        for m in (4, SENT - 1, SENT - 1)
    ]
    writer = StreamWriter(run_dir / layout.consumer_journal(0, 0).processed, PROCESSED_SCHEMA)
    writer.write(pa.RecordBatch.from_pylist(rows, schema=PROCESSED_SCHEMA))
    writer.close()
    facts = checker.check_run(RunInput(run_dir, complete=True, unlocated_acks=False))
    assert facts.counts["aborted_read"] == 2
    consumed = {e["msg_id"] - base: e["consumed"] for e in facts.examples["aborted_read"]}
    assert consumed == {4: 1, SENT - 1: 2}


def test_a_group_that_processed_records_of_no_send_counts_nothing(tmp_path: Path) -> None:
    # No send and an empty read-back, but the group processed a record (a producer's own
    # journal lost, the topic recreated): nothing to count it against.
    run_dir = write_txn_run(tmp_path, [], [])
    _rewritten(run_dir / layout.ACKED, lambda rows: [])
    _rewritten(run_dir / layout.TRANSACTIONS, lambda rows: [])
    write_processed(run_dir, [4])
    facts = checker.check_run(RunInput(run_dir, complete=True, unlocated_acks=False))
    assert facts.counts["aborted_read"] == 0 and facts.counts["sent"] == 0


def test_a_record_of_no_send_is_a_phantom_not_an_unjournalled_send(tmp_path: Path) -> None:
    run_dir = write_txn_run(tmp_path, COMMITTED, list(range(SENT)))
    stranger = {"msg_id": 99, "key": "k99", "key_seq": 0, "partition": 0, "offset": 50}
    _rewritten(run_dir / layout.READBACK, lambda rows: [*rows, {**rows[0], **stranger}])
    counts = checker.check_run(RunInput(run_dir, complete=True, unlocated_acks=False)).counts
    assert counts["phantom"] == 1
    assert counts["txn_unjournalled_sends"] == 1  # message 12 alone


def test_the_transactions_reader_and_the_group_are_both_judged(tmp_path: Path) -> None:
    # The reader (committed transaction 0) read p0@2 then p0@0: a step backwards, judged with
    # or without a group; the group's member journalled no assignment: an unjournalled start.
    run_dir = write_txn_run(tmp_path, COMMITTED, list(range(SENT)))
    reads = [
        {"txn": 0, "msg_id": m, "partition": 0, "offset": location(m)[1], "ts_us": T0_US + ts}
        for m, ts in ((6, 100), (0, 200))
    ]
    pq.write_table(pa.Table.from_pylist(reads, schema=TXN_READ_SCHEMA), run_dir / layout.TXN_READS)
    alone = checker.check_run(RunInput(run_dir, complete=True, unlocated_acks=False)).counts
    assert alone["nonmonotonic_poll"] == 1 and alone["poll_starts_unjournalled"] == 0
    assert alone["g1c"] == 2  # T0 read what T2 wrote after it: T0 -ww-> T2 -wr-> T0
    write_processed(run_dir, [0, 1])
    counts = checker.check_run(RunInput(run_dir, complete=True, unlocated_acks=False)).counts
    assert counts["nonmonotonic_poll"] == 1
    assert counts["poll_starts_unjournalled"] == 1


def test_a_record_that_is_not_the_producers_is_in_no_transaction(tmp_path: Path) -> None:
    # A record without a msg_id after T2's message 6 in p0: no write of T0 (or any), so no
    # T0 -ww-> T2 -ww-> T0 cycle.
    run_dir = write_txn_run(tmp_path, COMMITTED, list(range(SENT)))
    foreign = {"msg_id": None, "key": None, "key_seq": None, "partition": 0, "offset": 3}
    _rewritten(run_dir / layout.READBACK, lambda rows: [*rows, {**rows[0], **foreign}])
    counts = checker.check_run(RunInput(run_dir, complete=True, unlocated_acks=False)).counts
    assert counts["phantom"] == 1
    assert counts["g0"] == counts["g1c"] == 0


def test_write_cycles_are_counted_in_full_and_shown_up_to_the_examples(tmp_path: Path) -> None:
    # 21 pairs of committed transactions (2j, 2j + 1), each writing one message to partition
    # 2j and one to 2j + 1, in opposite orders there: 21 G0 cycles of two transactions.
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    pairs = 21
    spec = {"experiment": "exp", "cell": "cell", "repetition": 0, "config": {"acks": "all"}}
    (run_dir / layout.SPEC).write_text(json.dumps(spec))
    acked, records, txns = [], [], []
    for j in range(pairs):
        a, b = 4 * j, 4 * j + 2  # the first messages of transactions 2j and 2j + 1
        slots = {a: (2 * j, 0), b: (2 * j, 1), b + 1: (2 * j + 1, 0), a + 1: (2 * j + 1, 1)}
        for m, (p, o) in slots.items():
            where = {"msg_id": m, "key": f"k{m}", "key_seq": 0, "partition": p, "offset": o}
            acked.append(where | {"status": "ok", "error": None, "send_ts_us": T0_US + m,
                                  "ack_ts_us": T0_US + m + 10})  # fmt: skip
            records.append(where | {"ts_us": T0_US})
        for t, first in ((2 * j, a), (2 * j + 1, b)):
            txns.append({"txn": t, "first_msg_id": first, "messages": 2, "intent": "commit",
                         "outcome": "committed", "error": None, "begin_ts_us": T0_US,
                         "end_ts_us": T0_US})  # fmt: skip
    for name, rows, schema in (
        (layout.ACKED, acked, ACKED_SCHEMA),
        (layout.READBACK, records, READBACK_SCHEMA),
        (layout.TRANSACTIONS, txns, TRANSACTION_SCHEMA),
    ):
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), run_dir / name)
    facts = checker.check_run(RunInput(run_dir, complete=True, unlocated_acks=False))
    assert facts.counts["g0"] == 2 * pairs and facts.counts["g1c"] == 0
    shown = facts.examples["g0"]
    assert len(shown) == 20 and [e["txn"] for e in shown] == [2 * j for j in range(20)]
