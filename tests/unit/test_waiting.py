"""The one poll loop (harness/waiting.py): poll_until, wait_for and Deadline."""

from __future__ import annotations

import itertools
import math
import threading
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness import waiting
from harness.waiting import Deadline, WaitTimeout, poll_until, wait_for


class FakeClock:
    """A monotonic clock that only moves when the loop sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_the_first_truthy_value_is_returned() -> None:
    values = iter([0, None, "", 7, 8])
    assert poll_until(lambda: next(values), 5, "a value", interval_s=0) == 7


def test_it_times_out_naming_what_it_waited_for() -> None:
    with pytest.raises(WaitTimeout, match=r"^timed out after 0\.05 s waiting for the moon$"):
        poll_until(lambda: False, 0.05, "the moon", interval_s=0.01)


def test_the_timeout_is_a_timeout_error() -> None:
    with pytest.raises(TimeoutError):
        poll_until(lambda: None, 0, "nothing")


def test_describe_adds_the_state_on_the_next_line() -> None:
    with pytest.raises(WaitTimeout) as caught:
        poll_until(lambda: False, 0, "the moon", describe=lambda: "  it is new moon")
    assert str(caught.value) == "timed out after 0 s waiting for the moon\n  it is new moon"


def test_the_check_runs_once_even_without_time() -> None:
    calls = itertools.count()
    assert poll_until(lambda: next(calls) + 1, 0, "one call") == 1
    assert wait_for(lambda: None, 0) is None


def test_a_retriable_error_is_not_yet_and_chained_when_time_runs_out() -> None:
    def never() -> bool:
        raise KeyError("not yet")

    with pytest.raises(WaitTimeout) as caught:
        poll_until(never, 0.05, "a key", interval_s=0.01, retry_on=lambda e: True)
    assert isinstance(caught.value.__cause__, KeyError)
    assert caught.value.last_error is caught.value.__cause__


def test_a_retriable_error_then_a_value() -> None:
    answers = iter([KeyError("no"), KeyError("no"), "yes"])

    def check() -> str:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert poll_until(check, 5, "yes", interval_s=0, retry_on=lambda e: isinstance(e, KeyError))


def test_any_other_error_propagates_at_once() -> None:
    calls = itertools.count()

    def broken() -> bool:
        next(calls)
        raise ValueError("broken")

    with pytest.raises(ValueError):
        poll_until(broken, 5, "a value", interval_s=0, retry_on=lambda e: False)
    assert next(calls) == 1


def test_wait_for_answers_none_when_time_is_up() -> None:
    assert wait_for(lambda: False, 0.02, interval_s=0.005) is None


def test_a_pause_that_answers_true_ends_the_wait() -> None:
    stop = threading.Event()
    stop.set()
    calls = itertools.count()
    assert wait_for(lambda: next(calls) < 0, 60, interval_s=5, pause=stop.wait) is None
    assert next(calls) == 1  # checked once, then the set event ended the wait at once


def test_a_pause_that_answers_nothing_goes_on() -> None:
    pauses: list[float] = []
    values = iter([None, None, "done"])
    assert wait_for(lambda: next(values), 60, interval_s=0.5, pause=pauses.append) == "done"
    assert pauses == [0.5, 0.5]


def test_a_deadline() -> None:
    assert Deadline.after(None).remaining() == math.inf and not Deadline.after(None).passed()
    assert Deadline.after(-1).passed() and Deadline.after(-1).remaining() == 0.0
    assert 59 < Deadline.after(60).remaining() <= 60


@pytest.mark.property
@given(
    truthy_at=st.integers(min_value=1, max_value=50),
    timeout_s=st.floats(min_value=0, max_value=20, allow_nan=False),
    interval_s=st.floats(min_value=0.01, max_value=2, allow_nan=False),
)
def test_the_loop_checks_until_a_value_or_the_time_is_up(
    truthy_at: int, timeout_s: float, interval_s: float
) -> None:
    """On a clock that moves only while sleeping, the n-th check being the first truthy one:
    the loop checks once, then once per interval while the deadline has not passed; it returns
    the n-th value when the n-th check came, else it times out after the last check that fit."""
    clock = FakeClock()
    checked_at: list[float] = []

    def check() -> int | None:
        checked_at.append(clock.now)
        return len(checked_at) if len(checked_at) == truthy_at else None

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            waiting, "time", SimpleNamespace(monotonic=clock.monotonic, sleep=clock.sleep)
        )
        try:
            value = poll_until(check, timeout_s, "the n-th call", interval_s=interval_s)
        except WaitTimeout:
            assert len(checked_at) < truthy_at
            assert checked_at[-1] >= timeout_s  # it gave up only once the deadline had passed
        else:
            assert value == truthy_at == len(checked_at)
        assert all(at < timeout_s for at in checked_at[:-1])  # it went on while time was left
        assert clock.sleeps == [interval_s] * (len(checked_at) - 1)
