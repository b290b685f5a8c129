"""The lost-commit check: an offset commit the group coordinator acknowledged must show in every
later read of the group's committed offsets, unless a later commit explains the difference
(runs with workload.consumers).

The members journal every commit they attempted and its outcome (layout.CONSUMER_COMMITS_GLOB,
stamped when the answer came back); the sampler reads the group's committed offsets about once
a second while the run goes on (each read stamped when its OffsetFetch was sent), and the
`consumers` event records them once every member has left. Each read is a view: per
partition, the last commit acknowledged with success before the view was asked for, in
acknowledgement order, is compared with the view's offset (the final view sees every commit):

- equal: nothing to say;
- different, and some commit of the partition whose outcome was not a success names exactly the
  final offset: explained (a refused or timed-out commit may still have been written, even
  after its client gave up), not counted;
- the final offset below the acknowledged one (or none at all): the group's committed position
  went back, and the acknowledged commit is lost (`commit_lost`, one per partition);
- above it, unexplained: not a lost commit (a member killed mid-commit leaves its last attempt
  unjournalled), not counted.

A position that went back and was committed past again before the end shows only in the views
taken meanwhile: a partition counts once, at the first view that shows it behind. A run whose
final committed offsets were not recorded (the coordinator unreadable at the end) is not judged
by this check.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import numpy as np
import pyarrow.compute as pc

from analysis.checks.arrays import filled_ints
from analysis.checks.check import RunFacts
from analysis.checks.consumers import commits_table, final_committed
from analysis.model.anomalies import AnomalyName
from analysis.model.results import ExampleRow
from harness.rundir.records import COMMIT_OK

if TYPE_CHECKING:
    import pyarrow as pa

    from analysis.checks.history import RunHistory
    from analysis.model.evidence import RunEvidence

__all__ = ["FINAL_VIEW_US", "CommitHistory", "CommittedView", "LostCommitCheck", "lost_commits"]

MAX_EXAMPLES: Final = 20
FINAL_VIEW_US: Final = 2**63 - 1  # the final view is asked for after every commit


@dataclass(frozen=True)
class CommittedView:
    """The group's committed offsets as one read saw them: partition → offset (< 0: none), and
    when the read was asked for (every commit acknowledged before must show in it)."""

    asked_us: int
    offsets: Mapping[int, int]


@dataclass(frozen=True)
class CommitHistory:
    """Every journalled commit attempt, one row per (attempt, partition), in any order."""

    partition: np.ndarray
    offset: np.ndarray  # the next offset to read, as committed
    consumer: np.ndarray
    ts_us: np.ndarray  # when the answer came back (the acknowledgement order)
    ok: np.ndarray  # bool: acknowledged with success

    @classmethod
    def of(cls, table: pa.Table) -> CommitHistory:
        """The history of a commits table (COMMIT_SCHEMA)."""
        ok = pc.fill_null(pc.equal(table["outcome"], COMMIT_OK), False)
        return cls(
            filled_ints(table["partition"], -1),
            filled_ints(table["offset"], -1),
            filled_ints(table["consumer"], -1),
            filled_ints(table["ts_us"], -1),
            ok.to_numpy(zero_copy_only=False).astype(bool),
        )


def lost_commits(history: CommitHistory, views: list[CommittedView]) -> list[ExampleRow]:
    """Per partition the views name, the first view (by when it was asked for) whose offset lies
    below the last commit acknowledged with success before it, when no commit with another
    outcome names that offset; one row per partition, in partition order (`seen_us`: when
    that view was asked for, None for the final one)."""
    lost: list[ExampleRow] = []
    ordered = sorted(views, key=lambda view: view.asked_us)
    for p in sorted({p for view in views for p in view.offsets}):
        mine = np.flatnonzero((history.partition == p) & history.ok)
        # Acknowledgement order; a tie keeps the journal's order.
        mine = mine[np.argsort(history.ts_us[mine], kind="stable")]
        others = (history.partition == p) & ~history.ok
        for view in ordered:
            if p not in view.offsets:
                continue
            seen = mine[history.ts_us[mine] < view.asked_us]
            if len(seen) == 0:
                continue
            last = seen[-1]
            acknowledged, held = int(history.offset[last]), int(view.offsets[p])
            if held >= acknowledged or np.any(history.offset[others] == held):
                continue
            lost.append(
                {
                    "partition": p,
                    "consumer": int(history.consumer[last]),
                    "at_us": int(history.ts_us[last]),
                    "offset": acknowledged,
                    "committed": held,
                    "seen_us": None if view.asked_us == FINAL_VIEW_US else view.asked_us,
                }
            )
            break
    return lost


def committed_views(run: RunEvidence) -> list[CommittedView]:
    """The sampler's reads of the group's committed offsets, then the final one (a partition
    with no committed offset in a sampled read is left out of that view)."""
    views = [
        CommittedView(sample.committed_asked_us, sample.committed)
        for sample in run.samples
        if sample.committed is not None and sample.committed_asked_us is not None
    ]
    return [*views, CommittedView(FINAL_VIEW_US, final_committed(run))]


@dataclass(frozen=True)
class LostCommitCheck:
    """Lost commits of a run's consumer group, against its final committed offsets."""

    name: str = "commits"

    def applies(self, run: RunHistory) -> bool:
        """A complete run with a consumer group whose final committed offsets were recorded."""
        return run.complete and run.has_group and bool(final_committed(run.evidence))

    def facts(self, run: RunHistory) -> RunFacts:
        """The count of partitions whose acknowledged commit was lost, and the first of them."""
        history = CommitHistory.of(commits_table(run.run_dir))
        found = lost_commits(history, committed_views(run.evidence))
        name = AnomalyName.COMMIT_LOST
        return RunFacts(counts={name: len(found)}, examples={name: found[:MAX_EXAMPLES]})
