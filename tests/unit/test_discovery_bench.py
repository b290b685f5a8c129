"""bench/discovery_bench.py's pure parts: the rows it searches, the cells each runs, the
unaimed experiment it runs them as, and resuming from its results file."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis.judge.known_bugs import KNOWN_BUGS
from harness.experiment.generic import REVISION
from harness.experiment.load import load_experiment, parse_experiment
from harness.experiment.matrix import expand
from harness.experiment.plan import schedule_for
from harness.settings import REPO_ROOT
from tests.unit.bench_scripts import load


def bench() -> ModuleType:
    return load("discovery_bench")


def test_each_reference_and_experiment_is_one_row_with_its_cells() -> None:
    rows = bench().rows_of(KNOWN_BUGS)
    by = {(r.reference, r.experiment): r.cells for r in rows}
    assert [r.reference for r in rows].count("KAFKA-17754") == 1  # four anomalies, one row
    assert by[("KIP-966", "experiments/kafka-history.yaml")] == "scenario=last-replica-*"
    assert by[("KIP-966", "experiments/known-bugs/kafka-fsync.yaml")] == "*"
    assert (
        by[("KIP-966 part 2", "experiments/known-bugs/kafka-fsync.yaml")] == "release=4.3.1-kraft*"
    )
    assert all((REPO_ROOT / r.experiment).is_file() for r in rows)


def test_only_cells_of_an_affected_release_and_client_are_searched() -> None:
    module = bench()
    bugs = {bug.reference: bug for bug in KNOWN_BUGS}
    (row,) = [r for r in module.rows_of(KNOWN_BUGS) if r.reference == "KAFKA-17754"]
    cells = expand(load_experiment(REPO_ROOT / row.experiment))
    chosen = {c.name for c in module.affected_cells(row, cells, bugs["KAFKA-17754"])}
    assert chosen and all("java-4.3.1" not in name for name in chosen)  # KIP-890 on both sides
    assert any("librdkafka-on-4.3.1" in name for name in chosen)  # no KIP-890 in librdkafka


def test_the_unaimed_cell_keeps_its_workload_and_config_and_draws_the_generic_nemesis() -> None:
    (cell, *_) = expand(
        load_experiment(REPO_ROOT / "experiments/jepsen-2024-late-connections.yaml")
    )
    document = bench().unaimed(cell.spec.model_dump(by_alias=True), 300)
    (unaimed,) = expand(parse_experiment(document))
    assert unaimed.spec.faults.generate and unaimed.spec.faults.generate.mode == "generic"
    assert unaimed.spec.workload.duration_s == 300
    assert unaimed.spec.workload.transactions == cell.spec.workload.transactions
    assert unaimed.spec.producer == cell.spec.producer and unaimed.spec.kafka == cell.spec.kafka
    assert schedule_for(unaimed, 1)  # it draws steps


def test_a_search_on_record_is_not_run_again_and_a_torn_line_is_ignored(tmp_path: Path) -> None:
    module = bench()
    results = tmp_path / "discovery.jsonl"
    row = module.Row("KAFKA-17582", "experiments/known-bugs/KAFKA-17582.yaml", "*")
    assert module.done_keys(results) == set()
    module.record(results, row, "cell-a", 0, 7.5)
    module.record(results, row, "cell-a", 1, None, also={"KIP-966 part 2": 2.5})
    with results.open("a") as out:
        out.write('{"key": "torn')
    assert module.done_keys(results) == {
        module.key_of(row, "cell-a", 0),
        module.key_of(row, "cell-a", 1),
    }
    lines = [json.loads(line) for line in results.read_text().splitlines()[:2]]
    assert [line["minutes_to_first"] for line in lines] == [7.5, None]
    # The other known bugs a search's chunks showed, with the minutes to each one's first.
    assert [line["also_found"] for line in lines] == [{}, {"KIP-966 part 2": 2.5}]


def test_a_chunk_starts_in_an_empty_directory(tmp_path):
    """A chunk directory a stopped search left (its events say it was interrupted) is
    emptied before the chunk runs again; a new one is left to the run to make."""
    fresh = bench().fresh
    left = tmp_path / "seed-0" / "0"
    left.mkdir(parents=True)
    (left / "events.jsonl").write_text('{"type": "harness_error"}\n')
    assert fresh(left) == left and not left.exists()
    assert fresh(tmp_path / "seed-1" / "0") == tmp_path / "seed-1" / "0"


def test_another_nemesis_is_another_search_under_its_own_key() -> None:
    module = bench()
    row = module.Row("KAFKA-1211", "experiments/kafka-history.yaml", "*")
    plain = module.key_of(row, "c", 0)
    # Lines from before the cascade family (no label) are not this nemesis' searches.
    assert plain.endswith("|generic, cascades") and plain.count("|") == 4
    keys = {
        module.key_of(row, "c", 0, module.Nemesis(s, o, c))
        for s in (False, True)
        for o in (1, 2)
        for c in (1.0, 3.0)
    }
    assert len(keys) == 8 and plain in keys
    assert module.Nemesis(True, 2, 3).label == "generic, cascades x3, overlap 2, swarm"
    document = module.unaimed({"workload": {"rate": 1}}, 60, module.Nemesis(True, 2, 3))
    assert document["faults"]["generate"] | {"mean_interval_s": 0} == {
        "mode": "generic",
        "mean_interval_s": 0,
        "swarm": True,
        "overlap": 2,
        "weights": {"cascade": 3},
    }


def test_a_search_over_some_families_draws_only_their_steps() -> None:
    module = bench()
    row = module.Row("KAFKA-17754", "experiments/jepsen-2024-late-connections.yaml", "*")
    requests = module.Nemesis(families=("requests",))
    assert requests.label == "generic, requests"
    assert module.Nemesis(cascade=3, families=("cascade", "disk")).label == (
        "generic, cascade+disk x3"
    )
    assert module.key_of(row, "c", 0, requests) != module.key_of(row, "c", 0)
    (cell, *_) = expand(load_experiment(REPO_ROOT / row.experiment))
    document = module.unaimed(cell.spec.model_dump(by_alias=True), 600, requests)
    (unaimed,) = expand(parse_experiment(document))
    steps = [s for seed in range(5) for s in schedule_for(unaimed, seed) if not s.heals]
    assert steps and {s.fault for s in steps} <= {"delay", "drop-requests"}
    assert all(s.params.requests for s in steps)


def test_another_revision_of_the_generator_is_another_search() -> None:
    """A search the generator's next revision runs does not resume, nor count with, the
    seeds the previous one drew."""
    module = bench()
    row = module.Row("KAFKA-1211", "experiments/kafka-history.yaml", "*")
    old, new = module.Nemesis(cascade=9), module.Nemesis(cascade=9, revision=1)
    assert new.label == "generic, cascades x9, revision 1"
    assert old.label == "generic, cascades x9"
    assert module.key_of(row, "c", 0, old) != module.key_of(row, "c", 0, new)
    lines = [
        json.dumps({"key": module.key_of(row, "c", 0, n), "reference": row.reference,
                    "experiment": row.experiment, "cell": "c", "nemesis": n.label, "seed": 0,
                    "minutes_to_first": 2.5})
        for n in (old, new)
    ]  # fmt: skip
    assert {s.nemesis for s in module.searches_of(lines)} == {old.label, new.label}


def draws() -> ModuleType:
    return load("nemesis_draws")  # its dataclass looks its module up


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["kill@leader", "kill@successor", "pause@leader"]),
            st.integers(0, 50),
            st.integers(1, 30),
        ),
        max_size=8,
    ),
    st.sampled_from([0.0, 5.0, 20.0]),
    st.sampled_from([math.inf, 0.0, 10.0, 30.0]),
)
def test_a_match_beside_another_fault_starts_while_that_one_acts(
    plan: list, settled_s: float, within_s: float
) -> None:
    module = draws()
    faults = [module.Drawn(name, start, start + length) for name, start, length in plan]
    found = module.matches(faults, "kill@successor", ["kill@*"], settled_s, within_s=within_s)
    # The oracle: every pair, by position, of a successor kill and another kill acting then,
    # begun settled_s to within_s before it.
    expected = [
        f
        for i, f in enumerate(faults)
        if f.name == "kill@successor"
        and any(
            j != i
            and o.name.startswith("kill@")
            and o.start_s <= f.start_s - settled_s
            and f.start_s - within_s <= o.start_s
            and f.start_s < o.end_s
            for j, o in enumerate(faults)
        )
    ]
    assert found == expected
    assert module.matches(faults, "kill@successor") == [
        f for f in faults if f.name == "kill@successor"
    ]
    # Two besides: two distinct other faults, one for each pattern.
    two = module.matches(faults, "kill@successor", ["*@leader", "*@leader"])
    assert two == [
        f
        for i, f in enumerate(faults)
        if f.name == "kill@successor"
        and sum(
            j != i and o.name.endswith("@leader") and o.start_s <= f.start_s < o.end_s
            for j, o in enumerate(faults)
        )
        >= 2
    ]


def test_a_finished_chunk_with_the_same_schedule_is_judged_again_not_run_again(tmp_path):
    from harness.experiment.model import FaultStep

    replayed = bench().replayed
    steps = [FaultStep(at_s=1, fault="kill", target="leader", duration_s=5)]
    written = [s.model_dump(by_alias=True, exclude_none=True) for s in steps]
    (tmp_path / "spec.json").write_text(json.dumps({"schedule": written}))
    assert not replayed(tmp_path, steps)  # not reconciled: the run may have stopped midway
    (tmp_path / "results.json").write_text("{}")
    assert replayed(tmp_path, steps)
    other = [FaultStep(at_s=1, fault="kill", target="leader", duration_s=6)]
    assert not replayed(tmp_path, other)  # another draw: run it
    assert not replayed(tmp_path / "missing", steps)


def test_one_chunk_runs_with_the_schedule_its_search_drew_and_records_nothing(
    tmp_path, monkeypatch
):
    """--seed S --chunk N: that chunk alone (seed S * 1000 + N, its own directory), judged,
    and no line in the results file (a chunk examined again is no search)."""
    import harness.platform.image as image
    import harness.run.replay as replay
    import kafka_chaos.commands.shrink as shrink

    ran: list[tuple[int, Path]] = []

    def fake_replay(cell, steps, seed, image_, run_dir, progress):
        assert list(steps) == list(schedule_for(cell, seed))
        ran.append((seed, run_dir))

    monkeypatch.setattr(replay, "replay", fake_replay)
    monkeypatch.setattr(image, "ensure_image", lambda *a, **k: "image")
    monkeypatch.setattr(shrink, "judge_run", lambda run_dir: (None, None))
    monkeypatch.setattr(shrink, "outcome_of", lambda v, r: shrink.Outcome("PASS", frozenset()))
    monkeypatch.setattr(shrink, "bugs_shown", lambda v: frozenset())
    results = tmp_path / "results.jsonl"
    argv = ["--rows", "KAFKA-17582", "--cells", "release=3.9.1*", "--seed", "1", "--chunk",
            "3", "--chunk-minutes", "2.5", "--results", str(results), "--runs-dir",
            str(tmp_path)]  # fmt: skip
    assert bench().main(argv) == 0
    assert [(seed, run_dir.name, run_dir.parent.name) for seed, run_dir in ran] == [
        (1003, "3", f"seed-1-cascades-revision{REVISION}")
    ]
    assert not results.exists()


@given(
    st.lists(
        st.tuples(
            st.integers(0, 4),  # seed
            st.sampled_from(["c1", "c2"]),  # cell
            st.sampled_from(["generic, cascades", "generic, cascades x9"]),  # nemesis
            st.one_of(st.none(), st.floats(0.5, 20)),  # minutes
        ),
        max_size=10,
    ),
    st.integers(2, 4),
)
def test_a_search_is_decided_once_its_outcome_cannot_change(drawn, seeds) -> None:
    """Oracle: among the lines of the same row, cell and nemesis with a seed below `seeds`
    (the last line of a seed winning, as the results file reads), 2 found decides it, and so
    do more misses than the seeds left could make up."""
    module = bench()
    found = [
        module.Search(f"k{i}", "R", "e.yaml", cell, nemesis, seed, minutes)
        for i, (seed, cell, nemesis, minutes) in enumerate(drawn)
    ]
    like = module.Search("k", "R", "e.yaml", "c1", "generic, cascades x9", 0, None)
    last: dict[int, float | None] = {}
    for seed, cell, nemesis, minutes in drawn:
        if (cell, nemesis) == ("c1", "generic, cascades x9") and seed < seeds:
            last[seed] = minutes
    hits = [m for m in last.values() if m is not None]
    expected = len(hits) >= 2 or len(last) - len(hits) > seeds - 2
    assert module.decided(found, like, seeds) is expected


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["partition@leader", "partition@group-coordinator"]),
            st.integers(0, 50),
            st.integers(1, 70),
            st.sampled_from(["from-brokers", "from-quorum", "full"]),
        ),
        max_size=8,
    ),
    st.tuples(st.integers(0, 40), st.integers(0, 80)),
)
def test_a_match_can_ask_how_long_it_acts_and_its_params(plan: list, lasting: tuple) -> None:
    module = draws()
    faults = [
        module.Drawn(name, start, start + length, (("mode", mode), ("to", "brokers")))
        for name, start, length, mode in plan
    ]
    low, high = lasting
    found = module.matches(
        faults, "*@group-coordinator", lasting=(low, high), params=[("mode", "from-brokers")]
    )
    # The oracle: by position, each cut of the coordinator from the brokers whose length is
    # within the bounds, both included.
    assert found == [
        faults[i]
        for i, (name, _, length, mode) in enumerate(plan)
        if name == "partition@group-coordinator"
        and mode == "from-brokers"
        and low <= length <= high
    ]


def test_a_param_filter_is_key_equals_value() -> None:
    module = draws()
    assert module._param("mode=from-brokers") == ("mode", "from-brokers")
    assert module._param("requests=EndTxn,Produce") == ("requests", "EndTxn,Produce")
    for bad in ("mode", "=full"):
        with pytest.raises(argparse.ArgumentTypeError, match="KEY=VALUE"):
            module._param(bad)


def test_a_drawn_fault_carries_its_steps_params_as_text() -> None:
    module = bench()
    row = module.Row("KAFKA-20634", "experiments/known-bugs/KAFKA-20634.yaml", "release=4.3.0*")
    nemesis = module.Nemesis(overlap=3, families=("partition",))
    (cell, *_) = expand(load_experiment(REPO_ROOT / row.experiment))
    document = module.unaimed(cell.spec.model_dump(by_alias=True), 600, nemesis)
    (unaimed,) = expand(parse_experiment(document))
    for seed in range(3):
        steps = schedule_for(unaimed, seed)
        drawn = draws().faults_of(steps)
        cuts = [s for s in steps if not s.heals]
        assert drawn and len(drawn) == len(cuts)
        for fault, step in zip(drawn, cuts, strict=True):
            assert dict(fault.params)["mode"] == step.params.mode
            assert fault.end_s > fault.start_s
