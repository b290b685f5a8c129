"""The group's liveness by hand: the edges of `stuck` (exactly at the bound, an end that did not
move, a fault over the stall, a held last stable offset) and of `reset` (to the earliest, a
rewind to the commit, a paused member finishing its batch), read from a crafted run directory,
and judged by LIVENESS_TABLE (no Docker, no Spark)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from analysis.checks.liveness import Ends, GroupHistory, Journal, liveness_facts, resets
from analysis.checks.liveness import stuck_windows as windows_of
from analysis.checks.messages import RunInput, check_run
from analysis.judge.liveness import LIVENESS_TABLE
from analysis.judge.outcomes import Verdict
from analysis.model.anomalies import AnomalyName
from analysis.model.evidence import RunEvidence
from analysis.model.liveness import Reset, StuckWindow
from harness.rundir import layout
from harness.rundir.records import COMMIT_SCHEMA, PROCESSED_SCHEMA
from tests.unit.reconcile_runs import in_order, write_run
from tests.unit.verdict_runs import CP, judge_repetition, result, sample

S = 1_000_000
T0 = 1_700_000_000_000_000


def history(
    processed: list[tuple[int, int]],
    ends: list[tuple[int, int, int]],
    *,
    bound_s: float = 10,
    faults: tuple[tuple[int, int], ...] = (),
    hold_s: float | None = None,
    until_s: int = 100,
) -> GroupHistory:
    """Partition 0: (second, offset) processed by one start; (second, hw, lso) sampled."""
    return GroupHistory(
        processed={0: _journal([(t, o, 0) for t, o in processed])},
        commits={},
        ends={0: Ends(*(np.array(c, dtype=np.int64) for c in zip(*_us(ends), strict=True)))},
        faults=tuple((a * S, b * S) for a, b in faults),
        observed=(0, until_s * S),
        stuck_us=int(bound_s * S),
        lso_hold_us=None if hold_s is None else int(hold_s * S),
    )


def _us(rows: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    return [(t * S, hw, lso) for t, hw, lso in rows]


def _journal(rows: list[tuple[int, int, int]]) -> Journal:
    """(second, offset, start) rows."""
    if not rows:
        return Journal.empty()
    ts, offset, start = zip(*rows, strict=True)
    return Journal(
        np.array(ts, dtype=np.int64) * S, np.array(offset, dtype=np.int64), np.array(start)
    )


# ---------------------------------------------------------------------------------------------
# stuck


def test_a_stall_exactly_at_the_bound_is_not_stuck_and_one_microsecond_more_is() -> None:
    ends = [(0, 50, 50)]
    at_bound = history([(0, 9)], ends, bound_s=10, until_s=10)
    assert list(windows_of(at_bound)) == []
    past = history([(0, 9)], ends, bound_s=10 - 1e-6, until_s=10)
    assert list(windows_of(past)) == [StuckWindow(0, 0, 10 * S, 10, 50)]


def test_a_stall_while_the_end_did_not_move_past_the_position_is_not_stuck() -> None:
    # The group read everything there was (position 50 = end 50) and waited 90 s for more.
    idle = history([(0, 49)], [(t, 50, 50) for t in range(0, 100, 5)], bound_s=10)
    assert list(windows_of(idle)) == []


def test_a_stall_the_fault_covered_is_judged_by_the_time_after_the_heal() -> None:
    ends = [(0, 10, 10), (5, 60, 60)]
    # Behind from 5 s to 40 s (progress then); a fault from 2 s to 30 s leaves 10 s: not stuck.
    covered = history([(0, 9), (40, 59)], ends, bound_s=10, faults=((2, 30),))
    assert list(windows_of(covered)) == []
    # Healed at 25 s instead: 15 s of the stall after the heal.
    healed = history([(0, 9), (40, 59)], ends, bound_s=10, faults=((2, 25),))
    assert list(windows_of(healed)) == [StuckWindow(0, 5 * S, 40 * S, 10, 60)]


def test_a_last_stable_offset_held_past_the_transaction_timeout_makes_the_group_stuck() -> None:
    # The group sits at the last stable offset 20 while the log grows to 80: within the
    # transaction timeout (30 s) it waits on an open transaction; after it, it is stuck.
    ends = [(t, 20 + t, 20) for t in range(0, 60)]
    waiting = history([(0, 19)], ends, bound_s=10, hold_s=30, until_s=60)
    (window,) = windows_of(waiting)  # below the high watermark from 1 s: held past 31 s
    assert window == StuckWindow(0, 32 * S, 60 * S, 20, 79, lso_held=True)
    shorter = history([(0, 19)], ends, bound_s=10, hold_s=50, until_s=60)
    assert list(windows_of(shorter)) == []  # held 59 s - 50 s = 9 s: within the bound


def test_an_end_past_nothing_but_markers_and_aborted_records_is_nothing_to_read() -> None:
    # read_committed: the group read up to 9; 10..14 were an aborted transaction and its
    # marker, so the end 15 leaves nothing to read until the record at 15 lands at 60 s.
    ends = [(0, 15, 15), (60, 16, 16)]
    base = history([(0, 9)], ends, bound_s=10)
    records = np.array([*range(10), 15], dtype=np.int64)
    assert list(windows_of(replace(base, records={0: records}))) == [
        StuckWindow(0, 60 * S, 100 * S, 10, 16)
    ]
    assert list(windows_of(base)) == [StuckWindow(0, 0, 100 * S, 10, 16)]  # without the read-back


def test_a_partition_without_samples_of_its_ends_is_never_stuck() -> None:
    unknown = history([(0, 9)], [(0, -1, -1)], bound_s=1)
    assert list(windows_of(unknown)) == []


# ---------------------------------------------------------------------------------------------
# reset


def journals(
    processed: list[tuple[int, int, int]],
    commits: list[tuple[int, int, int]],
    commits_first: bool = True,
) -> GroupHistory:
    """A history of partition 0 from (second, offset, start) rows."""
    return GroupHistory(
        {0: _journal(processed)}, {0: _journal(commits)}, {}, (), commits_first=commits_first
    )


def test_a_new_member_resuming_at_the_earliest_is_a_reset() -> None:
    processed = [(1, o, 0) for o in range(0, 100)] + [(10, 0, 1), (11, 1, 1)]
    commits = [(2, 100, 0)]
    assert list(resets(journals(processed, commits))) == [Reset(0, 10 * S, 0, 100)]


def test_a_rewind_to_the_committed_offset_after_a_crash_is_no_reset() -> None:
    # Start 0 processed up to 149 but committed only 100 before it died: start 1 resumes at 100.
    processed = [(1, o, 0) for o in range(0, 150)] + [(10, 100, 1), (11, 101, 1)]
    assert list(resets(journals(processed, [(2, 100, 0)]))) == []


def test_a_member_that_jumps_back_below_its_own_commits_is_a_reset() -> None:
    processed = [(1, 10, 0), (2, 11, 0), (5, 0, 0)]
    commits = [(1, 10, 0), (3, 12, 0)]
    after_process = journals(processed, commits, commits_first=False)
    assert list(resets(after_process)) == [Reset(0, 5 * S, 0, 12)]
    # Where a batch may be committed before it is processed, the commit after the previous
    # record may be of the batch in hand: only the one before it counts.
    assert list(resets(journals(processed, commits))) == [Reset(0, 5 * S, 0, 10)]


def test_before_process_commits_of_the_batch_in_hand_are_not_a_reset() -> None:
    # before-process: the batch 0..9 is committed (10) before it is processed.
    processed = [(2, o, 0) for o in range(10)]
    assert list(resets(journals(processed, [(1, 10, 0)]))) == []


def test_a_paused_member_finishing_its_batch_after_a_takeover_is_no_reset() -> None:
    # Start 0 froze after 49; start 1 took over at the commit 50 and committed 80; start 0 then
    # finished its batch (50..59) by itself: each start read forward, none resumed below.
    processed = [(1, o, 0) for o in range(50)] + [(5, o, 1) for o in range(50, 80)]
    processed += [(9, o, 0) for o in range(50, 60)]
    assert list(resets(journals(processed, [(2, 50, 0), (6, 80, 1)]))) == []


# ---------------------------------------------------------------------------------------------
# A crafted run directory, through check_run


def write_journal(run_dir: Path, member: int, start: int, rows: list[tuple[int, int]],
                  commits: list[tuple[int, int]]) -> None:  # fmt: skip
    """Member `member`'s start `start`: processed (ts_us, offset) rows of partition 0 (msg_id =
    offset + 1), and successful commits (ts_us, offset)."""
    files = layout.consumer_journal(member, start)
    with ipc.new_stream(str(run_dir / files.processed), PROCESSED_SCHEMA) as writer:
        for ts, offset in rows:
            columns = [[offset + 1], [0], [offset], [member], [ts]]
            writer.write_batch(pa.record_batch(columns, schema=PROCESSED_SCHEMA))
    with ipc.new_stream(str(run_dir / files.commits), COMMIT_SCHEMA) as writer:
        for ts, offset in commits:
            columns = [[0], [offset], [member], [ts], ["ok"]]
            writer.write_batch(pa.record_batch(columns, schema=COMMIT_SCHEMA))


def ends_sample(t_s: float, hw: int, leader: int = 1) -> dict[str, Any]:
    return {
        "type": "sample",
        "ts_us": T0 + int(t_s * S),
        "ends_us": T0 + int(t_s * S),
        "partitions": [{"partition": 0, "leader": leader, "isr": [1, 2, 3]}],
        "ends": [{"partition": 0, "high_watermark": hw, "last_stable": hw}],
    }


def group_run(tmp_path: Path) -> Path:
    """Six messages at offsets 0..5; the group reads 0..2 by 2 s, then nothing more until it
    left at 60 s (bound 20 s), though the end stood at 6: one stuck window from 2 s to 60 s.
    Member 1 joins at 30 s after a leader change and resumes at 0 below the commit 3: a reset."""
    acked, readback = in_order(6)
    events = [
        {"type": "phase", "phase": "consumers-ready", "ts_us": T0},
        *(ends_sample(t, 6 if t >= 2 else 3, leader=1 if t < 25 else 2) for t in range(0, 61)),
        {"type": "phase", "phase": "heal", "ts_us": T0 + 50 * S},
        {"type": "consumers", "ts_us": T0 + 70 * S, "caught_up": False, "waited_s": 10.0,
         "committed": {"0": 3}, "end_offsets": {"0": 6}, "journal_errors": [],
         "stuck_s": 20.0},
    ]  # fmt: skip
    run_dir = write_run(tmp_path, "g", acked, readback, events=events)
    write_journal(run_dir, 0, 0, [(T0 + S, 0), (T0 + S, 1), (T0 + 2 * S, 2)], [(T0 + 2 * S, 3)])
    write_journal(run_dir, 1, 0, [(T0 + 30 * S, 0)], [])
    return run_dir


def test_a_crafted_run_has_its_stuck_window_and_its_reset(tmp_path: Path) -> None:
    run_dir = group_run(tmp_path)
    records = np.arange(6, dtype=np.int64)  # the read-back: offsets 0..5 of partition 0
    facts = liveness_facts(RunEvidence.read(run_dir), np.zeros(6, dtype=np.int64), records)
    # From 2 s (the end 6 past position 3) to the reset's record at 30 s (progress, though it
    # moved the position no further), then on until the catch-up ended at 60 s.
    assert facts.stuck == (
        StuckWindow(0, T0 + 2 * S, T0 + 30 * S, 3, 6),
        StuckWindow(0, T0 + 30 * S, T0 + 60 * S, 3, 6),
    )
    assert all(type(w.from_us) is int and type(w.to_us) is int for w in facts.stuck)
    json.dumps(facts.examples(20))  # results.json takes them as they are
    assert facts.resets == (Reset(0, T0 + 30 * S, 0, 3, leader_changed=True),)
    assert facts.seconds[(T0 // S) + 2] == {"stuck": 1}
    assert facts.seconds[(T0 // S) + 30]["reset"] == 3
    counts = check_run(RunInput(run_dir, complete=True, unlocated_acks=False)).counts
    assert counts[AnomalyName.STUCK] == 2 and counts[AnomalyName.RESET] == 1


# ---------------------------------------------------------------------------------------------
# The judge


GROUP = {**CP, "consumers": 2, "consumer_commit": "after-process"}


def judged(config: dict[str, Any], examples: dict[str, list[dict[str, Any]]], **counts: int):
    events = [
        {"type": "consumers", "ts_us": T0, "caught_up": True, "journal_errors": []},
        {**sample(1, [1, 2, 3]), "ends": [{"partition": 0, "high_watermark": 9}]},
    ]
    return judge_repetition(result(config, examples=examples, **counts), events)


def window(lso_held: bool = False) -> dict[str, Any]:
    return {"partition": 0, "from_us": T0, "to_us": T0 + 40 * S, "position": 3, "end": 9,
            "lso_held": lso_held}  # fmt: skip


def reset(end_below: bool = False) -> dict[str, Any]:
    return {"partition": 0, "at_us": T0, "reset_to": 0, "committed": 500, "reprocessed": 500,
            "leader_changed": True, "end_below": end_below}  # fmt: skip


def test_every_liveness_case_has_a_row_with_its_citation() -> None:
    assert {(r.anomaly, r.case) for r in LIVENESS_TABLE} >= {
        ("stuck", "any"), ("reset", "any"), ("stuck", "lso-held"), ("reset", "end-below"),
    }  # fmt: skip
    assert all(r.citation for r in LIVENESS_TABLE)


def test_a_group_stuck_behind_the_end_is_unknown_naming_the_window() -> None:
    verdict = judged(GROUP, {"stuck": [window()]}, stuck=1)
    assert verdict.verdict == Verdict.UNKNOWN
    assert any("p0 from t=" in r and "no bound" in r for r in verdict.reasons)


def test_a_last_stable_offset_held_past_the_transaction_timeout_is_a_violation() -> None:
    verdict = judged(GROUP, {"stuck": [window(lso_held=True)]}, stuck=1)
    assert verdict.verdict == Verdict.VIOLATION
    assert any("transaction.timeout.ms" in r for r in verdict.violations)


def test_held_after_an_unclean_election_names_the_jiras_and_is_unknown() -> None:
    unclean = {**GROUP, "unclean_leader_election": True}
    verdict = judged(unclean, {"stuck": [window(lso_held=True)]}, stuck=1)
    assert verdict.verdict == Verdict.UNKNOWN
    assert any("KAFKA-7408" in r and "KAFKA-20716" in r for r in verdict.reasons)


def test_a_reset_where_the_log_below_the_commit_was_kept_is_a_violation() -> None:
    verdict = judged(GROUP, {"reset": [reset()]}, reset=1)
    assert verdict.verdict == Verdict.VIOLATION
    assert any("resumed at 0 below its commit 500" in r for r in verdict.violations)


def test_a_reset_after_the_committed_offset_was_gone_is_allowed() -> None:
    verdict = judged(GROUP, {"reset": [reset(end_below=True)]}, reset=1)
    assert verdict.verdict == Verdict.PASS
    assert any("auto.offset.reset" in r for r in verdict.reasons)


def test_a_reset_where_loss_is_allowed_is_unknown() -> None:
    ap = {**GROUP, "acks": "1", "min_insync_replicas": 1, "enable_idempotence": False,
          "unclean_leader_election": True}  # fmt: skip
    verdict = judged(ap, {"reset": [reset()]}, reset=1)
    assert verdict.verdict == Verdict.UNKNOWN


def test_resets_beyond_the_examples_are_not_judged() -> None:
    verdict = judged(GROUP, {"reset": [reset(end_below=True)]}, reset=3)
    assert verdict.verdict == Verdict.UNKNOWN
    assert any("2 more reset" in r for r in verdict.reasons)


def test_a_run_without_ends_says_stuck_was_not_judged() -> None:
    events = [{"type": "consumers", "ts_us": T0, "caught_up": True, "journal_errors": []}]
    verdict = judge_repetition(result(GROUP), events)
    assert verdict.verdict == Verdict.PASS
    assert any("stuck not judged" in r for r in verdict.reasons)


def test_every_quote_of_the_liveness_rows_is_in_the_consumer_liveness_section() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "kafka-reliability.md").read_text()
    section = doc.split("## Consumer liveness", 1)[1].split("\n## ", 1)[0]
    flat = " ".join(section.split())
    quotes = [q for row in LIVENESS_TABLE for q in re.findall("“([^”]+)”", row.citation)]
    assert quotes
    for quote in quotes:
        assert " ".join(quote.split()) in flat, quote
