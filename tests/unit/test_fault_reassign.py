"""The replica set a reassign fault moves a partition to, against an oracle (no Docker)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.chaos.faults import FAULT_TYPES, HelperSite
from harness.chaos.faults.reassign import new_replicas


@st.composite
def placements(draw):
    brokers = list(range(1, draw(st.integers(1, 6)) + 1))
    replicas = draw(st.permutations(brokers).map(lambda p: p[: draw(st.integers(1, len(p)))]))
    targets = draw(st.lists(st.sampled_from(brokers), min_size=1, max_size=3, unique=True))
    return brokers, list(replicas), targets


@given(placements(), st.sampled_from(["drop", "move"]), st.integers(0, 99))
def test_the_new_replica_set_leaves_out_the_targets_or_says_why_not(placement, mode, seed):
    brokers, replicas, targets = placement
    try:
        after = new_replicas(replicas, targets, brokers, mode, random.Random(seed).choice)
    except ValueError as refusal:
        reason = str(refusal)
        if any(t not in replicas for t in targets):
            assert "hold no replica" in reason
        elif mode == "drop":
            assert set(replicas) <= set(targets) and "none" in reason
        else:
            assert len(set(brokers) - set(replicas)) < len(targets) and "mode drop" in reason
        return
    assert all(t in replicas for t in targets)
    assert not set(after) & set(targets)
    assert len(after) == len(set(after))  # no broker twice
    if mode == "drop":
        assert after == [r for r in replicas if r not in targets]  # order kept
    else:
        assert len(after) == len(replicas)
        kept = [(i, r) for i, r in enumerate(replicas) if r not in targets]
        assert all(after[i] == r for i, r in kept)  # only the targets' places change
        assert set(after) <= set(brokers)


def test_reassign_is_an_admin_action_with_bounded_params():
    fault = FAULT_TYPES["reassign"]
    assert fault.helper_site is HelperSite.ADMIN_CLIENT
    assert fault.parse_params({}).model_dump() == {"mode": "drop", "timeout_s": 60}
    for bad, problem in [({"mode": "swap"}, "params.mode"), ({"timeout_s": 0}, "params.timeout_s"),
                         ({"timeout_s": 601}, "10 minutes")]:  # fmt: skip
        with pytest.raises(ValueError, match=problem):
            fault.parse_params(bad)
