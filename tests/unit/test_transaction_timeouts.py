"""How the librdkafka transactional recorder answers a timed-out commit or abort
(workload.transactions.on_timeout), against an oracle of the three answers written here: a
scripted client answers each commit and abort call, every script up to three answers long
and by hypothesis beyond."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from hypothesis import given
from hypothesis import strategies as st

from harness.rundir.transactions import Intent, OnTimeout, TxnOutcome
from harness.workload.producer.recorder import Workload
from harness.workload.transactions.librdkafka import TransactionalRecorder, TransactionPlan

pytestmark = pytest.mark.property

ANSWERS = ("ok", "timeout", "abortable", "fatal", "other")
ATTEMPTS = TransactionalRecorder.END_ATTEMPTS


class Scripted:
    """A transactional client whose commit and abort calls answer as scripted (`ok` once the
    script runs out); `trace` lists each call with its answer."""

    def __init__(self, script: tuple[str, ...]):
        self.script = list(script)
        self.trace: list[str] = []

    def _answer(self, call: str) -> None:
        answer = self.script.pop(0) if self.script else "ok"
        self.trace.append(f"{call}:{answer}")
        errors = {
            "timeout": KafkaError(KafkaError._TIMED_OUT, retriable=True),
            "abortable": KafkaError(KafkaError._STATE, txn_requires_abort=True),
            "fatal": KafkaError(KafkaError._FENCED, fatal=True),
            "other": KafkaError(KafkaError._STATE),
        }
        if answer in errors:
            raise KafkaException(errors[answer])

    def commit_transaction(self, timeout: float) -> None:
        self._answer("commit")

    def abort_transaction(self, timeout: float) -> None:
        self._answer("abort")

    def flush(self, timeout: float) -> int:
        return 0


def expected(
    intent: str, must_abort: bool, on_timeout: str, script: tuple[str, ...]
) -> tuple[list[str], str, bool, list[str]]:
    """(calls, outcome, fatal, answers): what the documented answers give. A commit is
    committed when its call returns; an abort is aborted, unless a commit timed out before it
    (it may have reached the coordinator): unknown. A timeout is answered by the same call
    again (retry), by an abort (abort; an abort that times out then needs a new client), or by
    a new client at once (reinit; also when the client refuses the abort the answer asked for);
    an abortable error by an abort; anything else ends with a new client and an unknown
    outcome, as do ATTEMPTS failures."""
    want = "commit" if intent == "commit" and not must_abort else "abort"
    answers = list(script)
    calls: list[str] = []
    said: list[str] = []
    doubtful = answered_abort = False
    for _ in range(ATTEMPTS):
        answer = answers.pop(0) if answers else "ok"
        calls.append(f"{want}:{answer}")
        if answer == "ok":
            if want == "commit":
                return calls, "committed", False, said
            return calls, "unknown" if doubtful else "aborted", False, said
        if answer == "abortable":
            want = "abort"
        elif answer == "timeout":
            doubtful = doubtful or want == "commit"
            if on_timeout == "abort" and want == "abort":
                said.append("on timeout: reinit")
                return calls, "unknown", True, said
            if on_timeout != "retry":
                said.append(f"on timeout: {on_timeout}")
            if on_timeout == "reinit":
                return calls, "unknown", True, said
            if on_timeout == "abort":
                want, answered_abort = "abort", True
        else:
            if answer == "other" and answered_abort and want == "abort":
                said.append("on timeout: reinit")  # the client refused the answer's abort
            return calls, "unknown", True, said
    return calls, "unknown", True, said


def ended(tmp_path: Path, intent: str, must_abort: bool, on_timeout: str, script):
    """(calls, outcome, fatal, error, reinit asked) of the recorder's _end on the script."""
    plan = TransactionPlan(
        size=3, abort_every=None, abort_ratio=None, seed=1, timeout_ms=10_000,
        send_offsets=False, partitions=1, on_timeout=OnTimeout(on_timeout),
    )  # fmt: skip
    workload = Workload(rate=None, duration_s=None, count=3, message_bytes=40, keys=1)
    recorder = TransactionalRecorder("127.0.0.1:1", "t", {}, workload, plan, tmp_path)
    client = Scripted(script)
    try:
        outcome, error, fatal = recorder._end(client, Intent(intent), 0, abort=must_abort)
    finally:
        recorder.journal.close()
        recorder.transactions.close()
    return client.trace, outcome, fatal, error, recorder._reinit


def judge(tmp_path, intent, must_abort, on_timeout, script) -> None:
    calls, outcome, fatal, error, reinit = ended(tmp_path, intent, must_abort, on_timeout, script)
    want_calls, want_outcome, want_fatal, said = expected(intent, must_abort, on_timeout, script)
    assert calls == want_calls, (script, calls)
    assert (outcome, fatal) == (TxnOutcome(want_outcome), want_fatal), (script, calls, error)
    # The journal's record of the path: each answer other than a retry is named in `error`.
    assert [part for part in error.split("; ") if part.startswith("on timeout")] == said
    # A new client the answer asked for is not a fatal error's (it uses up no attempt).
    assert reinit == (bool(said) and said[-1] == "on timeout: reinit"), (script, said)


@pytest.mark.parametrize("on_timeout", [o.value for o in OnTimeout])
def test_every_script_of_up_to_three_answers_ends_as_documented(tmp_path, on_timeout):
    for length in range(4):
        for script in itertools.product(ANSWERS, repeat=length):
            for intent, must_abort in itertools.product(("commit", "abort"), (False, True)):
                judge(tmp_path, intent, must_abort, on_timeout, script)


def test_the_three_answers_to_a_commit_that_timed_out(tmp_path):
    """The cases the axis exists for, spelled out."""
    retry = ended(tmp_path, "commit", False, "retry", ("timeout",))
    assert retry[:3] == (["commit:timeout", "commit:ok"], TxnOutcome.COMMITTED, False)
    abort = ended(tmp_path, "commit", False, "abort", ("timeout",))
    assert abort[:3] == (["commit:timeout", "abort:ok"], TxnOutcome.UNKNOWN, False)
    assert "on timeout: abort" in abort[3]
    reinit = ended(tmp_path, "commit", False, "reinit", ("timeout",))
    assert reinit[:3] == (["commit:timeout"], TxnOutcome.UNKNOWN, True) and reinit[4]


@given(
    intent=st.sampled_from(["commit", "abort"]),
    must_abort=st.booleans(),
    on_timeout=st.sampled_from([o.value for o in OnTimeout]),
    script=st.lists(st.sampled_from(ANSWERS), max_size=12).map(tuple),
)
def test_any_script_ends_as_documented(tmp_path_factory, intent, must_abort, on_timeout, script):
    judge(tmp_path_factory.mktemp("end"), intent, must_abort, on_timeout, script)


class LostException(Scripted):
    """confluent-kafka's flush when a delivery callback's exception was lost in the binding."""

    def flush(self, timeout: float) -> int:
        self.trace.append("flush:SystemError")
        raise SystemError("<method 'flush' of 'cimpl.Producer' objects> returned NULL")


def test_a_flush_that_loses_its_exception_still_aborts_the_transaction(tmp_path):
    plan = TransactionPlan(
        size=3, abort_every=None, abort_ratio=None, seed=1, timeout_ms=10_000,
        send_offsets=False, partitions=1, on_timeout=OnTimeout("retry"),
    )  # fmt: skip
    workload = Workload(rate=None, duration_s=None, count=3, message_bytes=40, keys=1)
    recorder = TransactionalRecorder("127.0.0.1:1", "t", {}, workload, plan, tmp_path)
    client = LostException(())
    try:
        outcome, error, fatal = recorder._end(client, Intent("abort"), 0)
    finally:
        recorder.journal.close()
        recorder.transactions.close()
    assert client.trace == ["flush:SystemError", "abort:ok"]
    assert (outcome, fatal) == (TxnOutcome.ABORTED, False)
    assert "flush before the abort: " in error
