"""A consumer group resuming below a commit the offsets topic itself lost: the reset follows from
the lost commit, which is judged on its own (commit_lost), so the reset is allowed, not UNKNOWN.
KAFKA-20716's discovered run showed it: the group's commit of 1886 was lost in an unclean
election of `__consumer_offsets`, and a member resumed at 1836."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from analysis.judge.liveness import cases_of
from analysis.judge.outcomes import Verdict
from analysis.model.anomalies import AnomalyName
from analysis.model.results import Example
from harness.rundir.config import CellConfig
from tests.unit.verdict_runs import AP, judge_repetition, result, sample

T0 = 1_700_000_000_000_000
S = 1_000_000
CONFIG = CellConfig(consumers=1, consumer_commit="after-process")


def _reset(partition: int, at_us: int, to: int, committed: int) -> Example:
    fields = {"partition": partition, "at_us": at_us, "reset_to": to, "committed": committed,
              "reprocessed": committed - to, "leader_changed": True}  # fmt: skip
    return Example.of(AnomalyName.RESET, fields)


def _lost(partition: int, at_us: int, offset: int, held: int) -> Example:
    fields = {"partition": partition, "consumer": 0, "at_us": at_us, "offset": offset,
              "committed": held}  # fmt: skip
    return Example.of(AnomalyName.COMMIT_LOST, fields)


resets = st.builds(
    _reset,
    st.integers(0, 2),
    st.integers(0, 100),
    st.integers(0, 50),
    st.integers(51, 100),
)
losts = st.lists(
    st.builds(
        _lost, st.integers(0, 2), st.integers(0, 100), st.integers(0, 100), st.integers(0, 50)
    ),
    max_size=4,
)


@given(resets, losts)
def test_a_reset_is_below_a_lost_commit_exactly_when_one_of_its_partition_came_before_above_it(
    reset: Example, lost: list[Example]
) -> None:
    # The oracle: some commit of the reset's partition, acknowledged no later than the resume,
    # lay above where the group resumed, and the offsets topic lost it.
    below_a_lost_one = False
    for commit in lost:
        same = commit.partition == reset.partition
        if same and commit.at_us <= reset.at_us and commit.offset > reset.reset_to:
            below_a_lost_one = True
    assert ("commit-lost" in cases_of(reset, CONFIG, None, lost)) is below_a_lost_one
    assert "commit-lost" not in cases_of(reset, CONFIG, None, ())


def _judged(examples: dict[str, list[dict]], **counts: int):
    config = {**AP, "unclean_leader_election": True, "consumers": 1,
              "consumer_commit": "after-process"}  # fmt: skip
    events = [
        {"type": "consumers", "ts_us": T0, "caught_up": True, "journal_errors": []},
        {**sample(1, [1, 2, 3]), "ends": [{"partition": 0, "high_watermark": 9000}]},
    ]
    return judge_repetition(result(config, examples=examples, **counts), events)


RESET = {"partition": 0, "at_us": T0 + 60 * S, "reset_to": 1836, "committed": 1886,
         "reprocessed": 50, "leader_changed": True}  # fmt: skip
LOST = {"partition": 0, "consumer": 0, "at_us": T0 + 30 * S, "offset": 1886, "committed": 1784,
        "seen_us": T0 + 61 * S}  # fmt: skip


def test_a_reset_below_the_commit_the_group_lost_is_allowed_with_the_lost_commit() -> None:
    verdict = _judged({"reset": [RESET], "commit_lost": [LOST]}, reset=1, commit_lost=1)
    assert verdict.verdict == Verdict.PASS
    assert any("resumed at 1836 below its commit 1886" in r and "commit_lost" in r
               for r in verdict.reasons)  # fmt: skip


def test_the_same_reset_without_the_lost_commit_stays_unknown() -> None:
    assert _judged({"reset": [RESET]}, reset=1).verdict == Verdict.UNKNOWN
    later = {**LOST, "at_us": T0 + 70 * S}  # acknowledged after the resume: no explanation
    verdict = _judged({"reset": [RESET], "commit_lost": [later]}, reset=1, commit_lost=1)
    assert verdict.verdict == Verdict.UNKNOWN
