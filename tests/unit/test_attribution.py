"""Attribution of missing messages to the kept segments, on hand-made run directories."""

from __future__ import annotations

import json
from pathlib import Path

from analysis.checks.attribution import attribute
from analysis.model.attribution import (
    MAX_EXAMPLES,
    Holding,
    MissingMessage,
    Place,
    PlacedMessage,
)
from analysis.model.evidence import RunEvidence
from harness.rundir.layout import segments_dir
from tests.unit.kafka_bytes import full_batch, value_of

SEGMENT = "00000000000000000000.log"


def attributed(run_dir: Path, missing: list[MissingMessage], loss: int):
    """attribute() with the run directory's evidence read as the Spark job reads it."""
    return attribute(RunEvidence.read(run_dir), missing, loss)


def make_run(
    run_dir: Path,
    logs: dict[int, dict[int, bytes]],
    *,
    skipped: dict[int, str] | None = None,
    high_watermarks: dict[int, int] | None = None,
    kept: bool = True,
    partitions: int = 2,
) -> Path:
    """A run dir whose brokers kept `logs` (broker -> partition -> segment bytes at offset 0)."""
    run_dir.mkdir(parents=True)
    spec = {"topic": {"name": "chaos", "partitions": partitions}, "kafka": {"brokers": 3}}
    (run_dir / "spec.json").write_text(json.dumps(spec))
    brokers = {}
    for broker in (1, 2, 3):
        reason = (skipped or {}).get(broker)
        size = 0
        for partition, data in logs.get(broker, {}).items() if reason is None else ():
            folder = segments_dir(run_dir, broker) / f"chaos-{partition}"
            folder.mkdir(parents=True)
            (folder / SEGMENT).write_bytes(data)
            size += len(data)
        brokers[str(broker)] = {"files": 1, "bytes": size, "skipped": reason}
    events = [
        {
            "type": "readback",
            "high_watermarks": {str(p): v for p, v in (high_watermarks or {}).items()},
        },
        {"type": "segments", "kept": kept, "topic": "chaos", "reason": "x", "brokers": brokers},
    ]
    (run_dir / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return run_dir


def log_of(*msg_ids: int, base: int = 0) -> bytes:
    """A segment holding these msg_ids at consecutive offsets from `base`."""
    return full_batch(base, [value_of(m) for m in msg_ids])


def everywhere(data: bytes, partition: int = 0) -> dict[int, dict[int, bytes]]:
    """Every broker holds `data` as its log of `partition` (and an empty log of the other)."""
    return {b: {partition: data, 1 - partition: b""} for b in (1, 2, 3)}


def test_no_loss_needs_no_segments(tmp_path: Path):
    result = attributed(tmp_path / "nothing-here", [], 0)
    assert set(result.counts.values()) == {0} and result.examples == ()
    assert result.as_dict()["examples"] == []


def test_a_message_no_replica_holds_is_on_no_disk(tmp_path: Path):
    run = make_run(tmp_path / "r", everywhere(log_of(1, 2, 4)), high_watermarks={0: 3})
    result = attributed(run, [MissingMessage(3, 0, 2)], 1)
    assert result.counts == {
        "on_no_disk": 1,
        "on_disk_not_served": 0,
        "segments_unavailable": 0,
        "not_examined": 0,
    }
    assert result.examples == (PlacedMessage(MissingMessage(3, 0, 2), Place.ON_NO_DISK, ()),)
    assert result.as_dict()["examples"] == [
        {"msg_id": 3, "partition": 0, "offset": 2, "place": "on_no_disk", "holders": []}
    ]
    assert "later truncated" in result.note


def test_a_message_on_a_disk_names_the_brokers_and_offsets_holding_it(tmp_path: Path):
    logs = everywhere(log_of(1, 2))
    logs[3][0] = log_of(1, 2, 3, 4)  # a replica with a tail beyond what was served
    run = make_run(tmp_path / "r", logs, high_watermarks={0: 2})
    result = attributed(run, [MissingMessage(3, 0, 2), MissingMessage(4, 0, 3)], 2)
    assert result.counts["on_disk_not_served"] == 2 and result.beyond_served == 2
    assert result.examples[0].holders == (Holding(3, 0, 2, beyond_high_watermark=True),)
    assert result.as_dict()["examples"][0]["holders"] == [
        {"broker": 3, "partition": 0, "offset": 2, "beyond_high_watermark": True}
    ]


def test_a_message_held_below_the_high_watermark_is_not_beyond_served(tmp_path: Path):
    logs = everywhere(log_of(1, 2, 3))
    run = make_run(tmp_path / "r", logs, high_watermarks={0: 3})
    result = attributed(run, [MissingMessage(2, 0, 1)], 1)
    assert result.counts["on_disk_not_served"] == 1 and result.beyond_served == 0
    assert [h.broker for h in result.examples[0].holders] == [1, 2, 3]


def test_a_message_found_in_another_partition_is_on_disk(tmp_path: Path):
    run = make_run(tmp_path / "r", everywhere(log_of(9), partition=1))
    result = attributed(run, [MissingMessage(9, 0, 0)], 1)
    assert result.counts["on_disk_not_served"] == 1
    assert result.examples[0].holders[0].partition == 1


def test_a_skipped_broker_leaves_only_what_was_found(tmp_path: Path):
    run = make_run(
        tmp_path / "r", everywhere(log_of(1, 3)), skipped={2: "over budget: more than 256 MiB"}
    )
    result = attributed(run, [MissingMessage(2, 0, 1), MissingMessage(3, 0, 1)], 2)
    assert result.counts["segments_unavailable"] == 1  # broker 2 may have held msg 2
    assert result.counts["on_disk_not_served"] == 1  # msg 3 was found all the same
    assert "broker 2: over budget" in result.note


def test_a_compressed_segment_makes_its_partition_unavailable_only(tmp_path: Path):
    logs = everywhere(log_of(1))
    for broker in (1, 2, 3):
        logs[broker][1] = full_batch(0, [value_of(5)], attributes=4)  # lz4
    run = make_run(tmp_path / "r", logs)
    result = attributed(run, [MissingMessage(2, 0, 1), MissingMessage(6, 1, 1)], 2)
    assert result.counts["on_no_disk"] == 1 and result.counts["segments_unavailable"] == 1
    assert "1 compressed" in result.note


def test_an_acked_offset_below_every_kept_log_start_cannot_be_judged(tmp_path: Path):
    logs = {b: {0: log_of(5, base=100), 1: b""} for b in (1, 2, 3)}
    run = make_run(tmp_path / "r", logs)
    for broker in (1, 2, 3):  # the segment's name is its base offset
        folder = segments_dir(run, broker) / "chaos-0"
        (folder / SEGMENT).rename(folder / "00000000000000000100.log")
    result = attribute(
        RunEvidence.read(run), [MissingMessage(2, 0, 7), MissingMessage(3, 0, 150)], 2
    )
    places = {e.message.msg_id: e.place for e in result.examples}
    assert places == {2: "segments_unavailable", 3: "on_no_disk"}  # offsets 7 and 150


def test_unlocated_messages_need_every_partition(tmp_path: Path):
    run = make_run(tmp_path / "r", everywhere(log_of(1)))
    assert attributed(run, [MissingMessage(2, None, None)], 1).counts["on_no_disk"] == 1
    logs = everywhere(log_of(1))
    del logs[2][1]  # a broker without a replica of partition 1 is fine ...
    run = make_run(tmp_path / "s", logs)
    assert attributed(run, [MissingMessage(2, None, None)], 1).counts["on_no_disk"] == 1
    no_replica = {b: {0: log_of(1)} for b in (1, 2, 3)}  # ... no replica at all is not
    run = make_run(tmp_path / "t", no_replica)
    assert attributed(run, [MissingMessage(2, None, None)], 1).counts["segments_unavailable"] == 1


def test_runs_without_kept_segments_cannot_be_judged(tmp_path: Path):
    not_kept = make_run(tmp_path / "a", everywhere(log_of(1)), kept=False)
    result = attributed(not_kept, [MissingMessage(2, 0, 1)], 1)
    assert result.counts["segments_unavailable"] == 1 and "not kept" in result.note
    old = make_run(tmp_path / "b", everywhere(log_of(1)))
    (old / "events.jsonl").write_text("")
    assert "no segments event" in attributed(old, [MissingMessage(2, 0, 1)], 1).note


def test_tampered_or_unreadable_runs_never_raise(tmp_path: Path):
    run = make_run(tmp_path / "r", everywhere(log_of(1)))
    (segments_dir(run, 1) / "chaos-0" / SEGMENT).write_bytes(b"short")
    result = attributed(run, [MissingMessage(2, 0, 1)], 1)
    assert result.counts["segments_unavailable"] == 1
    assert "do not hold the" in result.note
    (run / "spec.json").write_text("{not json")
    broken = attributed(run, [MissingMessage(2, 0, 1)], 1)
    assert broken.counts["segments_unavailable"] == 1 and "attribution failed" in broken.note


def test_counts_add_up_to_the_loss_beyond_the_bound(tmp_path: Path):
    run = make_run(tmp_path / "r", everywhere(log_of(1)))
    missing = [MissingMessage(m, 0, m) for m in range(2, 40)]
    result = attributed(run, missing, 100)
    assert result.counts["not_examined"] == 62 and sum(result.counts.values()) == 100
    assert len(result.examples) == MAX_EXAMPLES
    assert [e.message.msg_id for e in result.examples] == list(range(2, 2 + MAX_EXAMPLES))


def test_examples_take_each_place_in_turn(tmp_path: Path):
    logs = everywhere(log_of(*range(100, 130)))
    run = make_run(tmp_path / "r", logs, high_watermarks={0: 0})
    missing = [MissingMessage(m, 0, 0) for m in (*range(1, 30), *range(100, 130))]
    places = [e.place for e in attributed(run, missing, len(missing)).examples]
    assert places[:4] == ["on_no_disk", "on_disk_not_served"] * 2
    assert places.count("on_no_disk") == places.count("on_disk_not_served") == MAX_EXAMPLES // 2
    assert json.dumps(attributed(run, missing, len(missing)).as_dict())  # results.json-ready
