"""A topic's partition ends as the brokers answer ListOffsets(latest): the high watermark (what
a read_uncommitted consumer can read up to) and the last stable offset (a read_committed one's
limit), read through the cluster's admin client by the sampler and by the nemesis' conditions."""

from __future__ import annotations

import contextlib
from typing import Any

from harness.rundir.events import PartitionEnd

__all__ = ["ENDS_TIMEOUT_S", "high_watermarks_of", "read_ends"]

# ListOffsets may wait on a leader that is gone (a fault): bounded, so a sample stays ~1 s.
ENDS_TIMEOUT_S = 1.5


def read_ends(
    admin: Any,
    topic: str,
    partitions: list[int],
    timeout_s: float = ENDS_TIMEOUT_S,
    last_stable: bool = True,
) -> list[PartitionEnd]:
    """Each partition's high watermark (ListOffsets latest, read_uncommitted) and, with
    `last_stable`, its last stable offset (the same, read_committed, sent beside it); a value
    its leader did not give in `timeout_s`, or not asked, is None. Raises only when no request
    could be sent."""
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    asked = {TopicPartition(topic, p): OffsetSpec.latest() for p in partitions}
    levels = [IsolationLevel.READ_UNCOMMITTED] + [IsolationLevel.READ_COMMITTED] * last_stable
    answers = {
        level: admin.list_offsets(asked, isolation_level=level, request_timeout=timeout_s)
        for level in levels
    }
    by_level = {level: _offsets(futures, timeout_s) for level, futures in answers.items()}
    return [
        PartitionEnd(
            partition=p,
            high_watermark=by_level[IsolationLevel.READ_UNCOMMITTED].get(p),
            last_stable=by_level.get(IsolationLevel.READ_COMMITTED, {}).get(p),
        )
        for p in partitions
    ]


def high_watermarks_of(admin: Any, topic: str, partitions: list[int]) -> dict[int, int]:
    """Partition → high watermark of each of `partitions` whose leader answered (read_ends,
    one ListOffsets: no last stable offset)."""
    ends = read_ends(admin, topic, partitions, last_stable=False)
    return {e.partition: e.high_watermark for e in ends if e.high_watermark is not None}


def _offsets(futures: dict[Any, Any], timeout_s: float) -> dict[int, int]:
    """Partition → offset of every future that answered; the failed ones are left out."""
    offsets: dict[int, int] = {}
    for tp, future in futures.items():
        with contextlib.suppress(Exception):
            offset = int(future.result(timeout=timeout_s).offset)
            if offset >= 0:
                offsets[tp.partition] = offset
    return offsets
