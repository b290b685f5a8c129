"""The consumer group's classes and verdicts, on crafted run directories and results (no Docker,
no Spark): consumer_unprocessed, consumer_reprocessed, and each commit mode's rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from analysis.checks import consumers as consumer_check
from analysis.checks.messages import RunInput, check_run
from analysis.judge.outcomes import Verdict
from analysis.model.evidence import RunEvidence
from analysis.model.results import Sensitivity
from harness.rundir import layout
from harness.rundir.records import ASSIGNMENT_SCHEMA, COMMIT_SCHEMA, PROCESSED_SCHEMA
from tests.unit.reconcile_runs import T0_US, in_order, read, sent, write_run
from tests.unit.verdict_runs import CP, judge_repetition, result

NO_ACKS = consumer_check.AckedOffsets(*(np.array([], dtype=np.int64) for _ in range(3)))


def journal(
    run_dir: Path,
    member: int,
    start: int,
    rows: list[tuple[int, int, int]],
    ts_us: int = 0,
    commits: list[tuple[int, int, int, str]] = (),
) -> Path:
    """A member start's processed journal holding (msg_id, partition, offset) rows, one batch
    each, processed at `ts_us`; its commits journal of (partition, offset, ts_us, outcome)."""
    files = layout.consumer_journal(member, start)
    with ipc.new_stream(str(run_dir / files.processed), PROCESSED_SCHEMA) as writer:
        for msg_id, partition, offset in rows:
            writer.write_batch(
                pa.record_batch(
                    [[msg_id], [partition], [offset], [member], [ts_us]], schema=PROCESSED_SCHEMA
                )
            )
    with ipc.new_stream(str(run_dir / files.commits), COMMIT_SCHEMA) as writer:
        for partition, offset, stamp, outcome in commits:
            columns = [[partition], [offset], [member], [stamp], [outcome]]
            writer.write_batch(pa.record_batch(columns, schema=COMMIT_SCHEMA))
    return run_dir / files.processed


def group_end(committed: dict[int, int], caught_up: bool = True, **fields: Any) -> dict:
    """The `consumers` event the harness writes once every member has left."""
    return {
        "type": "consumers",
        "ts_us": 1,
        "caught_up": caught_up,
        "committed": {str(p): o for p, o in committed.items()},
        "end_offsets": {str(p): o for p, o in committed.items()},
        "journal_errors": [],
        **fields,
    }


def facts(run_dir: Path) -> dict[str, int]:
    """check_run's counts of a complete run."""
    return check_run(RunInput(run_dir, complete=True, unlocated_acks=False)).counts


def six_messages(tmp_path: Path, committed: dict[int, int]) -> Path:
    """Messages 1..6 acked at offsets 0..5 of partition 0, all read back where acked."""
    acked, readback = in_order(6)
    return write_run(tmp_path, "c", acked, readback, events=[group_end(committed)])


def test_one_unprocessed_message_below_the_committed_offset(tmp_path: Path):
    run_dir = six_messages(tmp_path, {0: 6})
    journal(run_dir, 0, 0, [(1, 0, 0), (2, 0, 1)])
    journal(run_dir, 1, 0, [(4, 0, 3), (5, 0, 4), (6, 0, 5)])
    check = check_run(RunInput(run_dir, complete=True, unlocated_acks=False))
    assert check.counts["consumer_unprocessed"] == 1
    assert check.counts["consumer_reprocessed"] == 0
    assert check.examples["consumer_unprocessed"] == [{"msg_id": 3, "partition": 0, "offset": 2}]


def test_messages_past_the_committed_offset_are_not_unprocessed(tmp_path: Path):
    run_dir = six_messages(tmp_path, {0: 2})
    journal(run_dir, 0, 0, [(1, 0, 0), (2, 0, 1)])
    assert facts(run_dir)["consumer_unprocessed"] == 0


def test_without_a_recorded_end_every_unprocessed_message_counts(tmp_path: Path):
    acked, readback = in_order(4)
    run_dir = write_run(tmp_path, "c", acked, readback)
    journal(run_dir, 0, 0, [(1, 0, 0)])
    assert facts(run_dir)["consumer_unprocessed"] == 3


def test_failed_sends_are_never_unprocessed(tmp_path: Path):
    acked = [sent(1, 0), sent(2, None, status="failed")]
    run_dir = write_run(tmp_path, "c", acked, [read(1, 0), read(2, 1)], events=[group_end({0: 2})])
    journal(run_dir, 0, 0, [(1, 0, 0)])
    assert facts(run_dir)["consumer_unprocessed"] == 0


def test_one_record_processed_twice_by_two_starts_is_one_reprocessed(tmp_path: Path):
    run_dir = six_messages(tmp_path, {0: 6})
    journal(run_dir, 0, 0, [(1, 0, 0), (2, 0, 1), (3, 0, 2), (4, 0, 3)])
    journal(run_dir, 0, 1, [(4, 0, 3), (5, 0, 4), (6, 0, 5)])  # restarted before its commit
    check = check_run(RunInput(run_dir, complete=True, unlocated_acks=False))
    assert check.counts["consumer_reprocessed"] == 1
    assert check.counts["consumer_unprocessed"] == 0
    example = {"msg_id": 4, "partition": 0, "offset": 3, "processed": 2}
    assert check.examples["consumer_reprocessed"] == [example]


def test_a_producer_duplicate_processed_once_per_record_is_not_reprocessed(tmp_path: Path):
    acked = [sent(1, 0), sent(2, 1)]
    readback = [read(1, 0), read(2, 1), read(2, 2)]  # the producer's retry wrote 2 twice
    run_dir = write_run(tmp_path, "c", acked, readback, events=[group_end({0: 3})])
    journal(run_dir, 0, 0, [(1, 0, 0), (2, 0, 1), (2, 0, 2)])
    counts = facts(run_dir)
    assert counts["duplicated"] == 1
    assert counts["consumer_reprocessed"] == 0


def test_a_killed_members_torn_journal_tail_is_left_out(tmp_path: Path):
    run_dir = six_messages(tmp_path, {0: 6})
    path = journal(run_dir, 0, 0, [(m, 0, m - 1) for m in range(1, 7)])
    path.write_bytes(path.read_bytes()[:-40])  # SIGKILL mid-write: the last batch is torn
    assert facts(run_dir)["consumer_unprocessed"] == 1


def test_the_timeline_counts_processed_records_and_refused_commits_per_second(tmp_path: Path):
    run_dir = six_messages(tmp_path, {0: 6})
    second = T0_US // 1_000_000 + 1  # the second after the six sends
    commits = [(0, 3, second * 1_000_000, "ok"), (0, 6, second * 1_000_000 + 5, "REBALANCE")]
    journal(run_dir, 0, 0, [(m, 0, m - 1) for m in range(1, 7)], second * 1_000_000, commits)
    timeline = check_run(RunInput(run_dir, complete=True, unlocated_acks=False)).seconds
    assert timeline[second]["processed"] == 6
    assert timeline[second]["commits_failed"] == 1
    assert timeline[second - 1]["sent"] == 6 and "processed" not in timeline[second - 1]


def commits(rows: list[tuple[int, int, int, str]]) -> pa.Table:
    """A commits table of (partition, offset, ts_us, outcome) rows, all by member 0."""
    columns = list(zip(*rows, strict=True)) if rows else [(), (), (), ()]
    partition, offset, ts_us, outcome = columns
    return pa.table([partition, offset, [0] * len(rows), ts_us, outcome], schema=COMMIT_SCHEMA)


def test_group_lag_is_acked_log_end_minus_committed_offset_summed_over_partitions():
    s = 1_700_000_000  # epoch seconds; each ack or commit at s + k seconds + 0.5
    at = [(s + k) * 1_000_000 + 500_000 for k in range(4)]
    acked = consumer_check.AckedOffsets(
        partition=np.array([0, 0, 1, 0, 1]),
        offset=np.array([0, 1, 0, 2, 1]),
        ack_ts_us=np.array([at[0], at[0], at[0], at[1], at[1]]),
    )
    table = commits([
        (0, 2, at[1], "ok"),  # partition 0 committed up to offset 2 in second 1
        (1, 2, at[2], "REBALANCE_IN_PROGRESS"),  # refused: the committed offset stays 0
        (1, 2, at[3], "ok"),
    ])  # fmt: skip
    # second 0: p0 end 2, p1 end 1, nothing committed; second 1: p0 3-2, p1 2-0;
    # second 2: unchanged (the refused commit counts for nothing); second 3: p1 caught up.
    assert consumer_check.group_lag(acked, table) == {s: 3, s + 1: 3, s + 2: 3, s + 3: 1}


def test_group_lag_never_goes_below_zero_nor_starts_before_the_first_ack():
    s = 1_700_000_000
    acked = consumer_check.AckedOffsets(
        partition=np.array([0]), offset=np.array([4]), ack_ts_us=np.array([s * 1_000_000 + 1])
    )
    early = commits([(0, 9, (s - 5) * 1_000_000, "ok")])  # a commit past the acked end
    assert consumer_check.group_lag(acked, early) == {s: 0}
    assert consumer_check.group_lag(NO_ACKS, early) == {}


def test_the_timeline_carries_the_group_lag_until_the_last_commit(tmp_path: Path):
    run_dir = six_messages(tmp_path, {0: 6})
    second = T0_US // 1_000_000 + 1  # the second after the six sends
    rows = [(0, 3, second * 1_000_000, "ok"), (0, 6, (second + 2) * 1_000_000, "ok")]
    journal(run_dir, 0, 0, [(m, 0, m - 1) for m in range(1, 7)], second * 1_000_000, rows)
    timeline = check_run(RunInput(run_dir, complete=True, unlocated_acks=False)).seconds
    lags = [timeline[s].get("group_lag") for s in range(second - 1, second + 3)]
    assert lags == [6, 3, 3, 0]
    assert second + 3 not in timeline


def test_the_group_lag_counts_only_acknowledged_sends_with_an_offset(tmp_path: Path):
    # A failed report and an ok one without an offset, both in partition 0 and acked seconds
    # after the last commit, extend neither the group lag nor the seconds it covers.
    acked, readback = in_order(6)
    second = T0_US // 1_000_000 + 1  # the second after the six sends
    failed = {**sent(7, None, status="failed"), "ack_ts_us": (second + 4) * 1_000_000}
    unlocated = {**sent(8, None), "ack_ts_us": (second + 6) * 1_000_000}
    events = [group_end({0: 6})]
    run_dir = write_run(tmp_path, "c", [*acked, failed, unlocated], readback, events=events)
    rows = [(0, 3, second * 1_000_000, "ok"), (0, 6, (second + 2) * 1_000_000, "ok")]
    journal(run_dir, 0, 0, [(m, 0, m - 1) for m in range(1, 7)], second * 1_000_000, rows)
    timeline = check_run(RunInput(run_dir, complete=True, unlocated_acks=False)).seconds
    lagged = {s: row["group_lag"] for s, row in timeline.items() if "group_lag" in row}
    assert lagged == {second - 1: 6, second: 3, second + 1: 3, second + 2: 0}


def _stream(path: Path, schema: pa.Schema, rows: list[dict[str, Any]]) -> None:
    with ipc.new_stream(str(path), schema) as writer:
        writer.write_batch(pa.RecordBatch.from_pylist(rows, schema=schema))


@pytest.mark.parametrize(("commit", "skips"), [("before-process", 0), ("after-process", 1)])
def test_a_failed_commit_breaks_a_poll_step_in_before_process_mode_only(
    tmp_path: Path, commit: str, skips: int
):
    # Member 0 processed offsets 0, 1, then 5, past 2..4 the read-back holds; its commit of
    # partition 0 failed in between. Before-process: that batch was never to be processed.
    acked, readback = in_order(6)
    events = [group_end({0: 6}, commit=commit)]
    run_dir = write_run(tmp_path, "c", acked, readback, events=events)
    files = layout.consumer_journal(0, 0)
    processed = [
        {"msg_id": o + 1, "partition": 0, "offset": o, "consumer": 0, "ts_us": ts}
        for o, ts in ((0, 10), (1, 11), (5, 30))
    ]
    _stream(run_dir / files.processed, PROCESSED_SCHEMA, processed)
    assigned = [{"consumer": 0, "partition": 0, "kind": "assigned", "ts_us": 5}]
    _stream(run_dir / files.assignments, ASSIGNMENT_SCHEMA, assigned)
    refused = [{"partition": 0, "offset": 2, "consumer": 0, "ts_us": 20, "outcome": "X"}]
    _stream(run_dir / files.commits, COMMIT_SCHEMA, refused)
    assert facts(run_dir)["poll_skip"] == skips


def test_a_run_without_a_group_has_no_consumer_counts(tmp_path: Path):
    acked, readback = in_order(3)
    run_dir = write_run(tmp_path, "c", acked, readback)
    counts = facts(run_dir)
    assert "consumer_unprocessed" not in counts
    assert "poll_skip" not in counts  # nor a member's poll to judge


# ---------------------------------------------------------------------------------------------
# Verdicts by commit mode


def group_result(mode: str, **counts: int) -> dict[str, Any]:
    """A results.json of a CP run with a group of 3 committing in `mode`."""
    config = {**CP, "fault_class": "consumer-kill", "consumers": 3, "consumer_commit": mode}
    return result(config, **counts)


def verdict(res: dict[str, Any], end: dict | None = None):
    return judge_repetition(res, [end if end is not None else group_end({0: 9})])


def test_at_least_once_forbids_unprocessed():
    judged = verdict(group_result("after-process", consumer_unprocessed=2))
    assert judged.verdict == Verdict.VIOLATION
    assert "forbidden unprocessed" in judged.violations[0]
    assert "at-least-once" in judged.violations[0]


def test_at_least_once_allows_reprocessed():
    judged = verdict(group_result("after-process", consumer_reprocessed=40))
    assert judged.verdict == Verdict.PASS
    assert any("40 reprocessed" in r and "allowed" in r for r in judged.reasons)


def test_at_most_once_allows_unprocessed_and_forbids_reprocessed():
    skipped = verdict(group_result("before-process", consumer_unprocessed=7))
    assert skipped.verdict == Verdict.PASS
    again = verdict(group_result("before-process", consumer_reprocessed=1))
    assert again.verdict == Verdict.VIOLATION
    assert "forbidden reprocessed" in again.violations[0]


def test_auto_commit_allows_both():
    judged = verdict(group_result("auto", consumer_unprocessed=3, consumer_reprocessed=9))
    assert judged.verdict == Verdict.PASS


def test_auto_commit_on_java_members_is_at_least_once():
    # KafkaConsumer's auto commit covers what earlier polls returned: the harness's Java member
    # processes each batch before it polls again, so nothing may be skipped.
    java = group_end({0: 9}, client="java 3.8.0")
    judged = verdict(group_result("auto", consumer_unprocessed=3), java)
    assert judged.verdict == Verdict.VIOLATION
    assert "Java client" in judged.violations[0]
    assert verdict(group_result("auto", consumer_reprocessed=9), java).verdict == Verdict.PASS


def test_a_group_that_did_not_catch_up_leaves_at_least_once_unknown():
    judged = verdict(group_result("after-process"), group_end({0: 4}, caught_up=False))
    assert judged.verdict == Verdict.UNKNOWN
    assert any("did not catch up" in r for r in judged.reasons)
    # At-most-once allows skipping: a group behind the end cannot break it.
    assert verdict(group_result("before-process"), group_end({0: 4}, caught_up=False)).verdict == (
        Verdict.PASS
    )


def test_an_unprocessed_message_below_the_commits_is_a_violation_even_when_behind():
    end = group_end({0: 4}, caught_up=False)
    judged = verdict(group_result("after-process", consumer_unprocessed=1), end)
    assert judged.verdict == Verdict.VIOLATION


def test_an_incomplete_consumer_journal_makes_the_repetition_unknown():
    end = group_end({0: 9}, journal_errors=["consumer-1 (start 0): journal: disk full"])
    judged = verdict(group_result("after-process"), end)
    assert judged.verdict == Verdict.UNKNOWN
    assert "disk full" in judged.reasons[0]


def test_no_consumers_event_is_unknown_and_a_run_without_a_group_is_not_judged_on_it():
    missing = verdicts_without_end(group_result("after-process"))
    assert missing.verdict == Verdict.UNKNOWN
    plain = judge_repetition(result(CP), [])
    assert plain.verdict == Verdict.PASS
    assert not any("consumer" in r for r in plain.reasons)


def verdicts_without_end(res: dict[str, Any]):
    return judge_repetition(res, [])


def hundred_processed(tmp_path: Path) -> Path:
    """Messages 1..100 acked at offsets 0..99 of partition 0, read back, each processed once."""
    acked, readback = in_order(100)
    run_dir = write_run(tmp_path, "c", acked, readback, events=[group_end({0: 100})])
    journal(run_dir, 0, 0, [(i, 0, i - 1) for i in range(1, 101)])
    return run_dir


def test_the_group_checks_pass_their_sensitivity_probe(tmp_path: Path):
    probe = consumer_check.consumer_facts(
        RunEvidence.read(hundred_processed(tmp_path)),
        np.arange(1, 101),
        np.zeros(100, dtype=np.int64),
        np.arange(100),
        NO_ACKS,
    ).sensitivity
    assert probe == Sensitivity(removed=2, found=2, passed=True)  # one hidden, one doubled


def test_positions_the_group_processed_twice_before_an_unclean_election_stay_out_of_the_probe(
    tmp_path: Path,
):
    """Before an unclean election the group processed other messages (1001..1090) at the
    offsets 1..90 now hold: those positions already count as reprocessed, so the probe takes
    its sample from 91..100 only, and finds what it planted."""
    acked, readback = in_order(100)
    run_dir = write_run(tmp_path, "c", acked, readback, events=[group_end({0: 100})])
    journal(run_dir, 0, 0, [(1000 + i, 0, i - 1) for i in range(1, 91)])
    journal(run_dir, 0, 1, [(i, 0, i - 1) for i in range(1, 101)])
    probe = consumer_check.consumer_facts(
        RunEvidence.read(run_dir),
        np.arange(1, 101),
        np.zeros(100, dtype=np.int64),
        np.arange(100),
        NO_ACKS,
    ).sensitivity
    assert probe == Sensitivity(removed=2, found=2, passed=True)


def test_a_group_check_blind_to_skips_fails_its_sensitivity_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    sighted = consumer_check._unprocessed

    def blind(processed_ids, msg_id, *rest):  # a planted bug: no skip is ever counted
        return sighted(processed_ids, msg_id, *rest) & False

    monkeypatch.setattr(consumer_check, "_unprocessed", blind)
    run_dir = hundred_processed(tmp_path)
    check = check_run(RunInput(run_dir, complete=True, unlocated_acks=False))
    assert check.sensitivity.passed is False
    assert check.sensitivity.found < check.sensitivity.removed


def test_the_liveness_facts_reach_the_runs_timeline(tmp_path: Path):
    from tests.unit.test_liveness import group_run

    facts = check_run(RunInput(group_run(tmp_path), complete=True, unlocated_acks=False))
    second = T0_US // 1_000_000
    assert facts.seconds[second + 10] == {"stuck": 1}  # within the window, nothing else
    assert facts.seconds[second + 30]["reset"] == 3


def test_liveness_and_poll_examples_stop_at_twenty_but_count_all(tmp_path: Path):
    from tests.unit.test_liveness import S, ends_sample, write_journal

    # Member 0 processes offsets 0..21 one every 25 s with the end at 22 (bound 20 s): a
    # stuck window before each of the 21 records after the first. Member 1 reads offsets 0
    # and 1 in turn 22 times within one assignment: 21 steps backwards.
    acked, readback = in_order(22)
    events = [
        {"type": "phase", "phase": "consumers-ready", "ts_us": T0_US},
        *(ends_sample(t, 22) for t in range(0, 540, 5)),
        group_end({0: 22}, stuck_s=20.0, ts_us=T0_US + 540 * S),
    ]
    run_dir = write_run(tmp_path, "c", acked, readback, events=events)
    write_journal(run_dir, 0, 0, [(T0_US + (25 * k + 1) * S, k) for k in range(22)], [])
    files = layout.consumer_journal(1, 0)
    rows = [
        {"msg_id": i % 2 + 1, "partition": 0, "offset": i % 2, "consumer": 1, "ts_us": 10 + i}
        for i in range(43)
    ]
    _stream(run_dir / files.processed, PROCESSED_SCHEMA, rows)
    assigned = [{"consumer": 1, "partition": 0, "kind": "assigned", "ts_us": 5}]
    _stream(run_dir / files.assignments, ASSIGNMENT_SCHEMA, assigned)
    facts = check_run(RunInput(run_dir, complete=True, unlocated_acks=False))
    assert facts.counts["stuck"] == 21 and len(facts.examples["stuck"]) == 20
    assert facts.counts["nonmonotonic_poll"] == 21
    assert len(facts.examples["nonmonotonic_poll"]) == 20
