"""The known-bug experiments reproduce their bug on a release it affects, and the report names
it: the checker's known-bug table proved on real brokers (docs/known-bugs.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.support import HERE, only_dir, run_cli


@pytest.mark.chaos
def test_kafka_fsync_on_3_4_loses_acknowledged_records_and_reuses_their_offsets(tmp_path: Path):
    """redpanda-data/kafka-fsync: the last leader's segment cut while every replica is down."""
    done = run_cli(
        "run",
        str(HERE.parents[1] / "experiments" / "known-bugs" / "kafka-fsync.yaml"),
        "--cells", "release=3.4.0-zookeeper",
        "--repetitions", "1",
        "--runs-dir", str(tmp_path),
        "--quiet",
        "--master", "local[2]",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr  # KNOWN-BUG does not fail a run
    root = only_dir(tmp_path / "kafka-fsync")
    (result,) = [json.loads(p.read_text()) for p in root.rglob("results.json")]
    counts = result["counts"]
    assert result["loss"] == counts["lost"] > 0
    # Every lost record's offset holds another record now: later writes reused it.
    assert counts["offset_divergent"] == counts["lost"]
    (cell,) = json.loads((root / "report" / "report.json").read_text())["cells"]
    assert cell["verdict"] == "KNOWN-BUG"
    reasons = " ".join(cell["reasons"])
    assert "known bug KIP-966 of Kafka 3.4.0" in reasons
    assert "fault 4 (truncate) took that leader's unflushed tail" in reasons
