"""The end of a repetition (harness.run.ending.end_run): its order, and what still runs when
a step fails. The steps themselves are the real ones' stand-ins: this is the sequencing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.run import ending

STEPS = ("heal", "catch_up", "close", "records", "sampler", "read_back")
BEFORE_READ_BACK = STEPS[:-1]


class Failed(Exception):
    """A step's failure."""


class Recorder:
    """Every step appends its name when called, and raises when it is in `failing`."""

    def __init__(self, failing: frozenset[str]):
        self.calls: list[str] = []
        self.failing = failing

    def step(self, name: str) -> Any:
        self.calls.append(name)
        if name in self.failing:
            raise Failed(name)
        return name

    def catch_up(self) -> None:
        self.step("catch_up")

    def close(self) -> None:
        self.step("close")

    def stop(self) -> None:
        self.step("sampler")


def _end(monkeypatch: pytest.MonkeyPatch, rec: Recorder, *, group: bool, plan: bool, records: bool):
    monkeypatch.setattr(ending, "final_heal", lambda *a: rec.step("heal"))
    monkeypatch.setattr(ending, "write_records", lambda *a: rec.step("records"))
    monkeypatch.setattr(ending, "read_back_and_keep", lambda *a: rec.step("read_back"))
    read_back = ending.ReadBackPlan("t", 1, 1.0) if plan else None
    return ending.RunEnd(
        None, None, None, Path("."), rec, read_back,  # type: ignore[arg-type]
        records=records, group=rec if group else None,
    )  # fmt: skip


def _oracle(failing: frozenset[str], group: bool, plan: bool, records: bool) -> list[str]:
    """The steps end_run must call: the heal; the catch-up only after a heal that held; then
    the close and the records whatever failed; the read-back only when nothing before it
    failed, the sampler's stop after it (it records through the wait for a full ISR), or in
    its place when there is none."""
    wanted = ["heal"]
    if group and "heal" not in failing:
        wanted.append("catch_up")
    if group:
        wanted.append("close")
    if records:
        wanted.append("records")
    if plan and not failing & set(wanted):
        wanted.append("read_back")
    wanted.append("sampler")
    return wanted


@given(
    failing=st.frozensets(st.sampled_from(STEPS)),
    group=st.booleans(),
    plan=st.booleans(),
    records=st.booleans(),
)
def test_every_step_before_the_read_back_runs_and_the_first_failure_is_raised(
    failing: frozenset[str], group: bool, plan: bool, records: bool
) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        rec = Recorder(failing)
        end = _end(monkeypatch, rec, group=group, plan=plan, records=records)
        wanted = _oracle(failing, group, plan, records)
        failed = [name for name in wanted if name in failing]
        if failed:
            with pytest.raises(Failed) as raised:
                ending.end_run(end)
            assert raised.value.args[0] == failed[0]
        else:
            assert ending.end_run(end) == ("read_back" if plan else None)
        assert rec.calls == wanted


@pytest.mark.parametrize(
    ("step", "failing", "calls"),
    [
        # An interrupt in the close: the records are written, and it is raised first.
        ("close", {"heal"}, ["heal", "close", "records", "sampler"]),
        # An interrupt in the read-back: the sampler, recording through it, is still stopped.
        ("read_back", set(), ["heal", "catch_up", "close", "records", "read_back", "sampler"]),
    ],
)
def test_an_interrupt_still_lets_the_rest_end_and_is_raised(
    monkeypatch: pytest.MonkeyPatch, step: str, failing: set[str], calls: list[str]
) -> None:
    rec = Recorder(frozenset(failing))
    end = _end(monkeypatch, rec, group=True, plan=True, records=True)

    def interrupted(*args: object) -> None:
        rec.calls.append(step)
        raise KeyboardInterrupt

    if step == "close":
        monkeypatch.setattr(rec, "close", interrupted)
    else:
        monkeypatch.setattr(ending, "read_back_and_keep", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ending.end_run(end)
    assert rec.calls == calls
