"""The client-program contract's example program (docs/examples/contract_client.py) on real
brokers (the gate): as a `command` client speaking the contract it produces, with two group
members, and runs transactions; each cell must lose nothing it acknowledged, its members must
catch up, and an aborted transaction's records must stay unread."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.integration.support import run_experiment

pytestmark = pytest.mark.integration
EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "contract_client.py"


def test_the_example_program_plays_every_role(tmp_path: Path):
    argv = json.dumps([sys.executable, str(EXAMPLE)])
    root, _ = run_experiment("contract-example", tmp_path, "--set", f"workload.client.argv={argv}")
    report = json.loads((root / "report" / "report.json").read_text())
    cells = {cell["cell"]: cell for cell in report["cells"]}
    assert set(cells) == {"role=producer-and-members", "role=transactions"}
    # 1,200 plain sends in 6 s; a transaction with its offsets takes librdkafka ~130 ms here.
    least = {"role=producer-and-members": 1000, "role=transactions": 100}
    for name, cell in cells.items():
        assert cell["verdict"] in ("PASS", "NOT-PROVOKED"), (name, cell)
        [result] = [json.loads(p.read_text()) for p in (root / name).rglob("results.json")]
        counts = result["counts"]
        assert result["loss"] == 0 and counts["acked"] >= least[name], (name, counts)
        assert counts["duplicated"] == 0 and counts["consumer_unprocessed"] == 0, (name, counts)
        [events] = (root / name).rglob("events.jsonl")
        lines = [json.loads(line) for line in events.read_text().splitlines()]
        [group] = [e for e in lines if e["type"] == "consumers"]
        assert group["client"] == "command contract-example" and group["caught_up"], group
    [result] = [
        json.loads(p.read_text()) for p in (root / "role=transactions").rglob("results.json")
    ]
    counts = result["counts"]
    assert counts["aborted_read"] == 0 and counts["committed_lost"] == 0, counts
    assert counts["txn_committed"] >= 20 and counts["txn_aborted"] >= 5, counts
    assert counts["txn_unknown"] == 0, counts
