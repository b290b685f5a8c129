"""A run's faults aimed at the partition its failure struck (harness/experiment/struck.py), and
`kafka-chaos shrink --draws` asking the draws so aimed."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.experiment.model import FaultStep
from harness.experiment.shrink import repeated_draw, unbound
from harness.experiment.struck import aimed_at, role_held
from harness.platform.topology import PartitionState
from harness.rundir.events import EventLog, FaultStart, Sample
from kafka_chaos.cli import main
from kafka_chaos.commands import shrink
from tests.unit.test_shrink_command import judged
from tests.unit.test_shrink_draws import _cascade_run, draws_oracle
from tests.unit.test_shrink_repeated import _asked_never_reproducing, shrink_horizon

# The roles naming one set of nodes, narrowest first: with one follower, it is the successor.
ORDER = ("leader", "successor", "followers", "isr", "out-of-sync")
AIMABLE = ("leader", "follower", "followers", "isr", "successor", "replica", "out-of-sync")


def roles_oracle(
    leader: int | None, replicas: list[int], isr: list[int], ordered: bool = True
) -> dict[str, set[int]]:
    """What each aimed role names, written from the targets' meanings: the successor is the
    first in-sync replica other than the leader, in the replicas' order when they come in
    assignment order (`ordered`), else in the ISR's; a partition without a leader has no
    followers."""
    in_sync = [r for r in isr if r != leader]
    next_in_line = [r for r in (replicas if ordered else isr) if r in in_sync][:1]
    return {
        "leader": set() if leader is None else {leader},
        "successor": set(next_in_line),
        "followers": set() if leader is None else {r for r in replicas if r != leader},
        "isr": set(in_sync),
        "out-of-sync": {r for r in replicas if r not in isr},
    }


@st.composite
def readings(draw: st.DrawFn) -> tuple[int | None, list[int], list[int]]:
    """A partition's leader, replicas (assignment order) and ISR (in its own order)."""
    replicas = draw(st.permutations(range(1, 6)).map(lambda p: list(p)))[: draw(st.integers(1, 4))]
    isr = draw(st.permutations(replicas))[: draw(st.integers(0, len(replicas)))]
    leader = draw(st.sampled_from([None, *replicas]))
    return leader, replicas, list(isr)


@given(readings(), st.sets(st.integers(1, 6), max_size=4), st.booleans())
def test_the_role_held_is_the_first_aimed_role_naming_exactly_the_nodes(
    reading, nodes, ordered
) -> None:
    leader, replicas, isr = reading
    roles = roles_oracle(leader, replicas, isr, ordered)
    expected = next((r for r in ORDER if nodes and roles[r] == nodes), None)
    state = PartitionState(2, leader, tuple(replicas), tuple(isr), ordered)
    assert role_held(state, nodes) == expected


def start_of(index: int, step: FaultStep, nodes: list[int], reading: tuple, **kw) -> FaultStart:
    """The fault_start event of `step`, at position `index`, that hit `nodes` and read
    partition 2 as `reading` (leader, replicas, isr) and partition 0 as led by node 9."""
    leader, replicas, isr = reading
    partitions = [
        {"partition": 0, "leader": 9, "isr": [9], "replicas": [9]},
        {"partition": 2, "leader": leader, "isr": isr, "replicas": replicas},
    ]
    return FaultStart.model_validate({
        "ts_us": 1, "step": index, "fault": step.fault, "target": step.target,
        "nodes": nodes, "partitions": partitions, **kw,
    })  # fmt: skip


STEP_TARGETS = (*AIMABLE, "random", "controller", "txn-coordinator", "all", "@c0_0")


@given(
    st.lists(
        st.tuples(
            st.sampled_from(STEP_TARGETS),
            st.sets(st.integers(1, 5), max_size=3).map(sorted),
            readings(),
            st.sampled_from(["same", "none", "other", "whole", "unread"]),
        ),
        max_size=6,
    ),
    st.lists(st.tuples(st.sampled_from([0, 1, 2]), st.integers(1, 6)), max_size=3).map(sorted),
)
def test_each_fault_is_aimed_at_the_role_its_nodes_held_or_left(drawn, controllers) -> None:
    """Oracle: a step keeps its target unless it chose its nodes by a partition role or at
    random, its own event read partition 2, and its nodes held an aimed role there: then that
    role, every other field as it was, on partition 2, or on `away-from-controller` when the
    controller last read by the injection (at ts 1) was a replica of partition 2 and neither
    its leader nor its successor."""
    steps, starts = [], []
    for i, (target, nodes, reading, event) in enumerate(drawn):
        fault = "heal" if target.startswith("@") else "kill"
        step = FaultStep(at_s=float(i), fault=fault, target=target, partition=1, duration_s=3)
        if fault == "heal":
            step = FaultStep(at_s=float(i), fault=fault, target=target)
        steps.append(step)
        if event == "other":
            starts.append(start_of(i, step.model_copy(update={"fault": "pause"}), nodes, reading))
        elif event == "whole":
            starts.append(start_of(i, step, nodes, reading, whole_cluster=True))
        elif event == "unread":
            starts.append(start_of(i, step, nodes, reading).model_copy(update={"partitions": []}))
        elif event == "same":
            starts.append(start_of(i, step, nodes, reading))
    out = aimed_at(steps, starts, 2, "4.3.1", controllers)
    assert len(out) == len(steps)
    seen = [c for ts, c in controllers if ts <= 1][-1:]
    for step, made, (target, nodes, reading, event) in zip(steps, out, drawn, strict=True):
        roles = roles_oracle(*reading)
        role = next((r for r in ORDER if nodes and roles[r] == set(nodes)), None)
        aims = event == "same" and target in (*AIMABLE, "random") and role is not None
        line = roles["leader"] | roles["successor"]
        away = any(c in reading[1] and c not in line for c in seen)
        where = "away-from-controller" if away else 2
        if aims:
            assert made == step.model_copy(update={"target": role, "partition": where})
        else:
            assert made == step


def test_kafka_1211_find_is_aimed_at_the_partition_it_lost() -> None:
    """The KAFKA-1211 find (bench/discovery.jsonl, seed 1, revision 4): a cascade killed
    partition 0's follower, kafka-3, then 2.1 s later its leader, kafka-2. In partition 2, which
    lost 192 messages, they were the leader and, with the ISR [3, 2, 1], the successor; a later
    stop of kafka-2, one of two followers behind the successor kafka-1, keeps its target."""
    steps = [
        FaultStep(at_s=15.022, fault="kill", target="follower", partition=0, **{"as": "c0_0"}),
        FaultStep(at_s=17.133, fault="kill", target="leader", partition=0, **{"as": "c0_1"}),
        FaultStep(at_s=138.912, fault="stop", target="follower", partition=2, duration_s=5),
    ]
    starts = [
        start_of(0, steps[0], [3], (3, [1, 2, 3], [3, 2, 1])),
        start_of(1, steps[1], [2], (3, [1, 2, 3], [3, 2, 1])),
        start_of(2, steps[2], [2], (3, [1, 2, 3], [3, 1, 2])),
    ]
    out = aimed_at(steps, starts, 2, "0.10.2.2")
    assert [(s.target, s.partition, s.as_) for s in out] == [
        ("leader", 2, "c0_0"),
        ("successor", 2, "c0_1"),
        ("follower", 2, None),
    ]
    # A broker that lists replicas in assignment order would have put 1 next ([1, 2, 3]):
    # there kafka-2 held no role naming it alone, and the kill keeps its target.
    assert aimed_at(steps, starts, 2, "4.3.1")[1].target == "leader"
    # The controller, kafka-1 (the run's samples before the kills), was partition 2's third
    # replica: out of its line. Replays strike the partition the controller is out of line for.
    away = aimed_at(steps, starts, 2, "0.10.2.2", [(0, 1)])
    assert [(s.target, s.partition) for s in away] == [
        ("leader", "away-from-controller"),
        ("successor", "away-from-controller"),
        ("follower", 2),
    ]
    in_line = aimed_at(steps, starts, 2, "0.10.2.2", [(0, 2)])  # the successor: kept on p2
    assert [s.partition for s in in_line] == [2, 2, 2]


@given(st.lists(st.tuples(st.integers(0, 9), st.integers(1, 6)), max_size=6), st.integers(-1, 10))
def test_the_controller_at_a_time_is_the_latest_read_by_then(readings, ts_us) -> None:
    from harness.experiment.struck import controller_at

    readings = sorted(readings)
    before = [c for ts, c in readings if ts <= ts_us]
    assert controller_at(readings, ts_us) == (before[-1] if before else None)
    assert controller_at(readings, None) is None


def _events_hitting_node_1(
    run_dir: Path, steps: tuple[FaultStep, ...], controller: int | None = None
) -> None:
    """events.jsonl of `steps`' injections, each fault on node 1, partition 2 led by node 1
    (replicas and ISR [1, 2, 3]), after a sample that read `controller` when given."""
    log = EventLog(run_dir / "events.jsonl")
    if controller is not None:
        log.write(Sample(ts_us=0, partitions=[], controller=controller))
    for i, step in enumerate(steps):
        if not step.heals:
            log.write(start_of(i, step, [1], (1, [1, 2, 3], [1, 2, 3])))
    log.close()


@pytest.mark.parametrize(
    ("struck", "controller", "where"),
    [(True, None, 2), (False, None, 2), (True, 3, "away-from-controller"), (True, 2, 2)],
)
def test_draws_are_asked_aimed_at_the_partition_the_failure_struck(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    struck: bool,
    controller: int | None,
    where: int | str,
) -> None:
    """--draws with a loss in partition 2 (and 1 in partition 0): each draw is asked with its
    faults on a partition role or at random aimed at partition 2's leader (every fault here hit
    node 1, its leader), on `away-from-controller` where the run's controller was partition 2's
    third replica (3), on partition 2 where it was its successor (2); --no-struck asks them as
    drawn."""
    steps = _cascade_run(tmp_path, monkeypatch)
    _events_hitting_node_1(tmp_path, steps, controller)
    verdict = judged("VIOLATION", loss=6, by_partition={"0": 1, "2": 5}, lost=6)
    monkeypatch.setattr(shrink, "judge_run", lambda run_dir: verdict)
    asked = _asked_never_reproducing(monkeypatch)

    def aimed(step: FaultStep) -> FaultStep:
        moves = struck and not step.heals and step.target in (*AIMABLE, "random")
        return step.model_copy(update={"target": "leader", "partition": where}) if moves else step

    horizon = shrink_horizon(tmp_path)
    draws = [[aimed(s) for s in d] for d in draws_oracle(steps)]
    made = [tuple(repeated_draw(unbound(d), horizon, 3)) for d in draws]
    flag = "--struck" if struck else "--no-struck"
    assert main(["shrink", str(tmp_path), "--draws", flag, "--budget", "90"]) == 2
    assert asked == [(), ()] + [d for d in made if d for _ in range(2)]
    targets = {s.target for d in asked for s in d if not s.heals}
    assert ("leader" in targets) and (struck == (targets <= {"leader", "all", "controller"}))
    said = capsys.readouterr().err
    away = "away-from-controller, as it was)" in said
    assert struck == ("which the failure struck" in said) and away == (where != 2)


@given(
    st.dictionaries(st.integers(0, 5).map(str), st.integers(0, 9)),
    st.dictionaries(st.integers(0, 5).map(str), st.integers(0, 9)),
)
def test_the_struck_partition_counts_lost_and_diverged_together(lost, diverged) -> None:
    """Oracle: per partition the sum of both counts; the highest sum above 0, the lowest
    partition on a tie; None when every sum is 0."""
    from harness.experiment.struck import struck_partition

    sums = {int(p): lost.get(p, 0) + diverged.get(p, 0) for p in {*lost, *diverged}}
    best = max(sums.values(), default=0)
    expected = min((p for p, n in sums.items() if n == best), default=None) if best else None
    assert struck_partition(lost, diverged) == expected
