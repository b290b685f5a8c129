"""The message check on one shard of a run, and the shards' answers merged into the run's.

A large run is reconciled in shards (analysis.spark.shards): shard s holds the acked rows and
the distinct records of the messages whose key `shard_of` maps to s, so every fact decided per
message (its class, its example row, whether it is missing, what the probe finds of it) is
decided inside one shard, with the same functions as a whole run. What a shard cannot see is
given to it: the records of the whole run at its acked slots (`Holders`, from a join) and how
far the read-back got in each partition (`Progress`). The send timeline and the order check
are not per message; the Spark job computes them over the whole run and `merge` adds them.

Merging is exact: counts add up, examples and the missing list keep the lowest msg_ids (a
shard's lowest contain the run's), and the probe's tallies add up. A run reconciled in shards
gives the RunFacts its whole-run check (with the same `RunInput.shards`) gives.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from analysis.checks.messages import classes
from analysis.checks.messages.columns import Acked, Reads
from analysis.checks.messages.examples import (
    MAX_EXAMPLES,
    MAX_MISSING,
    by_partition,
    example_order,
    examples_of,
    identity_facts,
    missing_of,
)
from analysis.checks.messages.facts import RunFacts, RunInput
from analysis.checks.messages.index import Holders, Index, Progress, messages_of
from analysis.checks.messages.probe import ProbeTally, probe_tally
from analysis.checks.messages.timeline import add_anomaly_seconds, anomaly_seconds
from analysis.model.anomalies import AnomalyName, CountName
from analysis.model.results import ExampleRow, ExampleRows

NO_REORDERING: dict[str, Any] = {
    name: [] for name in ("record", "msg_id", "partition", "offset", "key_seq")
}


@dataclass(frozen=True)
class ShardFacts:
    """What one shard learnt of its messages: counts to add up, the lowest examples and missing
    messages to merge, the anomalies per second of send, and the probe's tally."""

    counts: dict[str, int]
    contract: dict[str, int]
    loss_by_partition: dict[str, int]
    divergence_by_partition: dict[str, int]
    examples: ExampleRows
    missing: list[tuple[int | None, int | None, int | None]]
    anomaly_seconds: dict[int, dict[str, int]]
    probe: ProbeTally


@dataclass(frozen=True)
class SendFacts:
    """What the whole run's sends say, computed over every acked row (the Spark
    timeline job): the timeline seconds, the send counts and the status contract."""

    seconds: dict[int, dict[str, Any]]
    counts: dict[str, int]
    contract: dict[str, int]


@dataclass(frozen=True)
class Reordering:
    """The order check over the whole run's read-back: how many records came late, and the
    example rows of the lowest msg_ids."""

    count: int = 0
    examples: list[ExampleRow] = field(default_factory=list)


def check_shard(
    acked: Acked, reads: Reads, holders: Holders, run: RunInput, progress: Progress
) -> ShardFacts:
    """The message facts of one shard of a complete run (see the module docstring)."""
    index = Index.build(acked, reads, holders)
    messages = messages_of(index, hidden=None)
    found = classes.classify(messages, progress, run.log_start)
    loss = classes.loss_mask(found)
    counts: dict[str, int] = {CountName.READ: reads.n} | {
        name: classes.weight(name, mask, messages) for name, mask in found.items()
    }
    examples = examples_of(found, messages, reads, NO_REORDERING)
    return ShardFacts(
        counts=counts,
        contract=identity_facts(messages),
        loss_by_partition=by_partition(loss, messages.partition),
        divergence_by_partition=by_partition(
            found[AnomalyName.OFFSET_DIVERGENT], messages.partition
        ),
        examples=examples,
        missing=missing_of(loss, messages),
        anomaly_seconds=anomaly_seconds(found, messages),
        probe=probe_tally(index, run, messages, loss),
    )


def merge(send: SendFacts, shards: Sequence[ShardFacts], reordering: Reordering) -> RunFacts:
    """The facts of a complete run from its sends, its shards and its order check."""
    seconds = {second: dict(row) for second, row in send.seconds.items()}
    add_anomaly_seconds(seconds, _summed(s.anomaly_seconds for s in shards))
    counts = _added([send.counts, *(s.counts for s in shards)])
    counts[AnomalyName.REORDERED] = reordering.count
    examples = _lowest_examples([s.examples for s in shards])
    examples[AnomalyName.REORDERED] = _lowest(reordering.examples, MAX_EXAMPLES, example_order)
    probe = sum((s.probe for s in shards), ProbeTally(0, 0, 0))
    return RunFacts(
        seconds=seconds,
        counts=counts,
        contract=_added([send.contract, *(s.contract for s in shards)]),
        loss_by_partition=_added(s.loss_by_partition for s in shards),
        divergence_by_partition=_added(s.divergence_by_partition for s in shards),
        examples=examples,
        missing=_lowest((row for s in shards for row in s.missing), MAX_MISSING, _missing_order),
        sensitivity=probe.sensitivity,
    )


def _added(parts: Iterable[dict[str, int]]) -> dict[str, int]:
    """The sum of every part's counts, by name (a name absent from a part counts 0)."""
    total: Counter[str] = Counter()
    for part in parts:
        total.update(part)
    return dict(total)


def _summed(parts: Iterable[dict[int, dict[str, int]]]) -> dict[int, dict[str, int]]:
    """Per second, the sum of every part's counts."""
    total: dict[int, Counter[str]] = {}
    for part in parts:
        for second, row in part.items():
            total.setdefault(second, Counter()).update(row)
    return {second: dict(row) for second, row in total.items()}


def _lowest_examples(parts: Sequence[ExampleRows]) -> ExampleRows:
    """Per class, the MAX_EXAMPLES example rows of the lowest msg_ids (none last) of all parts."""
    names = {name for part in parts for name in part}
    return {
        name: _lowest(
            (row for part in parts for row in part.get(name, ())), MAX_EXAMPLES, example_order
        )
        for name in names
    }


def _missing_order(row: tuple[int | None, int | None, int | None]) -> tuple[bool, int]:
    """A missing message's place in the list: by msg_id, the one without last."""
    return row[0] is None, 0 if row[0] is None else row[0]


def _lowest(rows: Iterable[Any], n: int, key: Callable[[Any], Any]) -> list[Any]:
    """The n lowest rows by key, in that order."""
    return heapq.nsmallest(n, rows, key=key)
