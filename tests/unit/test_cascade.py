"""The cascade family of the generic nemesis: one partition's replicas down one after another
and back in a random order. Checked on generated cells against an oracle that reads each
cascade back from the schedule (its bound names `c<draw>_<j>`), and by hand on the roles."""

from __future__ import annotations

import itertools
import random
import re
from collections import defaultdict
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from harness.experiment.families import DEFAULT_FAMILIES, family_of
from harness.experiment.generic import SOLO_KINDS, cascade_menu
from harness.experiment.model import FaultStep
from harness.experiment.outages import one_cause
from tests.unit.test_generic_nemesis import (
    SLOW,
    cells,
    generic_doc,
    in_some_band,
    schedule_of,
    timeouts_oracle,
)

CASCADE = re.compile(r"^c(\d+)_(\d+)$")
SOURCES = {"process", "partition", "crash"}
# The node faults that undo a node's unflushed writes (the oracle's own list).
CACHE_TAKERS = {"lose-unsynced", "torn-write"}


def spans(steps: list[FaultStep]) -> list[tuple[FaultStep, float, float]]:
    """(step, start, end) of every bound fault, its end read from the heal step naming it."""
    heals = {s.target[1:]: s.at_s or 0.0 for s in steps if s.fault == "heal"}
    return [(s, s.at_s or 0.0, heals[s.as_]) for s in steps if s.as_]


def roles_oracle(targets: list[str]) -> bool:
    """Followers then the leader, or the leader, its successor, then any replica left."""
    n = len(targets)
    return targets in (
        ["follower"] * (n - 1) + ["leader"],
        ["leader", "successor"] + ["replica"] * (n - 2),
    )


@SLOW
@given(cells(), st.integers(0, 2**32))
def test_a_cascade_takes_one_partitions_replicas_down_in_turn_and_back_in_any_order(
    doc: dict[str, Any], seed: int
) -> None:
    steps = schedule_of(doc, seed)
    allowed = set(doc["faults"]["generate"].get("families") or DEFAULT_FAMILIES)
    longest_s = max(timeouts_oracle(doc)) / 1000
    timeouts = timeouts_oracle(doc)
    faults = spans(steps)
    cascades: dict[int, list[tuple[int, FaultStep, float, float]]] = defaultdict(list)
    for step, start, end in faults:
        if match := CASCADE.match(step.as_ or ""):
            cascades[int(match[1])].append((int(match[2]), step, start, end))
    if cascades:
        assert "cascade" in allowed and doc["topic"]["replication_factor"] >= 2
    for members in cascades.values():
        members.sort(key=lambda m: m[0])
        chain = [step for _, step, _, _ in members]
        starts = [start for _, _, start, _ in members]
        ends = sorted(end for _, _, _, end in members)
        assert 2 <= len(chain) <= doc["topic"]["replication_factor"]
        assert roles_oracle([s.target for s in chain]), chain
        assert len({s.partition for s in chain}) == 1
        for step in chain:
            assert step.fault not in SOLO_KINDS
            assert family_of(step.fault, step.params.model_dump(by_alias=True)) in SOURCES & allowed
        # At most one replica's page cache: several lost in one outage can only be UNKNOWN.
        # (A swarm's half menu may leave a role only crash faults: then it takes them.)
        if allowed & {"process", "partition"} and not doc["faults"]["generate"].get("swarm"):
            assert len([s for s in chain if s.fault in CACHE_TAKERS]) <= 1, chain
        gaps = [b - a for a, b in itertools.pairwise(starts)]
        gaps += [b - a for a, b in itertools.pairwise(ends)]
        # Inside a timeout (a race) or around one (what the cluster detects by then).
        inside = [g for g in gaps if -0.002 <= g <= longest_s + 0.002]
        around = [g for g in gaps if in_some_band(g * 1000, timeouts, slack_ms=4.0)]
        assert len(set(inside) | set(around)) == len(set(gaps)), gaps
        # Every replica it takes is down when the last goes down; held a drawn time after.
        assert ends[0] > starts[-1]
        assert in_some_band((ends[0] - starts[-1]) * 1000, timeouts, slack_ms=4.0)
        # It starts alone: no other fault is in force then.
        others = [(s, b, e) for s, b, e in faults if s not in chain]
        assert not [s for s, b, e in others if b <= starts[0] < e], starts[0]


def test_its_heals_come_in_every_order_and_its_chains_in_both_directions() -> None:
    """Over many seeds: followers first and leader first both drawn, all three replicas and
    two, and the leader healed first, in the middle and last."""
    doc = generic_doc(3000, 5, ["cascade", "process"])
    chains, heal_rank = set(), set()
    for seed in range(4):
        faults = spans(schedule_of(doc, seed))
        by_draw: dict[str, list[tuple[FaultStep, float]]] = defaultdict(list)
        for step, _, end in faults:
            if match := CASCADE.match(step.as_ or ""):
                by_draw[match[1]].append((step, end))
        for members in by_draw.values():
            chains.add(tuple(s.target for s, _ in members))
            order = [s.target for s, _ in sorted(members, key=lambda m: m[1])]
            heal_rank.add((len(order), order.index("leader")))
    assert chains == {
        ("follower", "leader"),
        ("follower", "follower", "leader"),
        ("leader", "successor"),
        ("leader", "successor", "replica"),
    }
    assert {rank for n, rank in heal_rank if n == 3} == {0, 1, 2}


def test_its_menu_is_the_node_faults_of_the_allowed_source_families() -> None:
    menu = {
        "process": (("kill", "leader"), ("stop", "controller")),
        "crash": (("lose-unsynced", "follower"), ("power-loss", "all")),
        "partition": (("partition", "successor"),),
        "packets": (("loss", "leader"),),
    }
    assert cascade_menu(menu, ["process", "crash", "packets"]) == (
        ("kill", "leader"),
        ("lose-unsynced", "follower"),
        ("lose-unsynced", "replica"),
    )
    assert cascade_menu(menu, ["packets"]) == ()


def test_a_cascade_of_crash_faults_alone_still_takes_every_cache_it_is_given() -> None:
    """With crash the only source family allowed, a cascade takes page caches on each
    replica (what the file asked for); with process beside it, at most one, over many seeds,
    and the cache it takes comes at every place in the chain."""
    alone = generic_doc(3000, 5, ["cascade", "crash"])
    chains = [c for seed in range(3) for c in cascades_of(schedule_of(alone, seed))]
    assert any(len([s for s in c if s.fault in CACHE_TAKERS]) >= 2 for c in chains)
    mixed = generic_doc(3000, 5, ["cascade", "crash", "process"])
    places = set()
    for seed in range(4):
        for chain in cascades_of(schedule_of(mixed, seed)):
            taken = [i for i, s in enumerate(chain) if s.fault in CACHE_TAKERS]
            assert len(taken) <= 1, chain
            places.update(taken)
    assert places == {0, 1, 2}


def cascades_of(steps: list[FaultStep]) -> list[list[FaultStep]]:
    """Each cascade's steps in their order in the chain."""
    by_draw: dict[str, list[tuple[int, FaultStep]]] = defaultdict(list)
    for step in steps:
        if match := CASCADE.match(step.as_ or ""):
            by_draw[match[1]].append((int(match[2]), step))
    return [[s for _, s in sorted(members, key=lambda m: m[0])] for members in by_draw.values()]


def test_one_replica_has_no_cascade() -> None:
    doc = {
        "name": "one",
        "topic": {"replication_factor": 1, "min_insync_replicas": 1},
        "workload": {"rate": 10, "duration_s": 600},
        "faults": {"generate": {"mode": "generic", "mean_interval_s": 2}},
    }
    assert not [
        s for seed in range(3) for s in schedule_of(doc, seed) if (s.as_ or "").startswith("c")
    ]


# The kinds of the oracle's own classes: what crashes a node keeping its cache, what takes it.
KILLS = {"kill"}
NODE_KINDS = ["kill", "stop", "pause", "partition", "lose-unsynced", "torn-write"]


def one_cause_oracle(menus: list[list[str]], kinds: list[str]) -> bool:
    """One incident: a kind every menu has, on every member; or, when it takes the page
    cache, on the last member, the others crashing with theirs kept (a kill where their menu
    has one, else a kind that keeps it, else, with only cache takers, one of those)."""
    shared = set(menus[0]).intersection(*menus[1:])
    *first, last = kinds
    if last not in shared or not all(k in m for k, m in zip(kinds, menus, strict=True)):
        return False
    if last not in CACHE_TAKERS:
        return set(kinds) == {last}
    for kind, menu in zip(first, menus, strict=False):
        keeping = [k for k in menu if k not in CACHE_TAKERS]
        allowed = (KILLS & set(menu)) or set(keeping) or set(menu)
        if kind not in allowed:
            return False
    return True


@given(
    st.lists(
        st.lists(st.sampled_from(NODE_KINDS), min_size=1, max_size=6, unique=True),
        min_size=2,
        max_size=3,
    ),
    st.integers(0, 2**32),
)
def test_one_cause_is_one_incidents_kinds_or_none_without_a_shared_kind(
    menus: list[list[str]], seed: int
) -> None:
    kinds = one_cause(menus, random.Random(seed))
    if not set(menus[0]).intersection(*menus[1:]):
        assert kinds is None
    else:
        assert kinds is not None and one_cause_oracle(menus, kinds), (menus, kinds)


def test_half_the_cascades_are_one_incident_and_a_power_loss_takes_the_last_cache() -> None:
    """Over many seeds, with process and crash beside the cascade: about half the three-
    replica chains share one cause (a mixed chain of 5 kinds does 1 time in 25 by chance),
    and of those that take a cache, the last one down takes it behind kills."""
    doc = generic_doc(3000, 5, ["cascade", "crash", "process"])
    chains = [c for seed in range(9) for c in cascades_of(schedule_of(doc, seed)) if len(c) == 3]
    one = [c for c in chains if len({s.fault for s in c}) == 1]
    power = [c for c in chains if [s.fault for s in c[:2]] == ["kill", "kill"]]
    power = [c for c in power if c[2].fault in CACHE_TAKERS]
    assert len(chains) >= 100
    assert 0.4 <= (len(one) + len(power)) / len(chains) <= 0.65
    assert len(power) >= len(chains) / 12


def test_half_a_cascades_gaps_come_around_a_timeout() -> None:
    """Over many seeds, a cascade's gaps fall in a band around one of the cell's timeouts at
    least half the time (those drawn there, and some drawn inside one), and the rest
    inside one, down to a tenth of a second (the races)."""
    doc = generic_doc(3000, 5, ["cascade", "process"])
    timeouts = timeouts_oracle(doc)
    gaps = []
    for seed in range(3):
        for step, start, _ in spans(schedule_of(doc, seed)):
            if (m := CASCADE.match(step.as_ or "")) and m[2] != "0":
                (before,) = [
                    b
                    for s, b, _ in spans(schedule_of(doc, seed))
                    if s.as_ == f"c{m[1]}_{int(m[2]) - 1}"
                ]
                gaps.append(start - before)
    assert len(gaps) >= 100
    around = [g for g in gaps if in_some_band(g * 1000, timeouts, slack_ms=4.0)]
    assert 0.5 <= len(around) / len(gaps) <= 0.9
    assert min(gaps) < 1.0
