"""Keeping the topic's segments of a repetition with missing messages, from fake brokers."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.run import kept_segments
from harness.run.kept_segments import keep_segments, missing_acked, segments_event
from harness.rundir.layout import segments_dir
from harness.rundir.records import ACKED_SCHEMA, PRODUCER_ID_STRIDE, READBACK_SCHEMA
from tests.examples import examples

LOG_DIR = "/var/lib/kafka/data"


def tar_of(files: dict[str, bytes]) -> bytes:
    """A tar archive as Docker sends one: names relative to the archived folder's parent."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, data in files.items():
            member = tarfile.TarInfo(name)
            member.size = len(data)
            archive.addfile(member, io.BytesIO(data))
    return buffer.getvalue()


@dataclass
class FakeBroker:
    """A broker whose log dir holds `dirs` (partition dir -> {file name: bytes})."""

    node_id: int
    dirs: dict[str, dict[str, bytes]]
    fail: bool = False
    disk_dir: str = LOG_DIR
    asked: list[str] = field(default_factory=list)

    def archive(self, path: str) -> Iterator[bytes] | None:
        self.asked.append(path)
        if self.fail:
            raise ConnectionError("docker went away")
        folder = path.rsplit("/", 1)[-1]
        if folder not in self.dirs:
            return None
        data = tar_of({f"{folder}/{name}": body for name, body in self.dirs[folder].items()})
        return iter([data[i : i + 1000] for i in range(0, len(data), 1000)])


def replica(size: int) -> dict[str, bytes]:
    """A partition dir: one segment of `size` bytes plus the files that are not kept."""
    return {
        "00000000000000000000.log": b"L" * size,
        "00000000000000000000.index": b"\0" * 4096,
        "leader-epoch-checkpoint": b"0\n1\n0 0\n",
    }


def test_each_broker_keeps_its_partition_logs_and_nothing_else(tmp_path: Path):
    brokers = [
        FakeBroker(1, {"chaos-0": replica(100), "chaos-1": replica(50)}),
        FakeBroker(2, {"chaos-1": replica(70)}),
    ]
    copies = keep_segments(brokers, "chaos", 2, tmp_path, budget_bytes=10_000)
    assert brokers[0].asked == [f"{LOG_DIR}/chaos-0", f"{LOG_DIR}/chaos-1"]
    assert (copies[1].files, copies[1].bytes, copies[1].partitions) == (
        2,
        150,
        ["chaos-0", "chaos-1"],
    )
    assert (copies[2].files, copies[2].bytes, copies[2].skipped) == (1, 70, None)
    kept = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert kept == [
        "segments/broker-1/chaos-0/00000000000000000000.log",
        "segments/broker-1/chaos-1/00000000000000000000.log",
        "segments/broker-2/chaos-1/00000000000000000000.log",
    ]
    assert (segments_dir(tmp_path, 1) / "chaos-0" / "00000000000000000000.log").read_bytes() == (
        b"L" * 100
    )


def test_a_broker_over_what_is_left_of_the_budget_keeps_nothing(tmp_path: Path):
    brokers = [
        FakeBroker(1, {"chaos-0": replica(600)}),
        FakeBroker(2, {"chaos-0": replica(600)}),
        FakeBroker(3, {"chaos-0": replica(300)}),
    ]
    copies = keep_segments(brokers, "chaos", 1, tmp_path, budget_bytes=1000)
    assert copies[1].bytes == 600 and copies[3].bytes == 300
    assert copies[2].files == 0 and "over budget" in (copies[2].skipped or "")
    assert not segments_dir(tmp_path, 2).exists()
    assert not list((tmp_path / "segments").glob("*.partial"))


def test_a_failing_broker_is_recorded_and_the_others_are_kept(tmp_path: Path):
    brokers = [FakeBroker(1, {}, fail=True), FakeBroker(2, {"chaos-0": replica(10)})]
    copies = keep_segments(brokers, "chaos", 1, tmp_path, budget_bytes=1000)
    assert copies[1].skipped == "error: ConnectionError: docker went away"
    assert copies[2].files == 1


def write_run(run_dir: Path, acked_ok: list[int], read: list[int | None]) -> Path:
    """acked.parquet with these ok ids (plus one failed send) and readback.parquet."""
    run_dir.mkdir(parents=True, exist_ok=True)
    rows = [{"msg_id": i, "status": "ok", "partition": 0, "offset": i} for i in acked_ok]
    rows.append({"msg_id": 999, "status": "failed"})
    pq.write_table(pa.Table.from_pylist(rows, schema=ACKED_SCHEMA), run_dir / "acked.parquet")
    read_rows = [{"msg_id": i, "partition": 0, "offset": n} for n, i in enumerate(read)]
    table = pa.Table.from_pylist(read_rows, schema=READBACK_SCHEMA)
    pq.write_table(table, run_dir / "readback.parquet")
    return run_dir


def test_missing_acked_counts_ok_ids_absent_from_the_read_back(tmp_path: Path):
    assert missing_acked(write_run(tmp_path / "a", [1, 2, 3, 4], [1, 3, None, 7])) == 2
    assert missing_acked(write_run(tmp_path / "b", [1, 2], [2, 1])) == 0
    assert missing_acked(write_run(tmp_path / "c", [], [])) == 0
    assert missing_acked(write_run(tmp_path / "d", [5], [])) == 1


def test_segments_are_kept_only_when_messages_are_missing(tmp_path: Path):
    broker = FakeBroker(1, {"chaos-0": replica(10)})
    clean = segments_event([broker], "chaos", 1, write_run(tmp_path / "clean", [1], [1]))
    assert clean["kept"] is False and clean["missing_acked"] == 0 and broker.asked == []
    lossy = segments_event([broker], "chaos", 1, write_run(tmp_path / "lossy", [1, 2], [1]))
    assert lossy["kept"] is True and lossy["missing_acked"] == 1 and lossy["error"] is None
    assert lossy["brokers"] == {
        "1": {"files": 1, "bytes": 10, "partitions": ["chaos-0"], "skipped": None}
    }


def test_segments_event_never_raises(tmp_path: Path):
    broker = FakeBroker(1, {"chaos-0": replica(10)})
    unchecked = segments_event([broker], "chaos", 1, tmp_path / "no-files")
    assert unchecked["kept"] is True and "check failed" in unchecked["error"]
    assert unchecked["brokers"]["1"]["files"] == 1  # kept to be safe
    failing = FakeBroker(2, {}, fail=True)
    event = segments_event([failing], "chaos", 1, write_run(tmp_path / "r", [1], []))
    assert event["brokers"]["2"]["skipped"].startswith("error:")


# msg_ids of up to 4 producers (producer p's i-th send is p * STRIDE + i).
producer_id = st.tuples(st.integers(0, 3), st.integers(0, 40)).map(
    lambda p: p[0] * PRODUCER_ID_STRIDE + p[1]
)


@pytest.mark.property
@settings(
    max_examples=examples(0.3),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    st.lists(producer_id, max_size=30),
    st.lists(st.one_of(st.none(), st.just(-1), producer_id), max_size=30),
    st.integers(1, 7),
)
def test_missing_acked_in_batches_matches_a_set_oracle(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    acked: list[int],
    read: list[int | None],
    batch_rows: int,
) -> None:
    monkeypatch.setattr(kept_segments, "_BATCH_ROWS", batch_rows)
    run_dir = write_run(tmp_path_factory.mktemp("run"), acked, read)
    # The oracle: every ok row whose id the read-back lacks (a repeated ok id counts each time).
    assert missing_acked(run_dir) == sum(1 for i in acked if i not in set(read))
