"""The lost-commit check (analysis/checks/commits.py) against an oracle written here, over
generated commit histories; and its judgement (analysis/judge/commits.py)."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.checks.commits import (
    FINAL_VIEW_US,
    CommitHistory,
    CommittedView,
    committed_views,
    lost_commits,
)
from analysis.judge.commits import judge_commits
from analysis.judge.guarantees import guarantee_for
from analysis.judge.outcomes import Verdict
from analysis.model.anomalies import AnomalyName
from analysis.model.evidence import RunEvidence
from analysis.model.results import Example
from harness.rundir.config import CellConfig
from harness.rundir.records import COMMIT_OK, COMMIT_SCHEMA


@dataclass(frozen=True)
class Attempt:
    partition: int
    offset: int
    ok: bool
    ts_us: int
    consumer: int = 0


def oracle(attempts: list[Attempt], final: dict[int, int]) -> dict[int, tuple[int, int]]:
    """Partition → (acknowledged offset, final offset) of each lost commit, walked naively:
    the last ok attempt in time order; lost when the final offset is below it and no attempt
    that was not ok names the final offset."""
    lost: dict[int, tuple[int, int]] = {}
    for p, held in final.items():
        mine = [a for a in attempts if a.partition == p]
        last_ok = None
        for a in sorted(mine, key=lambda a: a.ts_us):
            if a.ok:
                last_ok = a
        if last_ok is None or held >= last_ok.offset:
            continue
        if any(not a.ok and a.offset == held for a in mine):
            continue
        lost[p] = (last_ok.offset, held)
    return lost


def history_of(attempts: list[Attempt]) -> CommitHistory:
    """The check's history of the attempts, through a journal table as the members write it."""
    table = pa.table(
        {
            "partition": [a.partition for a in attempts],
            "offset": [a.offset for a in attempts],
            "consumer": [a.consumer for a in attempts],
            "ts_us": [a.ts_us for a in attempts],
            "outcome": [COMMIT_OK if a.ok else "REQUEST_TIMED_OUT" for a in attempts],
        },
        schema=COMMIT_SCHEMA,
    )
    return CommitHistory.of(table)


def found(attempts: list[Attempt], final: dict[int, int]) -> dict[int, tuple[int, int]]:
    return {
        r["partition"]: (r["offset"], r["committed"])
        for r in lost_commits(history_of(attempts), [CommittedView(FINAL_VIEW_US, final)])
    }


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[Attempt], dict[int, int]]:
    """Commit attempts over a few partitions, distinct times, any offsets (a zombie member's
    commit may go backwards), each ok or not, in shuffled row order, with the group's final
    offsets (or none for a partition)."""
    n = draw(st.integers(0, 30))
    stamps = draw(st.lists(st.integers(0, 10**6), min_size=n, max_size=n, unique=True))
    attempts = [
        Attempt(
            partition=draw(st.integers(0, 3)),
            offset=draw(st.integers(0, 50)),
            ok=draw(st.booleans()),
            ts_us=ts,
            consumer=draw(st.integers(0, 2)),
        )
        for ts in stamps
    ]
    final = draw(st.dictionaries(st.integers(0, 3), st.integers(-1001, 50), max_size=4))
    return draw(st.permutations(attempts)), final


@settings(max_examples=300, deadline=None)
@given(histories())
def test_the_check_agrees_with_the_oracle(history: tuple[list[Attempt], dict[int, int]]) -> None:
    attempts, final = history
    assert found(attempts, final) == oracle(attempts, final)


@settings(max_examples=200, deadline=None)
@given(histories())
def test_a_group_holding_its_last_acknowledged_commits_is_clean(
    history: tuple[list[Attempt], dict[int, int]],
) -> None:
    attempts, _ = history
    final: dict[int, int] = {}
    for a in sorted(attempts, key=lambda a: a.ts_us):
        if a.ok:
            final[a.partition] = a.offset
    assert found(attempts, final) == {}


@settings(max_examples=200, deadline=None)
@given(histories(), st.integers(1, 40))
def test_a_planted_lost_commit_is_found(
    history: tuple[list[Attempt], dict[int, int]], back: int
) -> None:
    attempts, _ = history
    last = max(attempts, key=lambda a: a.ts_us, default=None)
    if last is None:
        return
    planted = Attempt(last.partition, 100 + back, True, last.ts_us + 1)
    # No failed attempt names 100, and every other attempt's offset is at most 50.
    final = {planted.partition: 100}
    assert found([*attempts, planted], final) == {planted.partition: (100 + back, 100)}


def test_the_last_acknowledged_in_time_decides_not_the_highest() -> None:
    """A wrong answer (the highest acknowledged offset) would call this group's position lost:
    a zombie's commit of 40 acknowledged before the new owner's 30."""
    attempts = [Attempt(0, 40, True, 10, consumer=1), Attempt(0, 30, True, 20, consumer=2)]
    assert found(attempts, {0: 30}) == {}
    assert found(attempts, {0: 20}) == {0: (30, 20)}


def test_an_attempt_of_unknown_outcome_explains_the_final_offset() -> None:
    attempts = [Attempt(0, 10, True, 1), Attempt(0, 5, False, 2), Attempt(0, 20, True, 3)]
    assert found(attempts, {0: 5}) == {}
    assert found(attempts, {0: 10}) == {0: (20, 10)}
    assert found(attempts, {0: -1001}) == {0: (20, -1001)}


def test_the_oracle_tells_a_wrong_answer_apart() -> None:
    """The oracle is no tautology: the highest-offset rule disagrees with it."""
    attempts = [Attempt(0, 40, True, 10), Attempt(0, 30, True, 20)]
    wrong = {0: (40, 30)}  # what "highest acknowledged" would report for final 30
    assert oracle(attempts, {0: 30}) != wrong


def sampled_oracle(
    attempts: list[Attempt], views: list[tuple[int, dict[int, int]]]
) -> dict[int, tuple[int, int, int]]:
    """Partition → (acknowledged offset, offset seen, when asked) at the first view, in time
    order, that shows the partition below the last ok attempt acknowledged before it, unless
    an attempt that was not ok names the offset seen: walked naively, view by view."""
    lost: dict[int, tuple[int, int, int]] = {}
    for asked, offsets in sorted(views, key=lambda v: v[0]):
        for p, held in offsets.items():
            if p in lost:
                continue
            before = [a for a in attempts if a.partition == p and a.ok and a.ts_us < asked]
            if not before:
                continue
            last = max(before, key=lambda a: a.ts_us)
            explained = any(a.partition == p and not a.ok and a.offset == held for a in attempts)
            if held < last.offset and not explained:
                lost[p] = (last.offset, held, asked)
    return lost


@settings(max_examples=300, deadline=None)
@given(
    histories(),
    st.lists(
        st.tuples(
            st.integers(0, 10**6),
            st.dictionaries(st.integers(0, 3), st.integers(-1, 50), max_size=4),
        ),
        max_size=6,
        unique_by=lambda v: v[0],
    ),
)
def test_sampled_views_agree_with_the_oracle(
    history: tuple[list[Attempt], dict[int, int]], views: list[tuple[int, dict[int, int]]]
) -> None:
    attempts, _ = history
    rows = lost_commits(history_of(attempts), [CommittedView(t, o) for t, o in views])
    got = {r["partition"]: (r["offset"], r["committed"], r["seen_us"]) for r in rows}
    assert got == sampled_oracle(attempts, views)


def test_a_position_that_went_back_and_was_committed_past_shows_only_while_sampled() -> None:
    """KAFKA-20634's shape: 20 acknowledged, the group's position read back at 10 a moment
    later, then a later commit of 30 acknowledged: the final view alone sees nothing."""
    attempts = [Attempt(0, 20, True, 10), Attempt(0, 30, True, 50)]
    final = CommittedView(FINAL_VIEW_US, {0: 30})
    assert lost_commits(history_of(attempts), [final]) == []
    [row] = lost_commits(history_of(attempts), [CommittedView(20, {0: 10}), final])
    assert (row["offset"], row["committed"], row["seen_us"]) == (20, 10, 20)
    # a read asked for before the acknowledgement proves nothing
    assert lost_commits(history_of(attempts), [CommittedView(5, {0: 10}), final]) == []


def test_the_views_are_the_samples_then_the_final_offsets() -> None:
    evidence = RunEvidence.coerce([
        {"type": "sample", "ts_us": 1, "partitions": [], "committed": {"0": 5},
         "committed_asked_us": 7},
        {"type": "sample", "ts_us": 2, "partitions": [], "committed_error": "timed out"},
        {"type": "consumers", "ts_us": 9, "committed": {"0": 8}},
    ])  # fmt: skip
    views = committed_views(evidence)
    assert [(v.asked_us, dict(v.offsets)) for v in views] == [(7, {0: 5}), (FINAL_VIEW_US, {0: 8})]


# ---------------------------------------------------------------------------------------------
# The judgement


def _config(version: str, acks: str = "all") -> CellConfig:
    return CellConfig(
        kafka_version=version,
        consumers=2,
        consumer_commit="after-process",
        acks=acks,
        min_insync_replicas=2,
        unclean_leader_election=False,
        enable_idempotence=True,
        max_in_flight=5,
        fault_class="node-partition",
    )


def _judged(version: str, fault: bool = True, acks: str = "all") -> list[Verdict]:
    config = _config(version, acks)
    example = Example.of(
        AnomalyName.COMMIT_LOST,
        {"partition": 1, "consumer": 0, "at_us": 5, "offset": 120, "committed": 100},
    )
    events = (
        [
            {
                "type": "fault_start",
                "ts_us": 1,
                "fault": "partition",
                "target": "group-coordinator",
                "nodes": [2],
            }
        ]
        if fault
        else []
    )
    findings = judge_commits(
        {AnomalyName.COMMIT_LOST: 1},
        {AnomalyName.COMMIT_LOST: [example]},
        config,
        guarantee_for(config),
        RunEvidence.coerce(events),
    )
    return [f.verdict for f in findings]


def test_a_lost_commit_is_the_known_bug_on_an_affected_release_and_a_violation_after() -> None:
    assert _judged("4.3.0") == [Verdict.KNOWN_BUG]
    assert _judged("4.3.1") == [Verdict.VIOLATION]
    assert _judged("4.3.0", fault=False) == [Verdict.VIOLATION]


def test_a_lost_commit_where_loss_is_allowed_passes() -> None:
    assert _judged("4.3.1", acks="1") == [Verdict.PASS]


def test_no_lost_commit_no_finding() -> None:
    config = _config("4.3.0")
    findings = judge_commits({}, {}, config, guarantee_for(config), RunEvidence.coerce([]))
    assert findings == []
