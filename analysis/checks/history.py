"""One run's recorded history as the checks read it: each file parsed at most once, on first
use, and shared by every check of the run (analysis.checks.run).

The events come parsed with the run (`RunInput.evidence`); acked.parquet, readback.parquet, the
transaction journal and the transactions' reads are read here when a check first asks, and the
message table the message check builds is shared with the checks that judge its messages (the
transactions', the consumer group's).
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

import pyarrow as pa

from analysis.checks.check import RunInput
from analysis.checks.consumers import has_consumer_journals
from analysis.checks.messages import classes
from analysis.checks.messages.classes import Masks
from analysis.checks.messages.columns import CODE, Acked, Reads
from analysis.checks.messages.index import Index, Messages, Progress, messages_of
from analysis.checks.messages.timeline import send_facts, status_counts
from analysis.checks.transactions import Transactions
from analysis.model.evidence import RunEvidence
from harness.rundir import layout
from harness.rundir.spec import RunSpec, RunSpecError
from harness.rundir.transactions import read_txn_reads

__all__ = ["RunHistory", "Sends"]

# What the sends alone tell, before any read-back: the timeline by epoch second, the send
# counts, the contract facts (analysis.checks.messages.timeline.send_facts).
Sends = tuple[dict[int, dict[str, Any]], dict[str, int], dict[str, int]]


class RunHistory:
    """A run's files, each read once when a check first needs it."""

    def __init__(self, run: RunInput) -> None:
        self.run = run

    @property
    def run_dir(self) -> Path:
        """The run directory."""
        return self.run.run_dir

    @property
    def evidence(self) -> RunEvidence:
        """The run's events, parsed once before the checks."""
        return self.run.evidence

    @property
    def complete(self) -> bool:
        """Whether the run read back: without it only the sends are checked."""
        return self.run.complete

    @cached_property
    def txns(self) -> Transactions | None:
        """The transaction journal; None for a run without transactions."""
        return Transactions.read(self.run_dir)

    @cached_property
    def spec(self) -> RunSpec | None:
        """The run's spec.json; None when it cannot be read."""
        try:
            return RunSpec.read(self.run_dir)
        except (OSError, RunSpecError):
            return None

    @cached_property
    def txn_reads(self) -> pa.Table | None:
        """What the transactions read (txn-reads.parquet); None when they read nothing."""
        return read_txn_reads(self.run_dir)

    @cached_property
    def has_group(self) -> bool:
        """Whether the run had a consumer group (some member started a journal)."""
        return has_consumer_journals(self.run_dir)

    @cached_property
    def _acked_and_sends(self) -> tuple[Acked, Sends]:
        """acked.parquet, and what its delivery reports tell before a transactional run's
        statuses become its transactions' outcomes (acknowledged means committed)."""
        acked = Acked.read(self.run_dir / layout.ACKED)
        seconds, counts, contract = send_facts(acked)
        if self.txns is not None:
            acked.status = self.txns.statuses(acked.msg_id, acked.identified, acked.status, CODE)
            counts |= status_counts(acked)
        return acked, (seconds, counts, contract)

    @property
    def acked(self) -> Acked:
        """acked.parquet as arrays; a transactional run's statuses are its outcomes."""
        return self._acked_and_sends[0]

    @property
    def sends(self) -> Sends:
        """The send timeline, counts and contract facts (each call a fresh copy's holder)."""
        return self._acked_and_sends[1]

    @cached_property
    def reads(self) -> Reads:
        """readback.parquet as arrays, one entry per distinct record."""
        return Reads.read(self.run_dir / layout.READBACK)

    @cached_property
    def index(self) -> Index:
        """The joins of acked rows and records, shared by the run and its probe."""
        return Index.build(self.acked, self.reads)

    @cached_property
    def progress(self) -> Progress:
        """How far the read-back got in each partition."""
        return Progress.of(self.index, self.run)

    @cached_property
    def messages(self) -> Messages:
        """One entry per message key with the facts its classes are decided on."""
        return messages_of(self.index, hidden=None)

    @cached_property
    def found(self) -> Masks:
        """A mask over the messages per class of the message rules."""
        return classes.classify(self.messages, self.progress, self.run.log_start)
