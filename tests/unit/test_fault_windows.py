"""How long a fault acts for the liveness bounds (analysis/checks/windows.py): a crash until the
cluster could notice it, any other fault until its heal."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from analysis.checks.hanging import hanging, hanging_bound_us, holds
from analysis.checks.liveness import Ends
from analysis.checks.windows import CRASHES, failure_detection_us, fault_windows
from analysis.model.evidence import RunEvidence
from harness.rundir.spec import RunSpec

S = 1_000_000
KINDS = sorted(CRASHES | {"stop", "pause", "partition", "delay", "slow-disk"})


def evidence(faults: list[tuple[str, int, int | None]], heal_at: int) -> RunEvidence:
    """A run whose faults are (kind, injected, healed or None), then the final heal."""
    events: list[dict] = []
    for fault_id, (kind, start, end) in enumerate(faults, 1):
        events.append({"type": "fault_start", "ts_us": start, "fault_id": fault_id, "fault": kind})
        if end is not None:
            events.append({"type": "fault_end", "ts_us": end, "fault_id": fault_id})
    events.append({"type": "phase", "phase": "heal", "ts_us": heal_at})
    return RunEvidence.coerce(events)


faults_st = st.lists(
    st.tuples(
        st.sampled_from(KINDS),
        st.integers(0, 100 * S),
        st.one_of(st.none(), st.integers(0, 30 * S)),
    ),
    max_size=6,
).map(lambda drawn: [(k, at, None if d is None else at + d) for k, at, d in drawn])


@given(faults_st, st.integers(0, 20 * S))
def test_a_crash_acts_until_the_cluster_could_notice_it(faults, detection_us):
    """Oracle: every fault from its injection to its heal (the final heal when none); a crash's
    window reaches at least detection_us past its injection; no other fault's is stretched."""
    final = 200 * S
    windows = fault_windows(evidence(faults, final), detection_us)
    expected = []
    for kind, start, end in faults:
        until = final if end is None else end
        expected.append((start, max(until, start + detection_us) if kind in CRASHES else until))
    assert windows == tuple(expected)
    assert fault_windows(evidence(faults, final)) == tuple(
        (start, final if end is None else end) for _, start, end in faults
    )


def test_failure_detection_is_the_session_and_a_new_controllers_election():
    """KRaft: the broker's session, the quorum's fetch and election timeouts, each from the
    cluster's config or Kafka's default; ZooKeeper: its session timeout; no mode: nothing."""
    assert failure_detection_us(RunSpec(kafka={"mode": "kraft"})) == (9_000 + 2_000 + 1_000) * 1000
    tuned = RunSpec(
        kafka={
            "mode": "kraft-dedicated",
            "broker_config": {"broker.session.timeout.ms": "4000"},
            "controller_config": {"controller.quorum.fetch.timeout.ms": 1000},
        }
    )
    assert failure_detection_us(tuned) == (4_000 + 1_000 + 1_000) * 1000
    zookeeper = {"mode": "zookeeper", "broker_config": {"zookeeper.session.timeout.ms": 6000}}
    assert failure_detection_us(RunSpec(kafka=zookeeper)) == 6_000 * 1000
    assert failure_detection_us(RunSpec(kafka={"mode": "zookeeper"})) == 18_000 * 1000
    # The version's default the run recorded (0.10.2: 6 s, KIP-537), below the cell's config.
    old = {"mode": "zookeeper", "effective_defaults": {"zookeeper.session.timeout.ms": "6000"}}
    assert failure_detection_us(RunSpec(kafka=old)) == 6_000 * 1000
    configured = {**old, "broker_config": {"zookeeper.session.timeout.ms": 9000}}
    assert failure_detection_us(RunSpec(kafka=configured)) == 9_000 * 1000
    assert failure_detection_us(RunSpec()) == failure_detection_us(None) == 0


def test_a_transaction_held_while_its_killed_coordinator_was_not_yet_fenced_is_not_hanging():
    """The run that showed it: a broker killed for 3.5 s (the active controller and the
    transaction coordinator); a partition's last stable offset held from 2 s into the kill to
    12.2 s after it, when the controller, elected anew, fenced the broker on its session's
    expiry. 2 s transactions swept every 0.5 s: past the bound outside the kill's own window,
    within it once the kill acts until the cluster could notice it."""
    spec = RunSpec(
        workload={"transactions": {"timeout_ms": 2000}},
        kafka={
            "mode": "kraft",
            "broker_config": {"transaction.abort.timed.out.transaction.cleanup.interval.ms": 500},
        },
    )
    run = evidence([("kill", 0, int(3.49 * S))], 40 * S)
    seconds = range(2, 13)
    n = len(seconds)
    ends = {2: Ends(np.array([s * S for s in seconds]), np.full(n, 1100), np.full(n, 1047))}
    bound = hanging_bound_us(spec)
    assert bound is not None
    assert hanging(holds(ends, fault_windows(run)), bound) != []
    assert hanging(holds(ends, fault_windows(run, failure_detection_us(spec))), bound) == []


@given(
    st.one_of(
        st.none(),
        st.integers(-5, 10**6),
        st.floats(-5, 1e6, allow_nan=False),
        st.integers(-5, 10**6).map(str),
        st.text(max_size=4),
    ),
    st.floats(1, 1e5),
)
def test_a_settings_milliseconds_are_its_positive_number_else_the_default(value, default):
    """Oracle: a number, or text that reads as one, greater than 0 is itself; anything else
    (missing, 0 or less, not a number) is the default."""
    from harness.rundir.spec import milliseconds

    try:
        number = None if value is None else float(str(value))
    except ValueError:
        number = None
    expected = number if number is not None and number > 0 else default
    assert milliseconds(value, default) == expected


def merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The union of closed spans as disjoint, sorted spans (touching ones joined)."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


samples_st = st.lists(
    st.tuples(
        st.integers(1, 5 * S),
        st.one_of(st.none(), st.sets(st.sampled_from(["kafka-1", "kafka-2", "controller-4"]))),
    ),
    max_size=12,
)


def with_samples(drawn: list[tuple[int, set[str] | None]], final: int) -> tuple[RunEvidence, list]:
    """A run of samples `drawn` apart ((gap, stopped or None)) healed at `final`, and the
    (at, stopped) of the samples that recorded it."""
    at, seen, events = 0, [], []
    for gap, stopped in drawn:
        at += gap
        recorded = None if stopped is None else sorted(stopped)
        events.append({"type": "sample", "ts_us": at, "partitions": [], "stopped": recorded})
        if stopped is not None:
            seen.append((at, stopped))
    events.append({"type": "phase", "phase": "heal", "ts_us": final})
    return RunEvidence.coerce(events), seen


@given(samples_st, st.integers(0, 20 * S))
def test_a_node_seen_stopped_acts_as_a_crash_from_when_it_was_last_seen_up(drawn, detection_us):
    """Oracle, pair by pair of samples that recorded the stopped nodes: a node stopped at
    either of two neighbours was stopped between them (it went down, or came up, somewhere in
    between); one stopped at the first sample, at that sample; one stopped at the last, until
    the final heal. Each node's span reaches detection_us past its start."""
    final = 100 * S
    run, seen = with_samples(drawn, final)
    hosts = {h for _, stopped in seen for h in stopped}
    expected = []
    for host in hosts:
        down = [at for at, stopped in seen if host in stopped]
        pairs = itertools.pairwise(seen)
        expected += [(a, b) for (a, x), (b, y) in pairs if host in x or host in y]
        expected += [(down[0], down[0])] if seen[0][0] == down[0] else []
        expected += [(seen[-1][0], final)] if host in seen[-1][1] else []
    spans = [(lo, hi) for lo, hi in fault_windows(run, 0)]
    assert merged(spans) == merged(expected)
    for lo, hi in fault_windows(run, detection_us):
        assert hi >= lo + detection_us


def test_a_transaction_held_while_the_controllers_had_no_majority_is_not_hanging():
    """The run that showed it (KAFKA-20785's search, seed 2): a broker paused while it started
    shut itself down once unpaused; then the coordinator's leader crashed, leaving one
    controller of three. No successor could be elected until the crashed node was back, so its
    session expired 21 s after the crash, past the crash's own 12 s allowance, and the last
    stable offset held until then. With the stopped node in the samples, not hanging."""
    spec = RunSpec(
        workload={"transactions": {"timeout_ms": 2000}},
        kafka={
            "mode": "kraft",
            "broker_config": {"transaction.abort.timed.out.transaction.cleanup.interval.ms": 500},
        },
    )
    faults = [("lose-unsynced", 110 * S, 114 * S)]
    seconds = range(113, 133)
    n = len(seconds)
    ends = {2: Ends(np.array([s * S for s in seconds]), np.full(n, 1043), np.full(n, 1041))}
    bound, detection = hanging_bound_us(spec), failure_detection_us(spec)
    assert bound is not None
    crash_only = evidence(faults, 170 * S)
    assert hanging(holds(ends, fault_windows(crash_only, detection)), bound) != []
    sampled = [(t, ["kafka-3"] if t >= 109 else []) for t in range(100, 140)]
    samples = [{"type": "sample", "ts_us": t * S, "stopped": down} for t, down in sampled]
    run = RunEvidence.coerce([*crash_only.events.events, *samples])
    assert hanging(holds(ends, fault_windows(run, detection)), bound) == []
