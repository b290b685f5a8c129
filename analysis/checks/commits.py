"""The lost-commit check: an offset commit the group coordinator acknowledged must still be the
group's committed offset at the end, unless a later commit explains the difference (runs with
workload.consumers).

The members journal every commit they attempted and its outcome (layout.CONSUMER_COMMITS_GLOB,
stamped when the answer came back), and the `consumers` event records the group's committed
offsets once every member has left. Per partition of the topic, the last commit acknowledged
with success, in acknowledgement order, is compared with the final committed offset:

- equal: nothing to say;
- different, and some commit of the partition whose outcome was not a success names exactly the
  final offset: explained (a refused or timed-out commit may still have been written, even
  after its client gave up), not counted;
- the final offset below the acknowledged one (or none at all): the group's committed position
  went back, and the acknowledged commit is lost (`commit_lost`, one per partition);
- above it, unexplained: not a lost commit (a member killed mid-commit leaves its last attempt
  unjournalled), not counted.

A run whose final committed offsets were not recorded (the coordinator unreadable at the end)
is not judged by this check.
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

__all__ = ["CommitHistory", "LostCommitCheck", "lost_commits"]

MAX_EXAMPLES: Final = 20


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


def lost_commits(history: CommitHistory, final: Mapping[int, int]) -> list[ExampleRow]:
    """Per partition of `final` (partition → the group's committed offset at the end, < 0 for
    none), the last successful commit when the final offset lies below it and no commit with
    another outcome names the final offset; rows in partition order."""
    lost: list[ExampleRow] = []
    for p in sorted(final):
        mine = np.flatnonzero((history.partition == p) & history.ok)
        if len(mine) == 0:
            continue
        # Acknowledgement order; a tie keeps the journal's order.
        last = mine[np.argsort(history.ts_us[mine], kind="stable")[-1]]
        acknowledged, held = int(history.offset[last]), int(final[p])
        if held >= acknowledged:
            continue
        others = (history.partition == p) & ~history.ok
        if np.any(history.offset[others] == held):
            continue
        lost.append(
            {
                "partition": p,
                "consumer": int(history.consumer[last]),
                "at_us": int(history.ts_us[last]),
                "offset": acknowledged,
                "committed": held,
            }
        )
    return lost


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
        found = lost_commits(history, final_committed(run.evidence))
        name = AnomalyName.COMMIT_LOST
        return RunFacts(counts={name: len(found)}, examples={name: found[:MAX_EXAMPLES]})
