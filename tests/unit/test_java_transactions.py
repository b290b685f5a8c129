"""The Java client's transactions as the harness reads them (harness/workload/transactions/
java.py, producer/protocol.py's transaction_end): the line round-trips, each line is checked
against the plan as an oracle written here checks it, and a program speaking the protocol
journals its transactions to the rows the librdkafka recorder writes."""

from __future__ import annotations

import json
import random
import sys
import threading
from dataclasses import asdict
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.experiment.load import parse_experiment
from harness.experiment.plan import client_durability
from harness.experiment.problems import SpecError
from harness.rundir import layout
from harness.rundir.events import EventLog
from harness.rundir.transactions import Intent, OnTimeout, TxnOutcome
from harness.workload.producer.by_client import properties_text
from harness.workload.producer.command import ClientError, ClientProgram
from harness.workload.producer.protocol import TransactionEnd, ValueFormat, Violation, parse_line
from harness.workload.producer.recorder import Workload
from harness.workload.transactions.java import (
    JavaTransactions,
    PlanFollower,
    age_transactional_id,
    java_settings,
    java_transactions_argv,
)
from harness.workload.transactions.librdkafka import (
    GROUP_ID,
    TRANSACTIONAL_ID,
    TransactionPlan,
    finalize_transactions,
)
from tests.unit.finalized import finalized

pytestmark = pytest.mark.property

whole = st.integers(0, 2**53)
ends = st.builds(
    TransactionEnd,
    transaction=whole,
    first_msg_id=whole,
    messages=st.integers(0, 10_000),
    intent=st.sampled_from(Intent),
    outcome=st.sampled_from(TxnOutcome),
    error=st.none() | st.text(max_size=40),
    begin_ts_us=whole,
    end_ts_us=whole,
)


def line_of(end: TransactionEnd) -> dict:
    """The JSON object the Java recorder prints for `end`."""
    return {"name": "transaction_end", **asdict(end), "intent": end.intent.value,
            "outcome": end.outcome.value}  # fmt: skip


FIELDS = ["transaction", "first_msg_id", "messages", "intent", "outcome", "begin_ts_us",
          "end_ts_us"]  # fmt: skip


@given(ends)
def test_a_transaction_end_round_trips(end: TransactionEnd):
    assert parse_line(json.dumps(line_of(end))) == end


@given(
    ends,
    st.sampled_from(FIELDS),
    st.sampled_from([None, -1, "x", 1.5, True, "committed", "commit"]),
)
def test_a_transaction_end_with_a_bad_field_is_a_violation_naming_it(end, field, bad):
    data = line_of(end)
    data[field] = bad
    members = {"intent": Intent._value2member_map_, "outcome": TxnOutcome._value2member_map_}
    if isinstance(bad, str) and bad in members.get(field, {}):
        return  # a valid value after all
    line = parse_line(json.dumps(data))
    assert isinstance(line, Violation) and f"`{field}`" in line.reason, line


def test_a_transaction_end_without_a_field_or_with_a_bad_error_is_a_violation():
    data = line_of(TransactionEnd(0, 0, 1, Intent.COMMIT, TxnOutcome.COMMITTED, None, 1, 2))
    assert isinstance(parse_line(json.dumps({**data, "error": 3})), Violation)
    del data["intent"]
    assert isinstance(parse_line(json.dumps(data)), Violation)


def follows(line: TransactionEnd, intents: list[Intent], size: int, last: int, at: int) -> bool:
    """The oracle: a line follows the plan when it comes after the last transaction, its
    intent is the plan's (written already), its messages start where the last one's ended,
    and it holds no more than a transaction's size."""
    return (
        last < line.transaction < len(intents)
        and intents[line.transaction] == line.intent
        and line.first_msg_id == at
        and 0 <= line.messages <= size
    )


@st.composite
def programs(draw: st.DrawFn) -> tuple[list[Intent], int, list[TransactionEnd]]:
    """A plan's intents, the size, and the lines a program printed: mostly ones a faithful
    program prints (transactions skipped when begin failed, short ones at a stop), with
    mistakes drawn in."""
    size = draw(st.integers(1, 5))
    intents = draw(st.lists(st.sampled_from(Intent), min_size=1, max_size=12))
    lines, txn, at = [], 0, 0
    for _ in range(draw(st.integers(0, 10))):
        txn += draw(st.sampled_from([1, 1, 1, 2, 0, -1]))
        messages = draw(st.sampled_from([size, size, 0, 1, size + 1]))
        intent = intents[txn] if 0 <= txn < len(intents) else Intent.COMMIT
        if draw(st.integers(0, 9)) == 0:
            intent = Intent.ABORT if intent is Intent.COMMIT else Intent.COMMIT
        first = at + draw(st.sampled_from([0, 0, 0, 0, 1, -1]))
        lines.append(TransactionEnd(max(txn, 0), max(first, 0), messages, intent,
                                    TxnOutcome.COMMITTED, None, 0, 0))  # fmt: skip
        at = max(first, 0) + messages
    return intents, size, lines


@given(programs())
def test_the_plan_follower_accepts_exactly_what_the_oracle_accepts(program):
    intents, size, lines = program
    follower = PlanFollower(intents, size)
    last, at = -1, 0
    for line in lines:
        expected = follows(line, intents, size, last, at)
        problem = follower.problem(line)
        assert (problem is None) == expected, (line, problem)
        if expected:
            last, at = line.transaction, line.first_msg_id + line.messages
        else:
            assert str(line.transaction) in (problem or "")


def test_the_java_program_is_given_the_plan_and_the_settings_transactions_need():
    plan = TransactionPlan(4, 3, None, 7, 20_000, True, 3)
    assert java_transactions_argv(plan) == [
        "--transaction-size", "4", "--partitions", "3", "--offsets-group", GROUP_ID,
        "--on-timeout", "retry",
    ]  # fmt: skip
    no_offsets = TransactionPlan(4, 3, None, 7, 20_000, False, 3, OnTimeout.ABORT)
    assert "--offsets-group" not in java_transactions_argv(no_offsets)
    assert java_transactions_argv(no_offsets)[-2:] == ["--on-timeout", "abort"]
    text = properties_text({"enable.idempotence": False, **java_settings(plan)})
    assert text.splitlines() == [
        "enable.idempotence=true", f"transactional.id={TRANSACTIONAL_ID}",
        "transaction.timeout.ms=20000", "acks=all",
    ]  # fmt: skip


def test_java_with_transactions_is_accepted_command_and_old_java_are_refused():
    spec = parse_experiment({"name": "x", "workload": {"client": "java:3.8.0", "transactions": {}}})
    assert client_durability(spec) == ("all", True)
    for client, says in (
        ({"kind": "command", "argv": ["x"]}, "does not play the transactions role"),
        ("java:0.10.2.2", "Kafka 0.10.2.2 lacks transactions"),
    ):
        with pytest.raises(SpecError) as raised:
            parse_experiment({"name": "x", "workload": {"client": client, "transactions": {}}})
        assert says in str(raised.value)
    # librdkafka's bound on message.timeout.ms by the transaction timeout is not Java's
    short = {"transactions": {"timeout_ms": 10_000}}
    parse_experiment({"name": "x", "workload": {"client": "java:3.8.0", **short}})
    with pytest.raises(SpecError, match=r"librdkafka requires producer\.message_timeout_ms"):
        parse_experiment({"name": "x", "workload": short})


# A program speaking the protocol as the Java recorder does in transactions: it reads each
# intent from stdin, sends `size` messages, and ends the transaction as told (or, with `lie`,
# says it meant to commit whatever the plan said).
FAKE = """
import json, sys
size, count, lie = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "lie"
out = lambda **line: print(json.dumps(line), flush=True)
out(name="startup_complete")
sent = 0
for txn in range(count // size):
    intent = sys.stdin.readline().strip()
    for _ in range(size):
        out(name="producer_send_success", topic="t", value="%015d:%012d:" % (sent, sent // 16),
            partition=sent % 3, offset=sent // 3)
        sent += 1
    out(name="transaction_end", transaction=txn, first_msg_id=sent - size, messages=size,
        intent="commit" if lie else intent,
        outcome="committed" if intent == "commit" else "aborted", error=None,
        begin_ts_us=1000 * txn, end_ts_us=1000 * txn + 500)
out(name="progress", sent=sent)
out(name="shutdown_complete")
"""


def run_fake(
    tmp_path: Path, plan: TransactionPlan, count: int, lie: bool = False
) -> Exception | None:
    """Run FAKE as the transactional Java recorder; the error `close` returns."""
    script = tmp_path / "fake.py"
    script.write_text(FAKE)
    argv = [sys.executable, str(script), str(plan.size), str(count), "lie" if lie else "-"]
    program = ClientProgram(argv, ValueFormat.KAFKA_CHAOS, "fake", stops_itself=True)
    producer = JavaTransactions(program, Workload(None, None, count, 100, 16), plan, tmp_path)
    producer.run(threading.Event())
    return producer.close(EventLog(tmp_path / layout.EVENTS))


@pytest.mark.parametrize("seed", [1, 2])
def test_a_transactional_program_journals_the_plans_transactions(tmp_path: Path, seed: int):
    plan = TransactionPlan(3, None, 0.5, seed, 10_000, False, 3)
    error = run_fake(tmp_path, plan, 30)
    assert error is None
    rng = random.Random(seed)
    planned = [plan.intent(txn, rng).value for txn in range(10)]
    table = finalize_transactions(tmp_path)
    assert table is not None
    assert table["intent"].to_pylist() == planned
    assert table["outcome"].to_pylist() == [
        "committed" if intent == "commit" else "aborted" for intent in planned
    ]
    assert table["first_msg_id"].to_pylist() == list(range(0, 30, 3))
    assert table["end_ts_us"].to_pylist() == [1000 * t + 500 for t in range(10)]
    assert finalized(tmp_path)["status"].to_pylist() == ["ok"] * 30
    [tally] = [
        json.loads(line) for line in (tmp_path / layout.EVENTS).read_text().splitlines()
        if json.loads(line)["type"] == "recorder_tally"
    ]  # fmt: skip
    assert tally["reports"]["ok"] == 30
    assert tally["transactions"] == {
        "committed": planned.count("commit"), "aborted": planned.count("abort")
    }  # fmt: skip


def test_a_program_that_strays_from_the_plan_makes_the_run_incomplete(tmp_path: Path):
    plan = TransactionPlan(2, 2, None, 1, 10_000, False, 3)  # every second one aborted
    error = run_fake(tmp_path, plan, 8, lie=True)
    assert isinstance(error, ClientError)
    assert "transaction 1 says intent commit, the plan abort" in str(error)
    table = finalize_transactions(tmp_path)
    # only the first: the second strays, and nothing after it follows on from the first
    assert table is not None and table["txn"].to_pylist() == [0]


def _ager(tmp_path, body: str) -> ClientProgram:
    """A stand-in for the Java recorder's --age-transactions mode: a script given the count
    as its last argument."""
    script = tmp_path / "ager.py"
    script.write_text("import json, sys\nn = int(sys.argv[-1])\n" + body)
    return ClientProgram([sys.executable, str(script)], ValueFormat.KAFKA_CHAOS, "fake")


def test_ageing_returns_the_seconds_the_program_reports(tmp_path):
    program = _ager(
        tmp_path,
        'print(json.dumps({"name": "startup_complete"}))\n'
        'print(json.dumps({"name": "aged", "transactions": n, "seconds": 1.5}))\n',
    )
    assert age_transactional_id(program, 7, tmp_path / "age.log") == 1.5


@pytest.mark.parametrize(
    "body",
    [
        'print(json.dumps({"name": "aged", "transactions": n - 1, "seconds": 1}))\n',
        'sys.stderr.write("InitProducerId failed\\n"); sys.exit(1)\n',
        "pass\n",
    ],
)
def test_ageing_that_falls_short_or_fails_is_a_client_error_naming_its_log(tmp_path, body):
    with pytest.raises(ClientError, match=r"age\.log"):
        age_transactional_id(_ager(tmp_path, body), 7, tmp_path / "age.log")
