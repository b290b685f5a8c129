"""How the Java recorder ends a transaction (TransactionalSends.end), against the Java client's
documented contract written here as an oracle: every answer of the offer, commit and abort
calls a MockProducer can script, exhaustively up to five calls and by hypothesis beyond.

The check program (tests/unit/java/TransactionEndCheck.java) is compiled with the recorder
against kafka-clients 3.8.0 (Maven, cached as the Java client is); without a JDK and Maven the
tests are skipped, naming why."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.platform.jdk import compiled_classpath
from harness.workload.java_client import RECORDER_SOURCE, TRANSACTIONS_SOURCE
from tests.examples import examples

pytestmark = pytest.mark.property

CHECK = Path(__file__).resolve().parent / "java" / "TransactionEndCheck.java"
RESULTS = ("ok", "timeout", "abortable", "fatal", "illegal")
ATTEMPTS = 6  # TransactionalSends.END_ATTEMPTS: failed calls before the producer is given up


class Check:
    """The check program, one scenario a line in and one result a line out."""

    def __init__(self) -> None:
        classpath = compiled_classpath(CHECK, "3.8.0", None, [RECORDER_SOURCE, TRANSACTIONS_SOURCE])
        self.process = subprocess.Popen(
            ["java", "-cp", classpath, "TransactionEndCheck"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip

    def end(
        self,
        intent: str,
        must_abort: bool,
        offsets: bool,
        script: tuple[str, ...],
        on_timeout: str = "retry",
    ) -> dict:
        assert self.process.stdin is not None and self.process.stdout is not None
        results = ",".join(script) or "-"
        line = f"{intent} {int(must_abort)} {int(offsets)} {results} {on_timeout}\n"
        self.process.stdin.write(line)
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())


@pytest.fixture(scope="module")
def check() -> Iterator[Check]:
    missing = [tool for tool in ("java", "javac", "mvn") if shutil.which(tool) is None]
    if missing:
        # Fails, never skips: CI installs a JDK and Maven, so a missing one is a broken set-up
        # that a skip would hide (`make test` bootstraps both).
        pytest.fail(f"the Java check needs a JDK and Maven ({', '.join(missing)} not found)")
    program = Check()
    yield program
    program.process.terminate()
    program.process.wait()


def expected_calls(
    intent: str, must_abort: bool, offsets: bool, trace: list[str], on_timeout: str = "retry"
) -> str | None:
    """The oracle's first rule: why the calls in `trace` break the contract, or None.

    The first call offers the offsets (with a group) or commits, for a commit that was not
    forced to abort; else it aborts. After a timeout the same call is retried (`retry`: a
    commit may not be followed by anything else), answered by an abort (`abort`; after an
    abort's own timeout nothing follows: a new producer) or by nothing (`reinit`); an offer
    that succeeded is followed by the commit; any other error of an offer or commit is
    answered by an abort. Nothing follows a call that succeeded in ending the transaction, a
    fatal or unexpected error, or an abort that failed otherwise than by a timeout; the calls
    stop after ATTEMPTS failures.
    """
    commit = intent == "commit" and not must_abort
    want = ("offer" if offsets else "commit") if commit else "abort"
    failures = 0
    for step, entry in enumerate(trace):
        call, result = entry.split(":")
        if want is None:
            return f"call {step} ({entry}) after the end"
        if call != want:
            return f"call {step} is {call}, the contract wants {want}"
        failures += result != "ok"
        if result == "timeout":
            want = {"retry": call, "abort": "abort", "reinit": None}[on_timeout]
            if on_timeout == "abort" and call == "abort":
                want = None
        elif result == "ok":
            want = "commit" if call == "offer" else None
        elif result == "abortable" and call != "abort":
            want = "abort"
        else:
            want = None
        if failures == ATTEMPTS:
            want = None
    if want is not None:
        return f"the calls stopped with {want} still due"
    return None


def expected_answers(trace: list[str], on_timeout: str) -> list[str]:
    """The oracle's third rule: the answers to timeouts the transaction's errors name, in
    order: none for `retry`; `abort` (or `reinit` for an abort's own timeout, or for an abort
    the client refused after an answered timeout) for `abort`; `reinit` for `reinit`."""
    said: list[str] = []
    for entry in trace:
        call, result = entry.split(":")
        if result == "timeout" and on_timeout != "retry":
            answer = "reinit" if (on_timeout == "abort" and call == "abort") else on_timeout
            said.append(f"on timeout: {answer}")
        elif (
            call == "abort"
            and result in ("abortable", "illegal")
            and said[-1:] == ["on timeout: abort"]
        ):
            said.append("on timeout: reinit")
    return said


def expected_outcome(trace: list[str]) -> tuple[str, bool]:
    """The oracle's second rule: (outcome, fatal). A commit that returned is committed; an abort
    that returned is aborted, unless a commit timed out before it (the commit may have reached
    the coordinator): unknown. Anything else is unknown and the producer is replaced."""
    last = trace[-1] if trace else ""
    if last == "commit:ok":
        return "committed", False
    if last == "abort:ok":
        return ("unknown" if "commit:timeout" in trace else "aborted"), False
    return "unknown", True


def judge(
    check: Check,
    intent: str,
    must_abort: bool,
    offsets: bool,
    script: tuple[str, ...],
    on_timeout: str = "retry",
):
    got = check.end(intent, must_abort, offsets, script, on_timeout)
    trace = got["trace"]
    assert expected_calls(intent, must_abort, offsets, trace, on_timeout) is None, (script, got)
    assert (got["outcome"], got["fatal"]) == expected_outcome(trace), (script, got)
    said = [error for error in got["errors"] if error.startswith("on timeout")]
    assert said == expected_answers(trace, on_timeout), (script, got)
    # A new producer the answer asked for uses up no attempt: it is told apart.
    assert got["reinit"] == (said[-1:] == ["on timeout: reinit"]), (script, got)


def scripts(longest: int) -> Iterator[tuple[str, ...]]:
    for length in range(longest + 1):
        yield from itertools.product(RESULTS, repeat=length)


def test_every_script_of_up_to_five_answers_ends_as_the_contract_says(check: Check):
    for script in scripts(5):
        for intent, must_abort, offsets in itertools.product(("commit", "abort"), (0, 1), (0, 1)):
            judge(check, intent, bool(must_abort), bool(offsets), script)


@pytest.mark.parametrize("on_timeout", ["abort", "reinit"])
def test_every_script_of_up_to_four_answers_ends_as_its_timeout_answer_says(
    check: Check, on_timeout: str
):
    for script in scripts(4):
        for intent, must_abort, offsets in itertools.product(("commit", "abort"), (0, 1), (0, 1)):
            judge(check, intent, bool(must_abort), bool(offsets), script, on_timeout)


def test_the_cases_that_matter_end_as_documented(check: Check):
    """A few of the above, spelled out."""
    assert check.end("commit", False, True, ())["trace"] == ["offer:ok", "commit:ok"]
    timed_out = check.end("commit", False, False, ("timeout", "abortable"))
    assert (timed_out["outcome"], timed_out["fatal"], timed_out["trace"]) == (
        "unknown", False, ["commit:timeout", "commit:abortable", "abort:ok"]
    )  # fmt: skip
    # The other answers to the same timeout: an abort at once, or a new producer.
    answered = check.end("commit", False, False, ("timeout",), "abort")
    assert (answered["outcome"], answered["trace"]) == ("unknown", ["commit:timeout", "abort:ok"])
    assert "on timeout: abort" in answered["errors"] and not answered["reinit"]
    refused = check.end("commit", False, False, ("timeout", "illegal"), "abort")
    assert refused["fatal"] and refused["reinit"] and "on timeout: reinit" in refused["errors"]
    renewed = check.end("commit", False, False, ("timeout",), "reinit")
    assert (renewed["trace"], renewed["fatal"], renewed["reinit"]) == (
        ["commit:timeout"],
        True,
        True,
    )
    abortable = check.end("commit", False, False, ("abortable",))
    assert abortable["outcome"] == "aborted" and not abortable["fatal"]
    assert check.end("commit", False, False, ("timeout", "ok"))["outcome"] == "committed"
    fenced = check.end("abort", False, False, ("fatal",))
    assert (fenced["outcome"], fenced["fatal"], fenced["trace"]) == (
        "unknown", True, ["abort:fatal"]
    )  # fmt: skip
    assert not fenced["reinit"]  # a fatal error's new producer uses up an attempt
    forever = check.end("commit", False, False, ("timeout",) * 8)
    assert forever["trace"] == ["commit:timeout"] * ATTEMPTS and forever["fatal"]


@settings(max_examples=examples(1.5), deadline=None)
@given(
    intent=st.sampled_from(["commit", "abort"]),
    must_abort=st.booleans(),
    offsets=st.booleans(),
    script=st.lists(st.sampled_from(RESULTS), max_size=14).map(tuple),
    on_timeout=st.sampled_from(["retry", "abort", "reinit"]),
)
def test_any_script_ends_as_the_contract_says(
    check, intent, must_abort, offsets, script, on_timeout
):
    judge(check, intent, must_abort, offsets, script, on_timeout)
