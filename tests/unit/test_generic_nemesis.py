"""The generic nemesis (faults.generate, mode: generic): seeded, valid for its cell by the file's
own validation, drawn only from the allowed families, timed within the bands around the cell's
timeouts, and weighted as asked. Checked against oracles written here, on generated cells."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.chaos.faults import FAULT_TYPES
from harness.chaos.faults.shape import MAX_DELAY_MS
from harness.experiment.families import DEFAULT_FAMILIES, FAMILIES, FAMILY_NAMES, family_of
from harness.experiment.generic import SOLO_KINDS
from harness.experiment.load import parse_experiment
from harness.experiment.matrix import expand
from harness.experiment.model import FaultStep
from harness.experiment.plan import schedule_for
from harness.experiment.problems import SpecError
from harness.experiment.timeouts import CONSUMER_SESSION_TIMEOUT_MS, cell_timeouts

# --- the oracle's own reading of a cell's timeouts (ms), from the document -------------------


def timeouts_oracle(doc: dict[str, Any]) -> list[float]:
    """Every timeout a step's timing may be drawn around, read from the document with Kafka's
    (and the harness's) defaults."""
    return list(named_timeouts_oracle(doc).values())


def named_timeouts_oracle(doc: dict[str, Any]) -> dict[str, float]:
    """The same, by setting name (a 0, no limit, left out)."""
    producer = doc.get("producer", {})
    broker = doc.get("kafka", {}).get("broker_config", {})
    workload = doc["workload"]
    found = {
        "request.timeout.ms": producer.get("request_timeout_ms", 5000),
        "message.timeout.ms": producer.get("message_timeout_ms", 30000),
        "socket.timeout.ms": 60000,
        "replica.lag.time.max.ms": float(broker.get("replica.lag.time.max.ms", 30000)),
    }
    if doc.get("kafka", {}).get("mode") == "zookeeper":
        found["zookeeper.session.timeout.ms"] = 18000
    else:
        found["broker.session.timeout.ms"] = 9000
        found["controller.quorum.election.timeout.ms"] = 1000
        found["controller.quorum.fetch.timeout.ms"] = 2000
    if workload.get("transactions") is not None:
        found["transaction.timeout.ms"] = workload["transactions"].get("timeout_ms", 30000)
    if workload.get("consumers"):
        found["session.timeout.ms"] = workload.get("consumer_session_timeout_ms") or 6000
        found["offsets.commit.timeout.ms"] = float(broker.get("offsets.commit.timeout.ms", 5000))
    return {name: ms for name, ms in found.items() if ms > 0}


def in_some_band(value_ms: float, timeouts: list[float], slack_ms: float = 1.0) -> bool:
    return any(0.5 * t - slack_ms <= value_ms <= 2.0 * t + slack_ms for t in timeouts)


# --- generated cells ---------------------------------------------------------------------------


@st.composite
def cells(draw: st.DrawFn) -> dict[str, Any]:
    mode = draw(st.sampled_from(["kraft", "kraft-dedicated", "zookeeper"]))
    kafka: dict[str, Any] = {"mode": mode, "version": "3.9.0" if mode == "zookeeper" else "4.3.1"}
    if draw(st.booleans()):
        kafka["broker_config"] = {"replica.lag.time.max.ms": draw(st.integers(2000, 40000))}
    rf = draw(st.integers(1, 3))
    workload: dict[str, Any] = {"rate": 100, "duration_s": draw(st.sampled_from([30, 120, 600]))}
    transactional = draw(st.booleans())
    message_timeout_ms = 60000
    if transactional:
        timeout_ms = draw(st.integers(5000, 60000))
        workload["transactions"] = {"send_offsets": draw(st.booleans()), "timeout_ms": timeout_ms}
        message_timeout_ms = timeout_ms  # librdkafka: at most the transaction timeout
    elif draw(st.booleans()):
        workload["consumers"] = 2
        if draw(st.booleans()):  # a group whose dead members the coordinator keeps long
            workload["consumer_session_timeout_ms"] = draw(st.integers(6000, 300_000))
        if draw(st.booleans()):
            config = kafka.setdefault("broker_config", {})
            config["offsets.commit.timeout.ms"] = draw(st.integers(1000, 120_000))
    families = draw(
        st.none() | st.lists(st.sampled_from(FAMILY_NAMES), min_size=1, max_size=4, unique=True)
    )
    generate: dict[str, Any] = {
        "mode": "generic",
        "mean_interval_s": draw(st.sampled_from([1, 5, 20])),
    }
    if families is not None:
        generate["families"] = families
    if draw(st.booleans()):
        generate["swarm"] = True
    overlap = draw(st.sampled_from([1, 1, 2, 3]))
    if overlap > 1:
        generate["overlap"] = overlap
    return {
        "name": "generic",
        "kafka": kafka,
        "topic": {
            "partitions": draw(st.integers(1, 4)),
            "replication_factor": rf,
            "min_insync_replicas": 1,
        },
        "producer": {
            "request_timeout_ms": draw(st.integers(1000, 30000)),
            "message_timeout_ms": message_timeout_ms,
        },
        "workload": workload,
        "faults": {"generate": generate, "after_workload_s": draw(st.sampled_from([0, 0, 20]))},
    }


def generic_doc(
    duration_s: float, mean_interval_s: float, families: list[str], **generate: Any
) -> dict[str, Any]:
    """A one-cell file of the defaults' cluster under the generic nemesis."""
    drawn = {"mode": "generic", "mean_interval_s": mean_interval_s, "families": families}
    return {
        "name": "generic",
        "workload": {"rate": 100, "duration_s": duration_s},
        "faults": {"generate": {**drawn, **generate}},
    }


def schedule_of(doc: dict[str, Any], seed: int) -> list[FaultStep]:
    (cell,) = expand(parse_experiment(doc))
    return schedule_for(cell, seed)


SLOW = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SLOW
@given(cells())
def test_the_cells_timeouts_are_the_ones_its_file_sets_or_kafkas_defaults(
    doc: dict[str, Any],
) -> None:
    (cell,) = expand(parse_experiment(doc))
    assert sorted(t.ms for t in cell_timeouts(cell.spec)) == sorted(timeouts_oracle(doc))


@SLOW
@given(cells(), st.integers(0, 2**32))
def test_the_same_seed_draws_the_same_schedule(doc: dict[str, Any], seed: int) -> None:
    assert schedule_of(doc, seed) == schedule_of(doc, seed)


@SLOW
@given(cells(), st.integers(0, 2**32))
def test_every_schedule_is_valid_as_a_written_one(doc: dict[str, Any], seed: int) -> None:
    """The drawn steps, written into the file as its explicit schedule, pass validation."""
    steps = schedule_of(doc, seed)
    schedule = [s.model_dump(by_alias=True) for s in steps]
    written = {**doc, "faults": {**doc["faults"], "generate": None, "schedule": schedule}}
    expand(parse_experiment(written))  # raises SpecError naming the step otherwise


@SLOW
@given(cells(), st.integers(0, 2**32))
def test_steps_come_from_allowed_families_timed_around_the_cells_timeouts(
    doc: dict[str, Any], seed: int
) -> None:
    allowed = set(doc["faults"]["generate"].get("families") or DEFAULT_FAMILIES)
    overlap = doc["faults"]["generate"].get("overlap", 1)
    timeouts = timeouts_oracle(doc)
    horizon = doc["workload"]["duration_s"] + doc["faults"]["after_workload_s"]
    ends: list[float] = []
    for step, at_s, end_s in faults_of(schedule_of(doc, seed), overlap):
        params = step.params.model_dump(by_alias=True)
        assert family_of(step.fault, params) in allowed
        assert end_s < horizon
        ends = [end for end in ends if end > at_s]  # the faults still in force at its start
        if (step.as_ or "").startswith("c"):  # a cascade's: timed as tests/unit/test_cascade.py
            assert "cascade" in allowed
            ends.append(end_s)
            continue
        # A request hold's fault lasts its window and then its hold, so that a request arriving
        # at the window's end is still held its whole hold (the shaper lets all go at the end).
        window_ms = (end_s - at_s) * 1000
        if step.fault == "delay" and family_of(step.fault, params) == "requests":
            window_ms -= params["delay_ms"]
        assert in_some_band(window_ms, timeouts, slack_ms=2.0), step
        assert len(ends) < overlap, (at_s, ends)  # one at a time, or at most `overlap`
        assert not (ends and step.fault in SOLO_KINDS), step  # the whole cluster, alone
        ends.append(end_s)
        hold = params.get("fsync_ms") if step.fault == "slow-disk" else params.get("delay_ms")
        if step.fault in ("delay", "reorder", "slow-disk"):
            assert hold == MAX_DELAY_MS or in_some_band(hold, timeouts), step


def faults_of(steps: list[FaultStep], overlap: int) -> list[tuple[FaultStep, float, float]]:
    """(step, start, end) of each drawn fault: a step healed after its duration when one at a
    time; a bound step and the heal step naming it when overlapping or cascading (every bound
    fault healed once, the steps in time order)."""
    starts = [s.at_s for s in steps]
    assert all(a is not None for a in starts) and starts == sorted(starts)  # type: ignore[type-var]
    if overlap == 1 and not any(s.as_ for s in steps):  # bound only beside a cascade
        assert all(s.duration_s is not None for s in steps)
        return [(s, s.at_s or 0.0, (s.at_s or 0.0) + (s.duration_s or 0.0)) for s in steps]
    heals = {s.target[1:]: s.at_s or 0.0 for s in steps if s.fault == "heal"}
    opened = [s for s in steps if s.fault != "heal"]
    assert sorted(heals) == sorted(s.as_ or "" for s in opened)
    assert all(s.duration_s is None for s in opened)
    return [(s, s.at_s or 0.0, heals[s.as_ or ""]) for s in opened]


def test_a_family_the_cell_cannot_run_is_never_drawn() -> None:
    """Without transactions or consumers: no coordinator target, no consumer fault; with a
    static quorum, no controller removal."""
    doc = {
        "name": "plain",
        "workload": {"rate": 100, "duration_s": 3000},
        "faults": {"generate": {"mode": "generic", "mean_interval_s": 1}},
    }
    steps = [s for seed in range(3) for s in schedule_of(doc, seed)]
    assert len(steps) > 100
    assert not {s.target for s in steps} & {"txn-coordinator", "group-coordinator", "consumer"}
    assert not {s.fault for s in steps} & {"remove-controller", "truncate", "flip"}
    requested = {r for s in steps for r in getattr(s.params, "requests", [])}
    assert "EndTxn" not in requested and "Produce" in requested


@pytest.mark.parametrize("seed", [1, 2])
def test_families_are_drawn_in_proportion_to_their_weights(seed: int) -> None:
    doc = generic_doc(40000, 0.5, ["process", "packets"], weights={"process": 3, "packets": 1})
    drawn = Counter(family_of(s.fault, s.params.model_dump()) for s in schedule_of(doc, seed))
    total = sum(drawn.values())
    share = drawn["process"] / total
    # Four standard deviations of a binomial share around 3/4.
    assert total > 500 and abs(share - 0.75) < 4 * math.sqrt(0.75 * 0.25 / total), drawn
    assert set(drawn) == {"process", "packets"}


def test_every_fault_kind_is_in_a_family_and_only_delay_in_two() -> None:
    """delay is a request hold (requests family) with `requests`, else a packet delay."""
    kinds = Counter(kind for family in FAMILIES for kind in family.kinds)
    assert set(kinds) == set(FAULT_TYPES)
    assert {kind for kind, families in kinds.items() if families > 1} == {"delay"}
    assert family_of("delay", {"requests": ["EndTxn"]}) == "requests"
    assert family_of("delay", {"requests": []}) == "packets"


def test_the_consumer_session_timeout_is_the_consumer_groups() -> None:
    from harness.workload.consumer_group.librdkafka import SESSION_TIMEOUT_MS

    assert CONSUMER_SESSION_TIMEOUT_MS == SESSION_TIMEOUT_MS


@pytest.mark.parametrize(
    ("generate", "said"),
    [
        ({"mode": "generic", "mean_interval_s": 5, "faults": ["kill"]}, "faults: is not used"),
        ({"mode": "generic", "duty_cycle": 0.5}, "duty_cycle: mode generic"),
        ({"mode": "generic"}, "mean_interval_s: required"),
        ({"mode": "generic", "mean_interval_s": 5, "families": ["nope"]}, "unknown fault family"),
        (
            {
                "mean_interval_s": 5,
                "families": ["process"],
                "faults": ["kill"],
                "targets": ["leader"],
                "duration_s": [1, 2],
            },
            "families: is not used by mode: uniform",
        ),
        ({"mean_interval_s": 5, "targets": ["leader"], "duration_s": [1, 2]}, "faults: required"),
        (
            {
                "mean_interval_s": 5,
                "swarm": True,
                "faults": ["kill"],
                "targets": ["leader"],
                "duration_s": [1, 2],
            },
            "swarm: is not used by mode: uniform",
        ),
        (
            {
                "mode": "generic",
                "mean_interval_s": 5,
                "weights": {"process": 0},
                "families": ["process"],
            },
            "every allowed family weighs 0",
        ),
    ],
)
def test_each_mode_says_what_it_needs_and_refuses(generate: dict[str, Any], said: str) -> None:
    doc = {
        "name": "m",
        "workload": {"rate": 10, "duration_s": 60},
        "faults": {"generate": generate},
    }
    with pytest.raises(SpecError) as caught:
        expand(parse_experiment(doc))
    assert said in str(caught.value)


@SLOW
@given(cells(), st.integers(0, 2**32))
def test_a_reassign_moves_replicas_only_where_a_broker_holds_none(
    doc: dict[str, Any], seed: int
) -> None:
    """A move needs a broker without a replica of the partition (the fault refuses it at
    injection otherwise), so with every broker holding one only drops are drawn."""
    brokers = doc["kafka"].get("brokers", 3)
    for step in schedule_of(doc, seed):
        if step.fault == "reassign" and getattr(step.params, "mode", None) == "move":
            assert brokers > doc["topic"]["replication_factor"], step


def test_a_request_step_mostly_holds_requests_its_role_receives() -> None:
    """At the transaction coordinator, from the clients, most steps hold its own requests
    (the oracle: the four transactional ones), the rest any the path carries."""
    own = {"InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn"}
    doc = {
        "name": "requests",
        "workload": {"rate": 100, "duration_s": 600, "transactions": {"timeout_ms": 10000}},
        "producer": {"message_timeout_ms": 10000},
        "faults": {"generate": {"mode": "generic", "mean_interval_s": 1, "families": ["requests"]}},
    }
    held = []
    for seed in range(30):
        for step in schedule_of(doc, seed):
            params = step.params.model_dump(by_alias=True)
            if step.target == "txn-coordinator" and params.get("from") == ["clients"]:
                held.append(set(params["requests"]))
    inside = sum(requests <= own for requests in held)
    assert len(held) >= 40 and inside / len(held) >= 0.6, (inside, len(held))
    assert any("EndTxn" in requests for requests in held)


@st.composite
def menus(draw: st.DrawFn) -> tuple[list[str], dict[str, tuple[tuple[str, str], ...]], list]:
    """Allowed families, a menu (some families with nothing to draw) and request paths."""
    from harness.experiment.families import REQUEST_PATHS

    menu = {
        family.name: tuple(
            draw(st.lists(st.sampled_from([(k, "leader") for k in family.kinds]), unique=True))
        )
        for family in FAMILIES
        if family.kinds  # a cascade's menu is other families' (test_cascade.py)
    }
    families = [f for f in draw(st.permutations(list(menu))) if menu[f]][: draw(st.integers(1, 8))]
    paths = [
        (path, path.requests[: draw(st.integers(1, len(path.requests)))]) for path in REQUEST_PATHS
    ]
    return families, menu, paths


@given(menus(), st.integers(0, 2**32))
def test_a_swarm_keeps_a_nonempty_part_of_each_feature(case: tuple, seed: int) -> None:
    import random

    from harness.experiment.generic import swarm

    families, menu, paths = case
    if not families:
        return
    kept, kept_menu, kept_paths = swarm(families, menu, paths, random.Random(seed))
    assert kept and set(kept) <= set(families) and len(set(kept)) == len(kept)
    for family, pairs in kept_menu.items():
        if family in kept:
            assert pairs and set(pairs) <= set(menu[family])
        elif family in families:
            assert pairs == ()
    for (path, requests), (kept_path, kept_requests) in zip(paths, kept_paths, strict=True):
        assert kept_path is path and kept_requests and set(kept_requests) <= set(requests)


def test_a_swarm_keeps_each_feature_about_half_the_time() -> None:
    import random

    from harness.experiment.generic import swarm

    families = list(FAMILY_NAMES)
    menu = {f.name: tuple((k, "leader") for k in f.kinds) for f in FAMILIES}
    rng = random.Random(7)
    kept = Counter(f for _ in range(2000) for f in swarm(families, menu, [], rng)[0])
    # The oracle: a coin per family (a swarm left empty keeps one more: under 1 % here).
    for family in families:
        assert 0.45 < kept[family] / 2000 < 0.56, (family, kept[family])


def test_a_generated_schedule_acts_on_after_the_workload_when_the_file_says_so() -> None:
    doc = {
        "name": "after",
        "workload": {"rate": 10, "duration_s": 30},
        "faults": {
            "generate": {"mode": "generic", "mean_interval_s": 2, "families": ["process"]},
            "after_workload_s": 60,
        },
    }
    ends = [s.end_s or 0 for seed in range(20) for s in schedule_of(doc, seed)]
    assert max(ends) > 30 and max(ends) < 90  # past the producers, within the window
    doc["faults"]["after_workload_s"] = 0
    assert all((s.end_s or 0) < 30 for seed in range(20) for s in schedule_of(doc, seed))


@pytest.mark.parametrize(
    ("version", "drawn"), [("0.10.2.2", False), ("2.3.1", False), ("2.4.0", True)]
)
def test_reassign_needs_the_reassignment_api(version: str, drawn: bool) -> None:
    """AlterPartitionReassignments came with 2.4 (KIP-455): older releases refuse the fault
    in a file, and the nemesis never draws it for them."""
    from harness.experiment.generic import step_menu

    doc = {
        "name": "r",
        "kafka": {"version": version, "mode": "zookeeper"},
        "workload": {"rate": 10, "duration_s": 60},
        "faults": {"generate": {"mode": "generic", "mean_interval_s": 5}},
    }
    (cell,) = expand(parse_experiment(doc))
    assert any(kind == "reassign" for kind, _ in step_menu(cell.spec)["membership"]) is drawn
    written = {**doc, "faults": {"schedule": [
        {"at_s": 1, "fault": "reassign", "target": "leader", "duration_s": 5}
    ]}}  # fmt: skip
    if drawn:
        expand(parse_experiment(written))
    else:
        with pytest.raises(SpecError, match="reassignment API"):
            expand(parse_experiment(written))


# What a request held on each path races, as the oracle reads the path from the step: sent by
# clients; sent to a controller; else between brokers.
RACES = {
    "clients": ("request", "socket", "message", "transaction", "session.timeout"),
    "controller": ("broker.session", "controller.quorum", "zookeeper", "replica.lag"),
    "brokers": ("replica.lag", "offsets.commit", "transaction"),
}


@SLOW
@given(cells(), st.integers(0, 2**32))
def test_a_held_request_is_held_around_the_timeouts_its_path_races(
    doc: dict[str, Any], seed: int
) -> None:
    """Oracle: a request's hold lies in a band (0.5 to 2 times, or the cap) of one of the
    cell's timeouts its path races (RACES, by setting-name prefix); any of the cell's when it
    has none of those."""
    doc["faults"]["generate"]["families"] = ["requests"]
    named = named_timeouts_oracle(doc)
    for step in schedule_of(doc, seed):
        params = step.params.model_dump(by_alias=True)
        if step.fault != "delay" or family_of(step.fault, params) != "requests":
            continue
        if params["from"] == ["clients"]:
            path = "clients"
        else:
            path = "controller" if step.target.startswith("controller") else "brokers"
        raced = [ms for name, ms in named.items() if name.startswith(RACES[path])]
        hold = params["delay_ms"]
        assert hold == MAX_DELAY_MS or in_some_band(hold, raced or list(named.values())), step


def test_every_timeout_a_path_races_is_one_a_cell_can_have() -> None:
    """A name in RequestPath.waits that no cell's timeouts carry would never be drawn around."""
    from harness.experiment.families import REQUEST_PATHS

    busy = {"transactions": {"timeout_ms": 60000}, "consumers": 2}
    names = set()
    for mode in ("kraft", "zookeeper"):
        doc = {**generic_doc(60, 10, ["requests"]), "kafka": {"mode": mode}}
        doc["kafka"]["version"] = "3.9.0" if mode == "zookeeper" else "4.3.1"
        doc["workload"] = {**doc["workload"], **busy}
        (cell,) = expand(parse_experiment(doc))
        names |= {t.name for t in cell_timeouts(cell.spec)}
    assert {name for path in REQUEST_PATHS for name in path.waits} <= names
