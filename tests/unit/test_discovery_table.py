"""bench/discovery_table.py: which search of a row counts, how many seeds found it, and which
shrunk file is a found run's, read from the files the benchmark and `kafka-chaos shrink`
write."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from harness.experiment.model import FaultStep
from harness.settings import REPO_ROOT
from kafka_chaos.commands import shrink
from kafka_chaos.commands.shrink import Outcome
from tests.unit.bench_scripts import load


def table() -> ModuleType:
    return load("discovery_table")


T = table()
ROW = T.Row("KAFKA-1", "experiments/a.yaml", "release=4*")
minutes = st.one_of(st.none(), st.sampled_from([2.5, 5.0, 10.0, 17.5, 20.0, 22.5]))


def line(seed: int, found: float | None, cell: str = "release=4.3.1", nemesis: str = "n") -> str:
    return json.dumps({
        "key": f"{ROW.reference}|{ROW.experiment}|{cell}|{seed}|{nemesis}",
        "reference": ROW.reference, "experiment": ROW.experiment, "cell": cell, "seed": seed,
        "nemesis": nemesis, "minutes_to_first": found,
    })  # fmt: skip


@given(
    st.dictionaries(
        st.tuples(
            st.sampled_from(["release=4.3.1", "release=4.3.0", "other=1"]),
            st.sampled_from(["n1", "n2"]),
        ),
        st.dictionaries(st.integers(0, 3), minutes, max_size=4),
        max_size=5,
    )
)
def test_the_best_search_finds_the_row_in_as_many_seeds_as_any(
    searches: dict[tuple[str, str], dict[int, float | None]],
) -> None:
    """Oracle: a seed of 0..2 finds the row when its minutes are at most 20; the best of the
    row's cells (its glob) and nemeses finds it in the most such seeds, and a cell outside
    the glob never counts."""
    lines = [line(s, m, c, n) for (c, n), seeds in searches.items() for s, m in seeds.items()]
    by = T.seed_minutes(T.searches_of(lines), [ROW])
    where, best = T.best(ROW, by, 20)

    def hits(seeds: dict[int, float | None]) -> int:
        return sum(1 for s in (0, 1, 2) if (m := seeds.get(s)) is not None and m <= 20)

    mine = {k: v for k, v in searches.items() if k[0].startswith("release=4") and v}
    assert (where is None) == (not mine)
    assert T.found(best, 20) == max(map(hits, mine.values()), default=0)
    if where is not None:
        assert best == mine[where]


def test_the_last_line_of_a_search_wins_and_torn_lines_are_skipped() -> None:
    lines = [line(0, None), '{"key": "torn', line(0, 5.0), "not json", line(1, 25.0)]
    by = T.seed_minutes(T.searches_of(lines), [ROW])
    assert by == {(ROW, "release=4.3.1", "n"): {0: 5.0, 1: 25.0}}
    assert T.found(by[(ROW, "release=4.3.1", "n")], 20) == 1


@pytest.mark.parametrize(
    ("run", "hits", "mine"),
    [
        ("runs/discovery/KAFKA-1/release=4.3.1/seed-0/0", 2, True),
        ("runs/discovery/KAFKA-1/release=4.3.1/seed-0/0", 1, False),  # reproduced too rarely
        ("runs/discovery/KAFKA-1/scenario=x/seed-0/0", 2, False),  # another row's cell
        ("runs/discovery/KAFKA-2/release=4.3.1/seed-0/0", 2, False),
        ("runs/kafka-1/20261205T015505Z/release=4.3.1/0", 2, False),  # an aimed run
    ],
)
def test_a_shrunk_file_is_a_rows_when_it_shrank_a_discovery_run_of_its_cells(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run: str, hits: int, mine: bool
) -> None:
    """The header `kafka-chaos shrink` writes is read back: its run, faults and k of n."""
    monkeypatch.setattr(
        "harness.experiment.from_run.experiment_document",
        lambda spec, steps, name=None: {"name": "x"},
    )
    steps = (
        FaultStep.model_validate({"at_s": 1, "fault": "kill", "target": "leader"}),
        FaultStep.model_validate({"at_s": 2, "fault": "pause", "target": "follower"}),
    )
    out = tmp_path / "experiments" / "x-shrunk.yaml"
    out.parent.mkdir()
    outcome = Outcome("KNOWN-BUG", frozenset({"KAFKA-1"}))
    shrink._write(out, None, steps, outcome, (hits, 2, 2, 3), Path(run))
    (aimed := tmp_path / "experiments" / "x.yaml").write_text(yaml.safe_dump({"name": "x"}))

    (shrunk,) = T.shrunk_files(tmp_path / "experiments")
    assert (shrunk.run, shrunk.faults, shrunk.hits, shrunk.need) == (run, 2, hits, 2)
    searched = {"release=4.3.1"}
    assert shrunk.shrinks(ROW, searched) is mine
    assert T.smallest_shrunk(ROW, [shrunk], searched) == (shrunk if mine else None)
    # A row of the same reference in another experiment, whose searches ran other cells.
    assert not shrunk.shrinks(ROW, {"release=3.4.0"})
    assert aimed.exists()  # a file without the header is not taken for one


def test_the_shipped_shrunk_files_are_read_with_their_schedules_fault_count() -> None:
    """Each file in experiments/ headed by the shrink command gives the faults its schedule
    injects (its steps but the heals)."""
    files = T.shrunk_files(REPO_ROOT / "experiments")
    assert files
    for f in files:
        schedule = yaml.safe_load((REPO_ROOT / f.path).read_text())["faults"]["schedule"]
        steps = [FaultStep.model_validate(s) for s in schedule]
        assert f.faults == sum(not s.heals for s in steps), f.path
