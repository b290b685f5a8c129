"""Every client family on real brokers (the gate): each family's program, built from its
registry and cached, produces idempotently and runs two group members; each cell must lose
nothing it acknowledged, its members must catch up, and it must say which client ran with which
settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.experiment.client_families import PROGRAM_FAMILIES
from tests.integration.support import run_experiment

pytestmark = pytest.mark.integration


def _events(root: Path, cell: str) -> list[dict]:
    [path] = (root / cell).rglob("events.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_every_family_produces_and_consumes(tmp_path: Path):
    root, _ = run_experiment("families", tmp_path)
    report = json.loads((root / "report" / "report.json").read_text())
    cells = {cell["cell"]: cell for cell in report["cells"]}
    expected = {
        f"client={name}-{family.current}": f"{name} {family.current}"
        for name, family in PROGRAM_FAMILIES.items()
    }
    assert set(cells) == set(expected)
    for cell, label in expected.items():
        # No fault acted: nothing to provoke, and nothing may be lost or skipped.
        assert cells[cell]["verdict"] in ("PASS", "NOT-PROVOKED"), (cell, cells[cell])
        [result] = [json.loads(p.read_text()) for p in (root / cell).rglob("results.json")]
        counts = result["counts"]
        assert result["loss"] == 0 and counts["acked"] >= 1000, (cell, counts)
        assert counts["duplicated"] == 0 and counts["consumer_unprocessed"] == 0, (cell, counts)
        events = _events(root, cell)
        [config] = [e for e in events if e["type"] == "client_config"]
        assert config["client"] == label and config["idempotent"] is True, (cell, config)
        assert config["config"]["acks"] in ("all", "-1"), (cell, config)
        [group] = [e for e in events if e["type"] == "consumers"]
        assert group["client"] == label and group["caught_up"], (cell, group)
