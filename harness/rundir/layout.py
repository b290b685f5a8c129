"""The run directory's layout: the one contract between harness/ (which writes it) and analysis/.

This package (harness.rundir) owns every file name (here), Arrow schema and send status
(records), event type (events) and the reading of kept log segments (segments); it imports no
Kafka client, so the analysis can read runs on a machine without one.

    runs/<experiment>/<timestamp>/<cell>/<repetition>/   one repetition (a "run directory")
    runs/<experiment>/<timestamp>/                       plan, repetitions, harness log, report
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

# ---------------------------------------------------------------------------------------------
# File names of one repetition's directory

SPEC: Final = "spec.json"
ACKED: Final = "acked.parquet"
READBACK: Final = "readback.parquet"
EVENTS: Final = "events.jsonl"
RESULTS: Final = "results.json"
JOURNAL_META: Final = "journal-meta.json"
JOURNAL_SENDS: Final = "journal-sends.arrows"
JOURNAL_ACKS: Final = "journal-acks.arrows"
JOURNAL_GLOB: Final = "journal-*"
# A run with `workload.producers` > 1 writes one journal per producer instead, producer p's as
# journal-p<p>-meta.json, journal-p<p>-sends.arrows and journal-p<p>-acks.arrows.
PRODUCER_JOURNAL_METAS: Final = "journal-p*-meta.json"
# A run with `workload.consumers` > 0 writes, per consumer process (member c, its k-th start),
# consumer-c<c>-r<k>-processed.arrows and consumer-c<c>-r<k>-commits.arrows: each start opens
# files of its own, as an Arrow stream cannot be reopened for appending after a SIGKILL.
CONSUMER_PROCESSED_GLOB: Final = "consumer-c*-processed.arrows"
CONSUMER_COMMITS_GLOB: Final = "consumer-c*-commits.arrows"
# and consumer-c<c>-r<k>-assignments.arrows: each partition assigned, revoked or lost.
CONSUMER_ASSIGNMENTS_GLOB: Final = "consumer-c*-assignments.arrows"
# A transactional run (`workload.transactions`) also writes these: its transactions' outcomes,
# journalled as each ends (the crash-safe stream) and finalized to Parquet, and a second
# read-back with isolation.level=read_uncommitted (READBACK is then read_committed).
TRANSACTIONS_JOURNAL: Final = "journal-transactions.arrows"
TRANSACTIONS: Final = "transactions.parquet"
# With `workload.transactions.reads` > 0, each record a transaction read before its sends
# (read_committed), journalled per transaction and finalized beside transactions.parquet.
TXN_READS_JOURNAL: Final = "journal-txn-reads.arrows"
TXN_READS: Final = "txn-reads.parquet"
READBACK_UNCOMMITTED: Final = "readback-uncommitted.parquet"
BROKER_LOGS: Final = "broker-logs"
TOPIC: Final = "chaos"  # the topic every repetition writes and reads back
# Copies of the topic's log segments, kept for the analysis' attribution of missing messages:
# segments/broker-<id>/<topic>-<partition>/<base offset>.log
SEGMENTS: Final = "segments"
SEGMENTS_BROKER_PREFIX: Final = "broker-"
# The most segment bytes one repetition keeps; a broker whose copy would pass it keeps none.
SEGMENTS_BUDGET_BYTES: Final = 256 * 1024 * 1024

# File names of an experiment run's root directory
PLAN: Final = "plan.json"  # the repetitions planned, of this root and of every shard of its run
SUMMARIES: Final = "repetitions.json"  # what the harness saw of each
PROVENANCE: Final = "provenance.json"  # what ran: revision, command, seed, images, host
HARNESS_LOG: Final = "harness.log"
REPORT_DIR: Final = "report"
# runs/<experiment>/latest: a symlink to the newest root. A copy that turns symlinks into
# folders (CI artifact uploads do) makes it a second copy of that root's repetitions.
LATEST: Final = "latest"


@dataclass(frozen=True)
class JournalFiles:
    """The three files of one recorder's crash-safe journal (names inside the run directory)."""

    meta: str
    sends: str
    acks: str


# The journal of a run's only recorder (workload.producers: 1).
JOURNAL: Final = JournalFiles(JOURNAL_META, JOURNAL_SENDS, JOURNAL_ACKS)


def producer_journal(producer: int) -> JournalFiles:
    """The journal files of producer `producer` (0-based) of a run with several producers."""
    stem = f"journal-p{producer}"
    return JournalFiles(f"{stem}-meta.json", f"{stem}-sends.arrows", f"{stem}-acks.arrows")


@dataclass(frozen=True)
class ConsumerFiles:
    """The journal files of one start of one group consumer (names in the run directory)."""

    processed: str
    commits: str
    # Always the Arrow stream: the harness writes a Java member's from the program's stdout.
    assignments: str


def consumer_journal(member: int, start: int) -> ConsumerFiles:
    """The journal files of consumer `member`'s `start`-th process (both 0-based)."""
    stem = f"consumer-c{member}-r{start}"
    return ConsumerFiles(
        f"{stem}-processed.arrows", f"{stem}-commits.arrows", f"{stem}-assignments.arrows"
    )


# A member on the Java client (harness/workload/consumer_group/java.py) journals each start in
# two files of JSON arrays first, consumer-c<c>-r<k>-processed.jsonl and -commits.jsonl (its
# stderr in consumer-c<c>-r<k>.log); the harness writes the Arrow streams above from them once
# the start has ended.
JAVA_CONSUMER_PROCESSED_GLOB: Final = "consumer-c*-r*-processed.jsonl"


def java_consumer_journal(member: int, start: int) -> ConsumerFiles:
    """The JSON-lines journal files of Java consumer `member`'s `start`-th process."""
    stem = f"consumer-c{member}-r{start}"
    arrows = consumer_journal(member, start).assignments
    return ConsumerFiles(f"{stem}-processed.jsonl", f"{stem}-commits.jsonl", arrows)


def java_consumer_log(member: int, start: int) -> str:
    """The log file of Java consumer `member`'s `start`-th process."""
    return f"consumer-c{member}-r{start}.log"


def java_consumer_start(name: str) -> tuple[int, int]:
    """(member, start) of a Java consumer journal file's name (java_consumer_journal's)."""
    stem = name.split("-")  # consumer, c<c>, r<k>, processed.jsonl
    return int(stem[1][1:]), int(stem[2][1:])


def segments_dir(run_dir: str | Path, broker: int) -> Path:
    """Where a repetition keeps broker `broker`'s segment copies."""
    return Path(run_dir) / SEGMENTS / f"{SEGMENTS_BROKER_PREFIX}{broker}"


def experiment_run_root(run_dir: str | Path) -> Path:
    """The experiment run's root directory a repetition directory lies in (two levels up)."""
    return Path(run_dir).parent.parent


def is_run_dir(path: Path) -> bool:
    """True when path holds the two files every run writes before its read-back."""
    return (path / SPEC).is_file() and (path / ACKED).is_file()
