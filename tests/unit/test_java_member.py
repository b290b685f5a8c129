"""The Java consumer-group member's Python side: its journal files turned into the Arrow streams
the analysis reads (a hypothesis property against an oracle of whole lines, torn and malformed
ones included), the file names, its command line, and the process adapter the group's faults
use, driven by a real program (a shell script printing what the Java member prints)."""

from __future__ import annotations

import json
import queue
import signal
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.rundir import layout
from harness.rundir.records import (
    ASSIGNMENT_SCHEMA,
    COMMIT_SCHEMA,
    PROCESSED_SCHEMA,
    AssignmentKind,
    CommitMode,
)
from harness.rundir.streams import read_stream
from harness.workload.consumer_group.java import (
    AssignmentJournal,
    JavaMemberProcess,
    convert_journal,
    convert_journals,
    member_argv,
)
from harness.workload.consumer_group.librdkafka import ASSIGNED, READY, ConsumerTask
from harness.workload.processes import BuiltProgram
from tests.examples import examples

ids = st.integers(min_value=-1, max_value=10**15)
small = st.integers(min_value=0, max_value=2**31 - 1)
stamp = st.integers(min_value=0, max_value=2**62)
processed_row = st.tuples(ids, small, stamp, stamp)
commit_row = st.tuples(small, stamp, st.sampled_from(["ok", "CommitFailedException", 'é"x']), stamp)
# What can end a journal file besides whole lines: a torn line, or a line that is not one of ours.
ending = st.sampled_from(["", "[1,2", "not json\n", "[1,2,3]\n", '{"a":1}\n', "[true,1,2,3]\n"])


def _write(path: Path, rows: list[tuple], tail: str) -> None:
    path.write_text("".join(json.dumps(list(r)) + "\n" for r in rows) + tail)


@pytest.mark.property
@settings(max_examples=examples(0.3), deadline=None)
@given(
    st.lists(processed_row, max_size=30),
    st.lists(commit_row, max_size=10),
    ending,
    ending,
    st.integers(min_value=0, max_value=3),
    st.integers(min_value=0, max_value=3),
)
def test_a_journal_converts_to_the_rows_of_its_whole_lines(
    tmp_path_factory, processed, commits, processed_tail, commits_tail, member, start
) -> None:
    run_dir = tmp_path_factory.mktemp("run")
    source = layout.java_consumer_journal(member, start)
    _write(run_dir / source.processed, processed, processed_tail)
    _write(run_dir / source.commits, commits, commits_tail)
    convert_journal(run_dir, member, start)
    target = layout.consumer_journal(member, start)
    got = read_stream(run_dir / target.processed, PROCESSED_SCHEMA).to_pylist()
    assert got == [
        {
            "msg_id": None if m < 0 else m,
            "partition": p,
            "offset": o,
            "consumer": member,
            "ts_us": t,
        }
        for m, p, o, t in processed
    ]
    got = read_stream(run_dir / target.commits, COMMIT_SCHEMA).to_pylist()
    assert got == [
        {"partition": p, "offset": o, "consumer": member, "ts_us": t, "outcome": outcome}
        for p, o, outcome, t in commits
    ]


def test_every_start_of_a_run_is_converted_once(tmp_path: Path) -> None:
    for member, start in ((0, 0), (0, 1), (1, 0)):
        source = layout.java_consumer_journal(member, start)
        _write(tmp_path / source.processed, [(member * 10 + start, 0, 5, 1)], "")
    # (1, 1) has no processed file: a start that died before opening it converts nothing.
    assert convert_journals(tmp_path) == 3
    assert convert_journals(tmp_path) == 0  # the streams exist: nothing is written again
    rows = read_stream(tmp_path / layout.consumer_journal(0, 1).processed, PROCESSED_SCHEMA)
    assert rows["msg_id"].to_pylist() == [1] and rows["consumer"].to_pylist() == [0]
    commits = read_stream(tmp_path / layout.consumer_journal(1, 0).commits, COMMIT_SCHEMA)
    assert (
        commits.num_rows == 0
    )  # no commits file: an empty stream, as a member that never committed


@given(st.integers(min_value=0, max_value=99), st.integers(min_value=0, max_value=999))
def test_a_journal_name_gives_its_member_and_start(member: int, start: int) -> None:
    files = layout.java_consumer_journal(member, start)
    assert layout.java_consumer_start(files.processed) == (member, start)
    assert files.processed.endswith(".jsonl") and files.commits.endswith(".jsonl")
    assert files.processed != layout.consumer_journal(member, start).processed


def _task(tmp_path: Path, commit: CommitMode = CommitMode.AFTER_PROCESS) -> ConsumerTask:
    return ConsumerTask(
        member=1,
        start=2,
        bootstrap="127.0.0.1:9092",
        topic="chaos",
        group_id="g",
        commit=commit,
        run_dir=tmp_path,
        parent_pid=0,
        log_level=20,
        processing_s=0.0015,
    )


def test_the_command_line_carries_the_task(tmp_path: Path) -> None:
    argv = member_argv(BuiltProgram("3.8.0", ("java", "-cp", "x", "Main")), _task(tmp_path))
    options = dict(zip(argv[4::2], argv[5::2], strict=True))
    assert argv[:4] == ["java", "-cp", "x", "Main"]
    files = layout.java_consumer_journal(1, 2)
    assert options == {
        "--bootstrap-server": "127.0.0.1:9092",
        "--topic": "chaos",
        "--group": "g",
        "--client-id": "kchaos-consumer-1",
        "--commit": "after-process",
        "--processing-ms": "2",
        "--session-timeout-ms": "6000",
        "--processed": str(tmp_path / files.processed),
        "--commits": str(tmp_path / files.commits),
    }


# A stand-in for the Java member printing what it prints; its arguments (the member's) follow.
SCRIPT = """
echo '{"name":"effective_config","config":{"isolation.level":"read_committed","x":1}}'
echo '{"name":"startup_complete"}'
echo 'a line that is not JSON'
echo '{"name":"partitions_assigned","partitions":[0,2],"ts_us":5}'
trap 'echo "{\\"name\\":\\"partitions_revoked\\",\\"partitions\\":[],\\"ts_us\\":9}"; exit 0' TERM
[ "$MODE" = fail ] && { echo '{"name":"error","message":"boom"}'; exit 1; }
while true; do sleep 0.05; done
"""


def _process(tmp_path: Path, mode: str) -> tuple[JavaMemberProcess, list[int], queue.Queue]:
    program = BuiltProgram("0", ("sh", "-c", f"MODE={mode}; {SCRIPT}", "member"))
    counters, outcomes = [0, 0], queue.Queue()
    process = JavaMemberProcess(program, _task(tmp_path), counters, outcomes)
    process.start()
    return process, counters, outcomes


def _until(condition, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_the_process_reports_its_partitions_and_leaves_on_sigterm(tmp_path: Path) -> None:
    process, counters, outcomes = _process(tmp_path, "run")
    _until(lambda: counters[ASSIGNED] == 2)
    assert counters[READY] == 1 and process.exitcode is None
    assert process.config == {"isolation.level": "read_committed", "x": "1"}
    process.terminate()
    process.join(10)
    assert process.exitcode == 0
    assert outcomes.get(timeout=10) == (1, 2, None)
    assert counters[ASSIGNED] == 0
    assert (tmp_path / layout.java_consumer_log(1, 2)).is_file()
    journal = tmp_path / layout.consumer_journal(1, 2).assignments
    rows = read_stream(journal, ASSIGNMENT_SCHEMA).to_pylist()
    assert [(r["partition"], r["kind"], r["ts_us"]) for r in rows] == [
        (0, "assigned", 5), (2, "assigned", 5), (0, "revoked", 9), (2, "revoked", 9),
    ]  # fmt: skip
    assert {r["consumer"] for r in rows} == {1}


def test_the_assignment_journal_records_the_change_each_line_shows(tmp_path: Path) -> None:
    journal = AssignmentJournal(tmp_path / "a.arrows", member=4)
    journal.holding({"partitions": [1, 3], "ts_us": 10}, AssignmentKind.REVOKED)
    journal.holding({"partitions": [1, 3], "ts_us": 11}, AssignmentKind.REVOKED)  # no change
    journal.holding({"partitions": [3, 5], "ts_us": 12}, AssignmentKind.REVOKED)
    journal.holding({"partitions": [], "ts_us": 13}, AssignmentKind.LOST)
    journal.holding({"partitions": [0]}, AssignmentKind.REVOKED)  # an older program: no stamp
    journal.close()
    assert journal.error is None
    rows = read_stream(tmp_path / "a.arrows", ASSIGNMENT_SCHEMA).to_pylist()
    assert [(r["partition"], r["kind"], r["ts_us"]) for r in rows[:-1]] == [
        (1, "assigned", 10), (3, "assigned", 10), (5, "assigned", 12), (1, "revoked", 12),
        (3, "lost", 13), (5, "lost", 13),
    ]  # fmt: skip
    assert rows[-1]["partition"] == 0 and rows[-1]["ts_us"] > 13


def test_a_failing_member_reports_its_error_and_a_killed_one_none(tmp_path: Path) -> None:
    process, _, outcomes = _process(tmp_path, "fail")
    assert outcomes.get(timeout=10) == (1, 2, "boom")
    assert process.exitcode == 1
    process, counters, outcomes = _process(tmp_path, "run")
    _until(lambda: counters[ASSIGNED] == 2)
    process.kill()
    process.join(10)
    assert process.exitcode == -signal.SIGKILL
    assert outcomes.get(timeout=10) == (1, 2, None)
