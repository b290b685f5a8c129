"""The `flip` fault (one bit inverted near a file's end) and how the checker judges a loss under
silent corruption: UNKNOWN, since Kafka documents no outcome for it; PASS when nothing is lost."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis.judge.findings import judge_duplicates, judge_order
from analysis.judge.guarantees import UNDOCUMENTED, guarantee_for
from analysis.judge.history import FaultHit, partition_fault_class
from analysis.judge.outcomes import Verdict
from analysis.model.anomalies import AnomalyName
from harness.chaos.faults import FAULT_TYPES
from harness.chaos.faults.base import FaultError
from harness.chaos.faults.file_damage import Flip, FlipParams
from harness.experiment.load import load_experiment
from harness.experiment.matrix import expand
from harness.experiment.plan import fault_class
from harness.rundir.config import CellConfig
from harness.rundir.fault_classes import deciding_class
from tests.unit.test_mechanisms import judged, start
from tests.unit.verdict_runs import AP, CP

ROOT = Path(__file__).resolve().parents[2]


def flip(byte_from_end: int, bit: int) -> Flip:
    fault = Flip.__new__(Flip)  # only the params matter to _damage: no cluster, no context
    fault.params = FlipParams(byte_from_end=byte_from_end, bit=bit)
    return fault


@given(st.binary(min_size=1, max_size=300), st.integers(1, 400), st.integers(0, 7))
def test_exactly_the_chosen_bit_is_inverted_and_nothing_else_moves(
    data: bytes, byte_from_end: int, bit: int
) -> None:
    damaged, detail = flip(byte_from_end, bit)._damage(data)
    at = max(0, len(data) - byte_from_end)  # oracle: counted from the end, clamped to the start
    assert len(damaged) == len(data)
    differing = [i for i, (a, b) in enumerate(zip(data, damaged, strict=True)) if a != b]
    assert differing == [at]
    assert damaged[at] ^ data[at] == 1 << bit
    assert detail == {"at": at, "bit": bit, "byte_before": data[at], "byte_after": damaged[at]}


def test_an_empty_file_has_no_bit_to_flip() -> None:
    with pytest.raises(FaultError, match="empty"):
        flip(1, 0)._damage(b"")


def test_flip_is_listed_as_corruption_with_bounded_params() -> None:
    assert FAULT_TYPES["flip"] is Flip and Flip.class_kinds == ("corruption",)
    with pytest.raises(ValueError):
        FlipParams(bit=8)
    with pytest.raises(ValueError):
        FlipParams(byte_from_end=0)


@pytest.mark.parametrize("recipe", [CP, AP])
def test_loss_under_corruption_is_undocumented_whatever_the_recipe(recipe) -> None:
    config = CellConfig.read({**recipe, "fault_class": "follower-corruption"})
    assert guarantee_for(config).loss == UNDOCUMENTED


def test_a_loss_where_a_bit_was_flipped_is_unknown_and_none_is_a_pass() -> None:
    events = [start(10, [3], fault="flip", class_kind="corruption")]
    config = {**CP, "fault_class": "follower-corruption"}
    lost = judged(config, events, p0=4)
    assert lost.verdict == Verdict.UNKNOWN
    (reason,) = [r for r in lost.reasons if "4 of" in r]
    assert "not documented" in reason and "Kafka documents no outcome" in reason
    assert judged(config, events).verdict == Verdict.PASS


def test_a_flip_beside_other_faults_gives_the_corruption_class_to_the_partition_and_the_cell():
    kill = FaultHit(1, "kill", "kill", "leader", (1,), 10)
    flipped = FaultHit(2, "flip", "corruption", "leader", (1,), 11)
    assert partition_fault_class([kill, flipped]) == "leader-corruption"
    assert partition_fault_class([kill, FaultHit(3, "kill", "kill", "leader", (2,), 12)]) == "mixed"
    spec = load_experiment(ROOT / "experiments/known-bugs/bit-flip.yaml")
    classes = {cell.name: fault_class(cell.spec.faults.schedule) for cell in expand(spec)}
    assert classes == {"where=restarted": "leader-corruption", "where=running": "leader-corruption"}


def test_a_duplicate_or_reordering_under_corruption_is_unknown_not_a_violation() -> None:
    guarantee = guarantee_for(CellConfig.read({**CP, "fault_class": "leader-corruption"}))
    assert (guarantee.duplicates, guarantee.order) == (UNDOCUMENTED, UNDOCUMENTED)
    counts = Counter({AnomalyName.DUPLICATED: 1, AnomalyName.REORDERED: 2})
    (dup,) = judge_duplicates(counts, {}, guarantee)
    (order,) = judge_order(counts, {}, guarantee)
    assert dup.verdict == order.verdict == Verdict.UNKNOWN
    assert "not documented" in dup.detail and "not documented" in order.detail
    # The same counts with the recipe's own guarantee are violations.
    cp = guarantee_for(CellConfig.read({**CP, "fault_class": "leader-kill"}))
    assert judge_duplicates(counts, {}, cp)[0].verdict == Verdict.VIOLATION


CLASSES = st.sampled_from(
    ["all-power-loss", "leader-corruption", "follower-corruption", "leader-kill", "all-kill",
     "follower-pause", "node-partition"]
)  # fmt: skip


@given(st.lists(CLASSES, max_size=6))
def test_the_deciding_class_of_a_mix_is_power_loss_of_all_then_corruption(classes) -> None:
    # Oracle: the weakest guarantee first (power loss of all allows loss), then the classes
    # with no documented outcome, in name order; none of the others decides a mix.
    if "all-power-loss" in classes:
        expected = "all-power-loss"
    else:
        expected = next((c for c in sorted(classes) if c.split("-", 1)[1] == "corruption"), None)
    assert deciding_class(classes) == expected
    assert deciding_class(iter(classes)) == expected


def test_duplicates_and_order_under_corruption_cite_the_corruption_row_not_the_recipes() -> None:
    """Under silent corruption every rule of the guarantee is UNDOCUMENTED, and each cites the
    corruption row's reason (Kafka documents no outcome), never the idempotence or ordering
    citation the recipe would have."""
    guarantee = guarantee_for(CellConfig.read({**CP, "fault_class": "leader-corruption"}))
    why = guarantee.citation
    assert why.startswith("silent corruption of a replica's files")
    assert (guarantee.duplicates_citation, guarantee.order_citation) == (why, why)
    counts = Counter({AnomalyName.DUPLICATED: 1, AnomalyName.REORDERED: 2})
    (dup,) = judge_duplicates(counts, {}, guarantee)
    (order,) = judge_order(counts, {}, guarantee)
    assert dup.detail.endswith(f"; not documented: {why}")
    assert order.detail.endswith(f"; not documented: {why}")
