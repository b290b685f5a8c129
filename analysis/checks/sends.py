"""The send-order check: a producer's successive acknowledged sends to one partition must be
acknowledged at increasing offsets, whatever their keys (Jepsen's non-monotonic send).

The send order is the producer's numbering of its messages: msg_id `p × 10^12 + i` for the
`i`-th send of producer `p` (docs/run-directory.md), assigned when the client is handed the
send, by the harness's recorders and by the verifiable-client protocol's counter alike. Only
sends whose order and acknowledged place are both known are judged: a row with a msg_id, a
successful delivery report (status ok), a partition and an offset. acks=0 reports no offset,
so its sends are never judged.

Each send acknowledged at or below the offset of the same producer's previous judged send to
the same partition counts once. Whether that breaks a promise is the judge's (the order rule:
Kafka orders one producer's sends per partition only with idempotence or max.in.flight=1).

It reads its four columns of acked.parquet itself, so the one-process and the DataFrame
message engines' runs take it alike, with no Spark code.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analysis.checks.arrays import filled_ints
from analysis.checks.check import RunFacts
from analysis.model.anomalies import AnomalyName
from analysis.model.results import ExampleRow
from harness.rundir import layout
from harness.rundir.records import Status

if TYPE_CHECKING:
    from analysis.checks.history import RunHistory

__all__ = ["PRODUCER_IDS", "SendOrderCheck", "backward_sends"]

PRODUCER_IDS: Final = 10**12  # msg_id // PRODUCER_IDS is the producer (docs/run-directory.md)
MAX_EXAMPLES: Final = 20


@dataclass(frozen=True)
class BackwardSends:
    """The judged sends acknowledged at or below their predecessor's offset, in msg_id order:
    each one's msg_id, partition, offset, and the offset of the producer's previous send
    there."""

    msg_id: np.ndarray
    partition: np.ndarray
    offset: np.ndarray
    previous_offset: np.ndarray

    def rows(self, limit: int) -> list[ExampleRow]:
        """The first `limit` as example rows (the registry's fields for the class)."""
        return [
            {"msg_id": m, "partition": p, "offset": o, "from_offset": f}
            for m, p, o, f in zip(
                self.msg_id[:limit].tolist(),
                self.partition[:limit].tolist(),
                self.offset[:limit].tolist(),
                self.previous_offset[:limit].tolist(),
                strict=True,
            )
        ]


def backward_sends(msg_id: np.ndarray, partition: np.ndarray, offset: np.ndarray) -> BackwardSends:
    """Among judged sends (msg_id, partition, offset, in any row order), each acknowledged at or
    below the offset of its producer's previous send to its partition."""
    order = np.lexsort((msg_id, partition, msg_id // PRODUCER_IDS))
    ids, parts, offs = msg_id[order], partition[order], offset[order]
    same = (ids[1:] // PRODUCER_IDS == ids[:-1] // PRODUCER_IDS) & (parts[1:] == parts[:-1])
    # One msg_id in two rows is one send reported twice (the contract's repeated ids): no step.
    backwards = np.flatnonzero(same & (ids[1:] != ids[:-1]) & (offs[1:] <= offs[:-1])) + 1
    by_id = backwards[np.argsort(ids[backwards], kind="stable")]
    return BackwardSends(ids[by_id], parts[by_id], offs[by_id], offs[by_id - 1])


def judged_sends(run_dir: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(msg_id, partition, offset) of the acked rows whose order and place are known."""
    table = pq.read_table(
        run_dir / layout.ACKED, columns=["msg_id", "status", "partition", "offset"]
    )
    ok = pc.fill_null(pc.equal(table["status"].cast("string"), Status.OK.value), False)
    known = pc.and_(ok, pc.is_valid(table["msg_id"])).to_numpy(zero_copy_only=False)
    msg_id = filled_ints(table["msg_id"], -1)
    partition = filled_ints(table["partition"], -1)
    offset = filled_ints(table["offset"], -1)
    kept = known & (partition >= 0) & (offset >= 0)
    return msg_id[kept], partition[kept], offset[kept]


@dataclass(frozen=True)
class SendOrderCheck:
    """Non-monotonic sends over a complete run's acknowledged sends."""

    name: str = "sends"

    def applies(self, run: RunHistory) -> bool:
        """A complete run (its classes are counted beside the read-back's)."""
        return run.complete

    def facts(self, run: RunHistory) -> RunFacts:
        """The count of backward sends and the first of them, lowest msg_id first."""
        found = backward_sends(*judged_sends(run.run_dir))
        name = AnomalyName.NONMONOTONIC_SEND
        return RunFacts(counts={name: len(found.msg_id)}, examples={name: found.rows(MAX_EXAMPLES)})
