"""The liveness check (analysis/checks/liveness.py) on generated consumer-group histories, against
oracles written here: a second-by-second reading of the definitions (stuck) and a row-by-row one
(reset), and histories of a group that keeps up, in which stalls and resets are planted.

Every history is on whole seconds: the group processes at most one record per partition and
second, the sampler reads the ends once a second (some seconds missed), faults span whole
seconds. The oracles read the history as data (lists), never through the checker's arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from analysis.checks.liveness import Ends, GroupHistory, Journal, resets, stuck_windows
from analysis.model.liveness import Reset, StuckWindow
from tests.examples import examples

US = 1_000_000
UNKNOWN = -1


@dataclass(frozen=True)
class Story:
    """One partition's history in seconds: the offset processed at each second that had one,
    the sampled (high watermark, last stable) at each sampled second, the fault windows."""

    seconds: int
    processed: dict[int, int]  # second → offset processed then
    samples: dict[int, tuple[int, int]]  # second → (hw, lso), UNKNOWN where not given
    faults: tuple[tuple[int, int], ...]
    bound_s: int
    hold_s: int | None = None  # transaction.timeout.ms in seconds; None: no transactions
    records: frozenset[int] | None = None  # offsets the read-back holds; None: every one

    def history(self) -> GroupHistory:
        """The checker's input of this story (partition 0, one member start)."""
        done = sorted(self.processed.items())
        ticks = sorted(self.samples)
        return GroupHistory(
            processed={0: _journal([s for s, _ in done], [o for _, o in done])},
            commits={},
            ends={
                0: Ends(
                    np.array([t * US for t in ticks], dtype=np.int64),
                    np.array([self.samples[t][0] for t in ticks], dtype=np.int64),
                    np.array([self.samples[t][1] for t in ticks], dtype=np.int64),
                )
            },
            faults=tuple((a * US, b * US) for a, b in self.faults),
            observed=(0, self.seconds * US),
            stuck_us=self.bound_s * US,
            lso_hold_us=None if self.hold_s is None else self.hold_s * US,
            records={} if self.records is None else {0: np.array(sorted(self.records))},
        )


def _journal(seconds: list[int], offsets: list[int], start: int = 0) -> Journal:
    return Journal(
        np.array([s * US for s in seconds], dtype=np.int64),
        np.array(offsets, dtype=np.int64),
        np.full(len(seconds), start, dtype=np.int64),
    )


# ---------------------------------------------------------------------------------------------
# The stuck oracle: the definitions, second by second


def oracle_stuck(story: Story) -> list[StuckWindow]:
    """Stuck windows read second by second: a window is a run of seconds behind (the readable
    end past the position) with no record processed after its first second, and it is stuck
    when more of its seconds than the bound lie outside every fault."""
    found: list[StuckWindow] = []
    window: list[int] = []  # its seconds
    for s in range(story.seconds + 1):
        behind = s < story.seconds and _behind(story, s)
        progress = s in story.processed
        if window and (not behind or progress):
            found += _closed(story, window, s)
            window = []
        if behind:
            window.append(s)
    return found


def _closed(story: Story, window: list[int], until: int) -> list[StuckWindow]:
    free = sum(1 for s in window if not any(a <= s < b for a, b in story.faults))
    if free <= story.bound_s:
        return []
    ends = [_readable(story, s) for s in window]
    return [
        StuckWindow(
            0,
            window[0] * US,
            until * US,
            _position(story, window[0]),
            max(e for e, _ in ends),
            any(held for _, held in ends),
        )
    ]


def _position(story: Story, s: int) -> int:
    """1 + the highest offset processed by second s, 0 before any."""
    return max((o + 1 for t, o in story.processed.items() if t <= s), default=0)


def _readable(story: Story, s: int) -> tuple[int, bool]:
    """The readable end at second s (the latest sample at or before it) and whether it is the
    high watermark past a held last stable offset."""
    taken = [t for t in story.samples if t <= s]
    if not taken:
        return UNKNOWN, False
    t = max(taken)
    hw, lso = story.samples[t]
    if lso == UNKNOWN:
        return UNKNOWN, False
    if story.hold_s is None or hw == UNKNOWN or lso >= hw:
        return lso, False
    since = t  # walk back over the samples holding the same offset below the high watermark
    for earlier in sorted((u for u in story.samples if u < t), reverse=True):
        e_hw, e_lso = story.samples[earlier]
        if e_lso != lso or e_hw == UNKNOWN or e_lso >= e_hw:
            break
        since = earlier
    return (hw, True) if t - since > story.hold_s else (lso, False)


def _behind(story: Story, s: int) -> bool:
    """A record to read lay between the position and the readable end at second s."""
    end, _ = _readable(story, s)
    if end == UNKNOWN:
        return False
    offsets = range(_position(story, s), end)
    return any(story.records is None or o in story.records for o in offsets)


# ---------------------------------------------------------------------------------------------
# Generated stories


@st.composite
def stories(draw: st.DrawFn, transactional: bool = False) -> Story:
    """Any history: ends that grow (and sometimes go back), a group that processes now and
    then, sampled seconds missing, faults anywhere."""
    seconds = draw(st.integers(3, 40))
    hw, lso, samples = 0, 0, {}
    for s in range(seconds):
        hw = max(0, hw + draw(st.integers(-2, 6)))
        lso = min(hw, lso + draw(st.integers(0, 6))) if transactional else hw
        if draw(st.integers(0, 9)) == 0:
            continue  # the sampler missed this second
        given_hw = UNKNOWN if draw(st.integers(0, 19)) == 0 else hw
        given_lso = UNKNOWN if draw(st.integers(0, 19)) == 0 else lso
        samples[s] = (given_hw, given_lso)
    processed, offset = {}, 0
    for s in range(seconds):
        if draw(st.integers(0, 3)) == 0:
            offset = max(0, offset + draw(st.integers(-3, 8)))
            processed[s] = offset
    faults = tuple(
        (a, a + draw(st.integers(1, 10)))
        for a in draw(st.lists(st.integers(0, seconds), max_size=3))
    )
    hold = draw(st.integers(0, 6)) if transactional else None
    # In a transactional run markers and aborted records leave gaps the read-back skips.
    top = max([hw, offset + 1, *(v for pair in samples.values() for v in pair)])
    records = draw(st.frozensets(st.integers(0, top))) if transactional else None
    return Story(seconds, processed, samples, faults, draw(st.integers(0, 8)), hold, records)


@st.composite
def keeping_up(draw: st.DrawFn) -> Story:
    """A group that keeps up: every second the high watermark grew, it processed up to it;
    sampled every second; no fault."""
    seconds = draw(st.integers(10, 60))
    hw, samples, processed = 0, {}, {}
    for s in range(seconds):
        hw += draw(st.integers(0, 5))
        samples[s] = (hw, hw)
        if hw > 0:
            processed[s] = hw - 1
    return Story(seconds, processed, samples, (), draw(st.integers(1, 8)))


@settings(max_examples=examples(1.0))
@given(stories())
@example(Story(5, {}, {0: (3, 3)}, (), 3))  # behind from the start, never a record: stuck
@example(Story(5, {}, {0: (3, 3)}, (), 5))  # the same exactly at the bound: not stuck
@example(Story(6, {}, {0: (3, 3)}, ((1, 3),), 3))  # two seconds of it a fault: not stuck
def test_stuck_windows_are_the_oracle_s(story: Story) -> None:
    assert list(stuck_windows(story.history())) == oracle_stuck(story)


@settings(max_examples=examples(1.0))
@given(stories(transactional=True))
@example(Story(10, {0: 1}, {s: (9, 2) for s in range(10)}, (), 2, hold_s=3))  # LSO held at 2
def test_stuck_windows_behind_a_held_last_stable_offset_are_the_oracle_s(story: Story) -> None:
    assert list(stuck_windows(story.history())) == oracle_stuck(story)


@settings(max_examples=examples(1.0))
@given(keeping_up())
def test_a_group_that_keeps_up_is_never_stuck(story: Story) -> None:
    assert list(stuck_windows(story.history())) == []


@settings(max_examples=examples(1.0))
@given(keeping_up(), st.data())
def test_a_planted_stall_is_found_with_its_window(story: Story, data: st.DataObject) -> None:
    """Take the keeping-up group's records away for `length` seconds from `at` while the end
    grows: stuck exactly when `length` exceeds the bound, from the first second behind to the
    first record after."""
    at = data.draw(st.integers(1, story.seconds - 3), label="at")
    length = data.draw(st.integers(1, story.seconds - at - 1), label="length")
    samples = {s: (hw + (1 if s >= at else 0), lso + (1 if s >= at else 0))
               for s, (hw, lso) in story.samples.items()}  # fmt: skip
    processed = {s: o for s, o in story.processed.items() if not at <= s < at + length}
    processed[at + length] = samples[at + length][0] - 1
    processed[at - 1] = samples[at - 1][0] - 1
    stalled = Story(story.seconds, processed, samples, (), story.bound_s)
    position, end = samples[at - 1][0], samples[at + length - 1][0]
    window = StuckWindow(0, at * US, (at + length) * US, position, end)
    expected = [window] if length > story.bound_s else []
    assert list(stuck_windows(stalled.history())) == expected


@settings(max_examples=examples(1.0))
@given(keeping_up(), st.data())
def test_a_stall_inside_a_fault_is_judged_after_the_heal(story: Story, data: st.DataObject) -> None:
    """The same stall with a fault over its first `covered` seconds: stuck only when the
    seconds after the heal exceed the bound."""
    at = data.draw(st.integers(1, story.seconds - 3), label="at")
    length = data.draw(st.integers(1, story.seconds - at - 1), label="length")
    covered = data.draw(st.integers(0, length), label="covered")
    samples = {s: (hw + (1 if s >= at else 0), lso + (1 if s >= at else 0))
               for s, (hw, lso) in story.samples.items()}  # fmt: skip
    processed = {s: o for s, o in story.processed.items() if not at <= s < at + length}
    processed[at - 1] = samples[at - 1][0] - 1
    processed[at + length] = samples[at + length][0] - 1
    faulted = Story(story.seconds, processed, samples, ((at, at + covered),), story.bound_s)
    found = list(stuck_windows(faulted.history()))
    assert len(found) == (1 if length - covered > story.bound_s else 0)
    assert found == oracle_stuck(faulted)


# ---------------------------------------------------------------------------------------------
# Resets


@dataclass(frozen=True)
class Row:
    """One journal row: a processed record or a successful commit, by a member start."""

    second: int
    start: int
    offset: int


def reset_history(
    processed: list[Row], commits: list[Row], commits_first: bool = True
) -> GroupHistory:
    """The checker's input: partition 0's rows (journal order is time order)."""

    def journal(rows: list[Row]) -> Journal:
        return Journal(
            np.array([r.second * US for r in rows], dtype=np.int64),
            np.array([r.offset for r in rows], dtype=np.int64),
            np.array([r.start for r in rows], dtype=np.int64),
        )

    return GroupHistory(
        {0: journal(processed)}, {0: journal(commits)}, {}, (), commits_first=commits_first
    )


def oracle_resets(
    processed: list[Row], commits: list[Row], commits_first: bool = True
) -> list[tuple[int, int, int]]:
    """(second, resumed at, committed) of every record that resumes its start's reading (its
    first, or one at or below the start's record before) below the commit it should have
    read: the other starts' before it, its own before it (before its previous record when a
    batch may be committed before it is processed)."""
    found = []
    for start in sorted({r.start for r in processed}):
        mine = sorted((r for r in processed if r.start == start), key=lambda r: r.second)
        previous: Row | None = None
        for row in mine:
            if previous is None or row.offset <= previous.offset:
                seen = [
                    c.offset
                    for c in commits
                    if (c.start != start and c.second < row.second)
                    or (c.start == start and c.second < _own_until(row, previous, commits_first))
                ]
                if seen and row.offset < max(seen):
                    found.append((row.second, row.offset, max(seen)))
            previous = row
    return sorted(found)


def _own_until(row: Row, previous: Row | None, commits_first: bool) -> int:
    """Until when a start's own commits count for its record `row`."""
    if not commits_first:
        return row.second
    return -1 if previous is None else previous.second


@st.composite
def rows(draw: st.DrawFn) -> tuple[list[Row], list[Row]]:
    """Any journals: up to four starts, each processing offsets that mostly grow, commits by
    any start at any time, at most one row per start and second."""
    processed, commits = [], []
    for start in range(draw(st.integers(1, 4))):
        offset = draw(st.integers(0, 30))
        for second in sorted(draw(st.sets(st.integers(0, 40), max_size=12))):
            offset = max(0, offset + draw(st.integers(-10, 10)))
            processed.append(Row(second, start, offset))
        for second in sorted(draw(st.sets(st.integers(0, 40), max_size=6))):
            commits.append(Row(second, start, draw(st.integers(0, 60))))
    return processed, commits


@st.composite
def rebalanced(draw: st.DrawFn) -> tuple[list[Row], list[Row], int, bool]:
    """A clean group on one partition: starts take it over one after the other, each resuming
    at the group's committed offset and committing after each record (after-process) or before
    it (before-process); a start may stop before committing its last records. Returns the
    journals, the last committed offset and whether commits came first."""
    processed, commits = [], []
    committed, second = 0, 0
    before = draw(st.booleans())
    for start in range(draw(st.integers(1, 5))):
        offset = committed
        for _ in range(draw(st.integers(1, 6))):
            second += 1
            if before:  # commit the record's batch, then process it a second later
                commits.append(Row(second, start, offset + 1))
                second += 1
                processed.append(Row(second, start, offset))
                committed = offset + 1
            else:
                processed.append(Row(second, start, offset))
                if draw(st.booleans()):
                    second += 1
                    commits.append(Row(second, start, offset + 1))
                    committed = offset + 1
            offset += 1
        second += 1
    return processed, commits, committed, before


@settings(max_examples=examples(1.0))
@given(rows(), st.booleans())
def test_resets_are_the_oracle_s(journals: tuple[list[Row], list[Row]], first: bool) -> None:
    processed, commits = journals
    history = reset_history(processed, commits, first)
    found = [(r.at_us // US, r.reset_to, r.committed) for r in resets(history)]
    assert sorted(found) == oracle_resets(processed, commits, first)


@settings(max_examples=examples(1.0))
@given(rebalanced())
def test_resuming_at_the_committed_offset_is_never_a_reset(
    group: tuple[list[Row], list[Row], int, bool],
) -> None:
    processed, commits, _, before = group
    assert list(resets(reset_history(processed, commits, commits_first=before))) == []


@settings(max_examples=examples(1.0))
@given(rebalanced(), st.integers(0, 5))
def test_a_planted_reset_is_found_with_its_offsets(
    group: tuple[list[Row], list[Row], int, bool], earliest: int
) -> None:
    """A new start after the clean ones resumes at `earliest`, below the last commit: one
    reset, from there, with the committed offset and the offsets read again."""
    processed, commits, committed, before = group
    if earliest >= committed:
        earliest = 0
    if committed == 0:
        return  # nothing committed: no offset to reset below
    second = max(r.second for r in (*processed, *commits)) + 1
    start = max(r.start for r in processed) + 1
    planted = [*processed, Row(second, start, earliest), Row(second + 1, start, earliest + 1)]
    found = list(resets(reset_history(planted, commits, commits_first=before)))
    assert found == [Reset(0, second * US, earliest, committed)]
    assert found[0].reprocessed == committed - earliest
