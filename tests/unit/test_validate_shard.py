"""`validate --shard i/n [--json]`: a shard's cells (those `run --shard i/n` runs) and the wall
time a CI job's timeout is set from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.experiment.load import load_experiment
from harness.experiment.matrix import expand
from harness.experiment.model import workload_duration_s
from harness.experiment.plan import REPETITION_OVERHEAD_S
from harness.run.repetition import select_shard
from kafka_chaos.cli import main

DEFAULT = Path(__file__).resolve().parents[2] / "experiments" / "default.yaml"


def validated(capsys, *argv: str) -> dict:
    assert main(["validate", str(DEFAULT), "--json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_shards_split_the_cells_and_their_time(capsys) -> None:
    whole = validated(capsys)
    shards = [validated(capsys, "--shard", f"{i}/3") for i in (1, 2, 3)]
    assert whole["shard"] is None and [s["shard"] for s in shards] == ["1/3", "2/3", "3/3"]
    assert sorted(c for s in shards for c in s["cells"]) == sorted(whole["cells"])
    assert sum(s["estimated_seconds"] for s in shards) - whole["estimated_seconds"] in (-1, 0, 1)
    experiment = load_experiment(DEFAULT)
    cells = expand(experiment)
    for index, shard in enumerate(shards, start=1):
        assert shard["cells"] == [cell.name for cell in select_shard(cells, (index, 3))]
    # the oracle: a repetition is its workload's duration plus the fixed overhead
    for cell in cells:
        seconds = workload_duration_s(cell.spec.workload)
        expected = None if seconds is None else round(seconds + REPETITION_OVERHEAD_S)
        assert whole["cell_seconds"][cell.name] == expected


def test_the_text_names_the_shard_and_its_cells_only(capsys) -> None:
    assert main(["validate", str(DEFAULT), "--shard", "2/3"]) == 0
    out = capsys.readouterr().out
    cells = select_shard(expand(load_experiment(DEFAULT)), (2, 3))
    assert f"valid, {len(cells)} cells in shard 2/3 x" in out
    listed = [line.strip() for line in out.splitlines() if line.startswith("  ")]
    assert listed[: len(cells)] == [cell.name for cell in cells]


def test_a_shard_out_of_range_is_refused(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["validate", str(DEFAULT), "--shard", "4/3"])
    assert exit_.value.code == 2
    assert "need 1 <= i <= n" in capsys.readouterr().err
