"""Where each missing acknowledged message still is, from the log segments the harness kept.

Every missing message (acknowledged, absent from the read-back) gets one place:

- `on_no_disk`: no broker's kept log holds its msg_id, and every replica's log of its partition
  was kept and read in full, back to its acked offset: Kafka lost it. A message that was on a
  replica that later truncated it is here too: the final logs cannot tell the two apart.
- `on_disk_not_served`: some broker's kept log holds it (where is in the examples), yet the
  read-back did not return it: a read-back or harness fault when a holder has it below its
  partition's high watermark, else a replica holding data beyond what the leader served.
- `segments_unavailable`: not found, and some replica's log of its partition was not kept,
  is compressed or could not be parsed: nothing can be said.
- `not_examined`: beyond the bound of missing messages the reconciliation passes in.

The counts add up to the run's loss figure. Pure: reads only the run directory.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from analysis.model.attribution import (
    MAX_EXAMPLES,
    NOT_TRUNCATION,
    SEGMENT_SUFFIX,
    Attribution,
    Holding,
    MissingMessage,
    Place,
    PlacedMessage,
)
from analysis.model.evidence import RunEvidence
from harness.rundir import layout
from harness.rundir.segments import read_records
from harness.rundir.spec import RunSpec


@dataclass
class _Evidence:
    """What the kept segments say: holdings by msg_id, and where they fall short."""

    holdings: dict[int, list[Holding]] = field(default_factory=lambda: defaultdict(list))
    replicas: dict[int, set[int]] = field(default_factory=lambda: defaultdict(set))
    log_starts: dict[tuple[int, int], int] = field(default_factory=dict)  # (broker, p)
    gaps: list[str] = field(default_factory=list)  # why some partition cannot be judged
    bad_partitions: set[int] = field(default_factory=set)
    all_partitions_bad: bool = False

    def covers(self, partition: int, offset: int) -> bool:
        """True when every replica's log of `partition` was read in full from `offset` on."""
        if self.all_partitions_bad or partition in self.bad_partitions:
            return False
        brokers = self.replicas.get(partition) or set()
        return bool(brokers) and all(self.log_starts[(b, partition)] <= offset for b in brokers)


def attribute(run: RunEvidence, missing: Sequence[MissingMessage], loss: int) -> Attribution:
    """The place of each missing message (`loss` of them, `missing` examined); never raises."""
    if loss == 0:
        return Attribution(_counts([], 0), (), "no acknowledged message is missing")
    try:
        wanted = {m.msg_id for m in missing if m.msg_id is not None}
        evidence, topic_partitions = _load(run, wanted)
        high = _high_watermarks(run)
    except Exception as exc:
        evidence, topic_partitions, high = _Evidence(all_partitions_bad=True), 0, {}
        evidence.gaps.append(f"attribution failed: {type(exc).__name__}: {exc}")
    places = {m.msg_id: _place(m, evidence, topic_partitions) for m in missing}
    holdings = {m.msg_id: _flagged(_holdings_of(m, evidence), high) for m in missing}
    beyond = sum(1 for held in holdings.values() if held and _all_beyond(held))
    note = "; ".join([*evidence.gaps, NOT_TRUNCATION])
    examples = _examples(missing, places, holdings)
    return Attribution(_counts(places.values(), loss - len(missing)), examples, note, beyond)


def _counts(places: Iterable[Place], not_examined: int) -> dict[str, int]:
    """Messages per place, every place present; `not_examined` for those beyond the bound."""
    counts = {place.value: 0 for place in Place}
    for place in places:
        counts[place.value] += 1
    counts[Place.NOT_EXAMINED.value] = max(not_examined, 0)
    return counts


def _all_beyond(held: list[Holding]) -> bool:
    """True when every holding sits at or past its partition's high watermark."""
    return all(h.beyond_high_watermark for h in held)


def _holdings_of(message: MissingMessage, evidence: _Evidence) -> list[Holding]:
    """Where the kept segments hold the message ([] for the rows without a msg_id: nothing on
    disk can be told to be theirs)."""
    return [] if message.msg_id is None else evidence.holdings.get(message.msg_id, [])


def _place(message: MissingMessage, evidence: _Evidence, topic_partitions: int) -> Place:
    """One message's place: found anywhere, else judged by its partition's evidence."""
    if _holdings_of(message, evidence):
        return Place.ON_DISK_NOT_SERVED
    offset = message.offset if message.offset is not None else 0
    if message.partition is not None:
        covered = evidence.covers(message.partition, offset)
    else:  # no acked partition (acks=0): every partition must be covered
        covered = topic_partitions > 0 and all(
            evidence.covers(p, offset) for p in range(topic_partitions)
        )
    return Place.ON_NO_DISK if covered else Place.SEGMENTS_UNAVAILABLE


def _load(run: RunEvidence, wanted: set[int]) -> tuple[_Evidence, int]:
    """The evidence of the run's kept segments, and its topic's partition count."""
    spec = RunSpec.read(run.run_dir)
    topic_partitions = spec.topic.partitions or 0
    brokers_expected = spec.kafka.brokers or 0
    evidence = _Evidence()
    event = run.segments
    if event is None:
        evidence.all_partitions_bad = True
        evidence.gaps.append("no segments event: the run kept no segments")
        return evidence, topic_partitions
    if not event.kept:
        evidence.all_partitions_bad = True
        evidence.gaps.append(f"segments not kept: {event.reason}")
    if event.error:
        evidence.gaps.append(f"segment copy: {event.error}")
    brokers = event.brokers or {}
    if len(brokers) < brokers_expected:
        evidence.all_partitions_bad = True
        evidence.gaps.append(f"segments of {len(brokers)} of {brokers_expected} brokers kept")
    for broker, kept in sorted(brokers.items(), key=lambda item: int(item[0])):
        _read_broker(run.run_dir, int(broker), kept, str(event.topic), wanted, evidence)
    return evidence, topic_partitions


def _read_broker(
    run_dir: Path,
    broker: int,
    kept: Mapping[str, Any],
    topic: str,
    wanted: set[int],
    evidence: _Evidence,
) -> None:
    """Add one broker's kept segments to the evidence; a broker not (fully) kept taints all."""
    folder = layout.segments_dir(run_dir, broker)
    files = sorted(folder.glob(f"{topic}-*/*{SEGMENT_SUFFIX}")) if folder.is_dir() else []
    problem = kept.get("skipped")
    if problem is None and sum(f.stat().st_size for f in files) != kept.get("bytes"):
        problem = f"its kept files do not hold the {kept.get('bytes')} bytes the event recorded"
    if problem is not None:  # it may have been a replica of any partition
        evidence.all_partitions_bad = True
        evidence.gaps.append(f"broker {broker}: {problem}")
        return
    for partition, segment_files in _by_partition(files, topic).items():
        evidence.replicas[partition].add(broker)
        # Segment names are zero-padded base offsets: the first is where the log starts.
        evidence.log_starts[(broker, partition)] = int(segment_files[0].stem)
        for path in segment_files:
            _read_segment(path, broker, partition, wanted, evidence)


def _by_partition(files: Iterable[Path], topic: str) -> dict[int, list[Path]]:
    """Segment files by the partition their `<topic>-<p>` folder names, in log order."""
    grouped: dict[int, list[Path]] = defaultdict(list)
    for path in files:
        number = path.parent.name[len(topic) + 1 :]
        if number.isdigit() and path.stem.isdigit():
            grouped[int(number)].append(path)
    return {p: sorted(paths, key=lambda f: int(f.stem)) for p, paths in grouped.items()}


def _read_segment(
    path: Path, broker: int, partition: int, wanted: set[int], evidence: _Evidence
) -> None:
    """Add a segment's wanted records; a segment not read in full marks its partition."""
    found = read_records(path.read_bytes(), partition, wanted)
    for record in found.records:
        if record.msg_id is not None:  # a value not written by the harness holds nothing of ours
            evidence.holdings[record.msg_id].append(Holding(broker, partition, record.offset, None))
    if not found.complete:
        evidence.bad_partitions.add(partition)
        evidence.gaps.append(
            f"broker {broker} {path.parent.name}/{path.name}: {found.compressed_batches} "
            f"compressed, {found.unparseable_batches} unparseable batches, "
            f"{found.unread_bytes} unread bytes"
        )


def _high_watermarks(run: RunEvidence) -> dict[int, int]:
    """Partition → high watermark from the last readback event ({} when none)."""
    marks = run.readback.high_watermarks if run.readback else {}
    return {int(p): int(o) for p, o in marks.items()}


def _flagged(holdings: list[Holding], high: dict[int, int]) -> list[Holding]:
    """Holdings flagged with whether they sit at or past their partition's high watermark."""
    return [
        replace(h, beyond_high_watermark=h.offset >= high[h.partition])
        if h.partition in high
        else h
        for h in holdings
    ]


def _examples(
    missing: Sequence[MissingMessage],
    places: dict[int | None, Place],
    holdings: dict[int | None, list[Holding]],
) -> tuple[PlacedMessage, ...]:
    """Up to MAX_EXAMPLES messages, the lowest msg_ids of each place taken in turn."""
    by_place: dict[Place, list[MissingMessage]] = defaultdict(list)
    for message in sorted(missing, key=lambda m: (m.msg_id is None, m.msg_id or 0)):
        by_place[places[message.msg_id]].append(message)
    chosen: list[MissingMessage] = []
    queues = [by_place[place] for place in Place if by_place[place]]
    depth = 0
    while len(chosen) < MAX_EXAMPLES and any(depth < len(q) for q in queues):
        chosen += [q[depth] for q in queues if depth < len(q)]
        depth += 1
    return tuple(
        PlacedMessage(m, places[m.msg_id], tuple(holdings[m.msg_id])) for m in chosen[:MAX_EXAMPLES]
    )
