"""A run's schedule pinned to the states its faults met (harness/experiment/pin.py): each
fault step on a partition's role waits for exactly the ISR size and leader presence the
nemesis read before injecting it, the first of them after the run's first acknowledgement of
its partition for a committed message too, for at most PIN_GRACE_S past its time; every other step,
and a step whose reading is missing or from another schedule, is left as it was; the pinned
schedule is a valid experiment file."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.chaos.conditions import ClusterView
from harness.experiment.fields import PARTITION_TARGETS
from harness.experiment.from_run import cell_of_run, experiment_document, steps_of_run
from harness.experiment.load import load_experiment, parse_experiment
from harness.experiment.matrix import expand
from harness.experiment.model import FaultStep
from harness.experiment.pin import PIN_GRACE_S, first_acks, pin
from harness.experiment.plan import schedule_for
from harness.rundir import layout
from harness.rundir.events import FaultStart
from harness.rundir.records import Status
from harness.settings import REPO_ROOT
from tests.unit.test_shrink_command import run_spec

# The cascade search's cell: three replicas, partition roles, heals by name.
CELL = expand(load_experiment(REPO_ROOT / "experiments" / "nemesis-generic.yaml"))[0]
REPLICAS = (1, 2, 3)


def _view(
    leader: int | None, isr: tuple[int, ...], partition: int, since_s: float = 0.0, hw: int = 1
) -> ClusterView:
    """The cluster as a condition reads it, `partition` led by `leader` with `isr` and high
    watermark `hw`, `since_s` after the step before finished."""
    brokers = frozenset(REPLICAS)
    return ClusterView(
        {partition: leader},
        {partition: isr},
        brokers,
        {},
        {},
        since_s,
        high_watermarks={partition: hw},
    )


@st.composite
def readings(draw: st.DrawFn) -> tuple[int | None, tuple[int, ...], bool]:
    """A leader (or none), an ISR, and whether the nemesis failed to read them."""
    isr = tuple(draw(st.lists(st.sampled_from(REPLICAS), unique=True, max_size=3)))
    leader = draw(st.none() | st.sampled_from(isr or REPLICAS))
    return leader, isr, draw(st.booleans())


def _start(index: int, step: FaultStep, reading: tuple[Any, ...], partition: int) -> FaultStart:
    leader, isr, failed = reading
    roles = [{"partition": partition, "leader": leader, "isr": list(isr), "replicas": [1, 2, 3]}]
    return FaultStart(
        ts_us=index,
        step=index,
        fault=step.fault,
        target=step.target,
        partition=partition,
        partitions=roles,
        partitions_error="no broker answered" if failed else None,
    )


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.data())
def test_each_role_step_waits_for_exactly_the_state_it_met(seed: int, data: st.DataObject):
    steps = schedule_for(CELL, seed)
    # When the run first acknowledged each partition (µs, as the starts' ts_us = their index).
    first_acks = data.draw(
        st.dictionaries(st.integers(0, 9), st.integers(-1, len(steps) + 1)), label="first acks"
    )
    starts, met = [], {}
    for index, step in enumerate(steps):
        if step.heals or not data.draw(st.booleans(), label="acted"):
            continue
        reading = data.draw(readings(), label=f"reading {index}")
        partition = step.partition if isinstance(step.partition, int) else 0
        starts.append(_start(index, step, reading, partition))
        if step.target in PARTITION_TARGETS and not reading[2]:
            met[index] = (reading[0], reading[1], partition)

    pinned = pin(steps, starts, first_acks)

    # The oracle of the commit waited for: the first pinned step of each partition that the
    # run had acknowledged a message of before it (ts_us = the step's index).
    commit_waits: dict[int, int] = {}
    for index, (_, _, p) in sorted(met.items()):
        if p in first_acks and first_acks[p] <= index and p not in commit_waits:
            commit_waits[p] = index
    assert len(pinned) == len(steps)
    for index, (before, after) in enumerate(zip(steps, pinned, strict=True)):
        if index not in met:
            assert after == before
            continue
        leader, isr, p = met[index]
        assert after.model_dump(exclude={"after"}) == before.model_dump(exclude={"after"})
        condition = after.condition
        assert condition is not None and not condition.unmet(_view(leader, isr, p), p)
        # A committed message is waited for by the first step after the run's first one.
        waits = commit_waits.get(p) == index
        assert bool(condition.unmet(_view(leader, isr, p, hw=0), p)) is waits
        # Any other ISR size, or the other leader presence, keeps the step waiting.
        missing = tuple(n for n in REPLICAS if n not in isr)
        other = isr + missing[:1] if missing else isr[:-1]
        assert condition.unmet(_view(leader, other, p), p)
        assert condition.unmet(_view(None if leader else (isr or REPLICAS)[0], isr, p), p)
        # ... for at most PIN_GRACE_S past its time, counted from the step before's.
        before_s = steps[index - 1].at_s or 0.0 if index else 0.0
        grace_s = round((before.at_s or 0.0) - before_s + PIN_GRACE_S, 3)  # whole ms
        assert not condition.unmet(_view(leader, other, p, since_s=grace_s), p)
        assert condition.unmet(_view(leader, other, p, since_s=grace_s - 0.01), p)


def test_readings_of_another_schedule_pin_nothing():
    steps = schedule_for(CELL, 7)
    index, step = next((i, s) for i, s in enumerate(steps) if s.target in PARTITION_TARGETS)
    other = "kill" if step.fault != "kill" else "pause"
    wrong = FaultStart(ts_us=1, step=index, fault=other, target=step.target, partition=0,
                       partitions=[{"partition": 0, "leader": 1, "isr": [1]}])  # fmt: skip
    beyond = FaultStart(ts_us=1, step=len(steps), fault=step.fault, target=step.target)
    assert pin(steps, [wrong, beyond]) == tuple(steps)


def test_a_pinned_schedule_is_a_valid_experiment_file_that_runs_it():
    spec = run_spec(CELL, 11)
    steps = steps_of_run(spec)
    starts = [
        _start(i, s, (1, (1,), False), s.partition if isinstance(s.partition, int) else 0)
        for i, s in enumerate(steps)
        if not s.heals
    ]
    pinned = pin(steps, starts)
    assert any(p.after != s.after for p, s in zip(pinned, steps, strict=True))

    (cell,) = expand(parse_experiment(experiment_document(spec, pinned)))
    assert cell.spec.faults.schedule == list(pinned)
    assert cell_of_run(spec, pinned).spec.faults.schedule == list(pinned)


def test_a_step_with_its_own_condition_waits_for_it_and_its_state_with_no_fallback():
    steps = list(schedule_for(CELL, 7))
    index = next(i for i, s in enumerate(steps) if s.target in PARTITION_TARGETS and not s.heals)
    own = "after_s(1) or isr_size(0) == 3"
    steps[index] = steps[index].model_copy(update={"after": own})
    start = _start(index, steps[index], (1, (1,), False), 0)
    after = pin(steps, [start])[index].after
    state = "isr_size(0) == 1 and has_leader(0)"  # the partition its reading named
    assert after == f"after_s(1) and {state} or isr_size(0) == 3 and {state}"


@settings(max_examples=40, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from(list(Status)), st.integers(0, 3), st.integers(1, 10**6) | st.none()
        ),
        max_size=30,
    )
)
def test_first_acks_are_each_partitions_earliest_acknowledgement(rows: list, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("run")
    status, partition, ack_ts = zip(*rows, strict=True) if rows else ((), (), ())
    table = pa.table(
        {"status": pa.array([s.value for s in status], pa.string()),
         "partition": pa.array(partition, pa.int32()),
         "ack_ts_us": pa.array(ack_ts, pa.int64())}
    )  # fmt: skip
    pq.write_table(table, run_dir / layout.ACKED)
    # The oracle: the smallest ack time of each partition's acknowledged rows.
    expected: dict[int, int] = {}
    for s, p, ts in rows:
        if s is Status.OK and ts is not None:
            expected[p] = min(ts, expected.get(p, ts))
    assert first_acks(run_dir) == expected


def test_a_run_without_acked_parquet_has_no_first_acks(tmp_path):
    assert first_acks(tmp_path) == {}
