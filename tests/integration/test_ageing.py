"""workload.transactions.age_commits end to end: the transactional.id aged on real brokers
before the workload, which then starts at the epoch the ageing left, and is judged as usual."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.support import labelled_leftovers, run_experiment

pytestmark = pytest.mark.chaos


def test_the_workload_starts_at_the_epoch_the_ageing_left(tmp_path: Path):
    root, done = run_experiment("ageing", tmp_path)
    run_dir = root / "base" / "0"
    logs = "".join(p.read_text(errors="replace") for p in (run_dir / "broker-logs").glob("*"))
    # The ageing's producer starts at epoch 0; 300 commits and the workload's own
    # initTransactions later, the coordinator hands out epoch 301.
    assert "transactionalId kchaos-txn with producerId 0 and producer epoch 0 " in logs
    assert "transactionalId kchaos-txn with producerId 0 and producer epoch 301 " in logs
    result = json.loads((run_dir / "results.json").read_text())
    counts = result["counts"]
    assert counts["txn_committed"] > 0 and counts.get("txn_hanging", 0) == 0, counts
    assert (run_dir / "age.log").is_file()
    assert labelled_leftovers(done.pid) == []
