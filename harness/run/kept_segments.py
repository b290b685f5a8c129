"""Evidence kept before the cluster goes: the topic's log segments, for every repetition
whose read-back misses acknowledged messages, so the analysis can say where each one still is.

Only `<topic>-<partition>/*.log` files are kept (indexes and checkpoints are not evidence of
what a log holds), below `layout.segments_dir(run_dir, broker)`, within a byte budget per
repetition: a broker whose copy would pass what is left of it keeps nothing, and says why.
"""

from __future__ import annotations

import contextlib
import io
import shutil
import tarfile
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypedDict

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness.rundir import layout
from harness.rundir.events import BrokerSegments
from harness.rundir.records import PRODUCER_ID_STRIDE, Status

_COPY_CHUNK = 1 << 20
_BATCH_ROWS = 1 << 20  # rows of acked.parquet or readback.parquet held at a time


class SegmentSource(Protocol):
    """A broker whose files can be read as a tar stream (a `harness.platform.node.KafkaNode`)."""

    node_id: int
    disk_dir: str  # the log directory as the container's own file system holds it

    def archive(self, path: str) -> Iterator[bytes] | None: ...


@dataclass
class BrokerCopy:
    """What was kept of one broker: files, bytes, partition dirs; `skipped` says why not."""

    files: int = 0
    bytes: int = 0
    partitions: list[str] = field(default_factory=list)
    skipped: str | None = None

    def as_event(self) -> BrokerSegments:
        """The `segments` event's entry for this broker (its fields, in their order)."""
        return BrokerSegments(
            files=self.files,
            bytes=self.bytes,
            partitions=list(self.partitions),
            skipped=self.skipped,
        )


class _OverBudget(Exception):
    """The broker's segments do not fit in what is left of the repetition's budget."""


def missing_acked(run_dir: Path) -> int:
    """How many acknowledged msg_ids readback.parquet lacks (a superset of the loss figure:
    messages expired by retention count too), read in process with pyarrow batch by batch.

    Memory: one flag per message a producer sent (up to its highest acknowledged id), whatever
    the run's length, plus one batch of each file; the whole-file set it replaced took about
    1.1 GB at 9 million acknowledgements. Ids are split as producer p's p * STRIDE + i."""
    seen: dict[int, np.ndarray] = {}  # producer -> flag per own id: read back?
    for slot, own in _ok_ids(run_dir):
        flags = seen.get(slot)
        if flags is None or len(flags) <= own.max():
            grown = np.zeros(int(own.max()) + 1, dtype=bool)
            if flags is not None:
                grown[: len(flags)] = flags
            seen[slot] = grown
    for batch in pq.ParquetFile(run_dir / layout.READBACK).iter_batches(
        _BATCH_ROWS, columns=["msg_id"]
    ):
        ids = batch.column(0).drop_null().to_numpy().astype(np.int64)
        for slot, flags in seen.items():
            own = _own(ids, slot)
            flags[own[own < len(flags)]] = True
    return sum(int(np.count_nonzero(~seen[slot][own])) for slot, own in _ok_ids(run_dir))


def _ok_ids(run_dir: Path) -> Iterator[tuple[int, np.ndarray]]:
    """(producer, its own ids) of the ok rows of acked.parquet, batch by batch."""
    for batch in pq.ParquetFile(run_dir / layout.ACKED).iter_batches(
        _BATCH_ROWS, columns=["msg_id", "status"]
    ):
        ok = pc.and_(pc.equal(batch.column(1), Status.OK.value), pc.is_valid(batch.column(0)))
        ids = pc.filter(batch.column(0), pc.fill_null(ok, False)).to_numpy().astype(np.int64)
        ids = ids[ids >= 0]
        for slot in np.unique(ids // PRODUCER_ID_STRIDE).tolist():
            yield slot, _own(ids, slot)


def _own(ids: np.ndarray, slot: int) -> np.ndarray:
    """The ids of producer `slot` among `ids`, as its own counter (id - slot * STRIDE)."""
    base = slot * PRODUCER_ID_STRIDE
    return ids[(ids >= base) & (ids < base + PRODUCER_ID_STRIDE)] - base


class SegmentsFields(TypedDict):
    """The fields of a `segments` event (harness.rundir.events.SegmentsKept), in its order."""

    kept: bool
    topic: str
    budget_bytes: int
    missing_acked: int | None
    brokers: dict[str, BrokerSegments]
    error: str | None
    reason: str
    seconds: float


def segments_event(
    nodes: Sequence[SegmentSource],
    topic: str,
    partitions: int,
    run_dir: Path,
    budget_bytes: int = layout.SEGMENTS_BUDGET_BYTES,
) -> SegmentsFields:
    """The fields of the `segments` event, after keeping the segments when acknowledged
    messages are missing (or when that cannot be checked). Never raises: a failure is
    recorded in the event, never a failed repetition."""
    started = time.monotonic()
    missing: int | None = None
    error: str | None = None
    brokers: dict[str, BrokerSegments] = {}
    kept = False
    try:
        missing = missing_acked(run_dir)
    except Exception as exc:
        error = f"missing-message check failed: {type(exc).__name__}: {exc}"
    if missing == 0:
        reason = "no acknowledged message is missing from the read-back"
    else:
        reason = "acknowledged messages are missing from the read-back"
        if error is not None:
            reason = "the missing-message check failed: kept to be safe"
        try:
            copies = keep_segments(nodes, topic, partitions, run_dir, budget_bytes)
            brokers = {str(node_id): copy.as_event() for node_id, copy in copies.items()}
            kept = True
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
    return {
        "kept": kept,
        "topic": topic,
        "budget_bytes": budget_bytes,
        "missing_acked": missing,
        "brokers": brokers,
        "error": error,
        "reason": reason,
        "seconds": round(time.monotonic() - started, 3),
    }


def keep_segments(
    nodes: Sequence[SegmentSource], topic: str, partitions: int, run_dir: Path, budget_bytes: int
) -> dict[int, BrokerCopy]:
    """Copy each broker's segment files of `topic` into the run dir, broker after broker,
    all of a broker or none of it, within `budget_bytes` in all."""
    copies: dict[int, BrokerCopy] = {}
    left = budget_bytes
    for node in nodes:
        copies[node.node_id] = _copy_broker(node, topic, partitions, run_dir, left)
        left -= copies[node.node_id].bytes
    return copies


def _copy_broker(
    node: SegmentSource, topic: str, partitions: int, run_dir: Path, budget_bytes: int
) -> BrokerCopy:
    """One broker's segments, staged beside their final folder so a failed copy leaves none."""
    final = layout.segments_dir(run_dir, node.node_id)
    staging = final.with_name(final.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    copy = BrokerCopy()
    try:
        for partition in range(partitions):
            name = f"{topic}-{partition}"
            stream = node.archive(f"{node.disk_dir}/{name}")
            if stream is None:  # not a replica of this partition
                continue
            copy.partitions.append(name)
            _extract_logs(stream, name, staging, copy, budget_bytes)
        staging.mkdir(parents=True, exist_ok=True)  # a broker with no replica: an empty folder
        shutil.rmtree(final, ignore_errors=True)
        staging.rename(final)
    except _OverBudget:
        shutil.rmtree(staging, ignore_errors=True)
        limit = f"{budget_bytes / 2**20:.1f} MiB"
        return BrokerCopy(skipped=f"over budget: more than the {limit} left of the repetition's")
    except Exception as exc:
        shutil.rmtree(staging, ignore_errors=True)
        return BrokerCopy(skipped=f"error: {type(exc).__name__}: {exc}")
    return copy


def _extract_logs(
    stream: Iterator[bytes], folder: str, staging: Path, copy: BrokerCopy, budget_bytes: int
) -> None:
    """Write the `<folder>/*.log` members of a tar stream below `staging`, counting into copy;
    _OverBudget as soon as the broker's bytes pass `budget_bytes` (the stream is dropped)."""
    try:
        with tarfile.open(fileobj=_ChunkReader(stream), mode="r|") as archive:
            for member in archive:
                parts = member.name.split("/")
                if not (member.isfile() and len(parts) == 2 and parts[0] == folder):
                    continue
                if not parts[1].endswith(".log") or parts[1].startswith("."):
                    continue
                if copy.bytes + member.size > budget_bytes:
                    raise _OverBudget
                target = staging / folder / parts[1]
                target.parent.mkdir(parents=True, exist_ok=True)
                source = archive.extractfile(member)
                if source is None:  # not a regular file after all: nothing to copy
                    continue
                with target.open("wb") as out:
                    shutil.copyfileobj(source, out, _COPY_CHUNK)
                copy.files += 1
                copy.bytes += member.size
    finally:
        with contextlib.suppress(Exception):
            stream.close()  # type: ignore[attr-defined]


class _ChunkReader(io.RawIOBase):
    """A read-only file over an iterable of byte chunks (Docker's archive stream)."""

    def __init__(self, chunks: Iterable[bytes]):
        self._chunks = iter(chunks)
        self._pending = memoryview(b"")  # a view, so handing out a piece copies nothing else

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._pending = memoryview(chunk)
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size
