"""The generic nemesis (`faults.generate` with `mode: generic`): a seeded schedule whose every
step is drawn from a fault family, at a target chosen by role, timed around the cell's timeouts.

Each step: an exponential gap after the previous heal (mean `mean_interval_s`; with `overlap`
above 1, after the previous start, while fewer than `overlap` faults act), a family by the
weights among those allowed that the cell can run, a kind and a target role of that family,
a partition of the topic, the kind's params, and a duration, and for a hold a hold length,
drawn within a band (below, at or above: timeouts.BANDS) of one of the cell's timeouts
(timeouts.cell_timeouts). What the cell cannot run is never drawn: every (kind, target) pair
and every drawn step passes the same validation as a step written in the file (rules.py), and
a step that fails it (one that would outlast the workload) is drawn again, a bounded number
of times. The same cell and seed give the same schedule. `swarm` draws each schedule from its
own random half of the menu (swarm testing). A `cascade` draw takes a partition's replicas
down one after another and brings them back in a random order (FoundationDB's swizzle):
failures that lose data compound on one replica set, which independent draws rarely do. Half
the cascades are one incident with one cause (one_cause: the replicas crash, stop, pause or are
cut off alike, or lose power), the others mix causes member by member. A cascade takes at most
one replica's page cache (cache_keeping): for the page caches of several replicas lost within
one outage Kafka documents no outcome, the judge reads any loss there as UNKNOWN, and a draw
that can only end UNKNOWN finds nothing; in a one-cause power loss the last replica down
takes it and the others crash with theirs kept.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Final, TypeVar

from harness.chaos.faults.disk import MAX_DISK_DELAY_MS
from harness.chaos.faults.shape import MAX_DELAY_MS, PEERS
from harness.experiment.families import (
    FAMILIES,
    KIND_TARGETS,
    REQUEST_PATHS,
    ROLE_REQUESTS,
    RequestPath,
)
from harness.experiment.fields import PARTITION_TARGETS
from harness.experiment.model import Experiment, FaultGenerator, FaultStep
from harness.experiment.outages import ONE_CAUSE, cache_keeping, one_cause, takes_page_cache
from harness.experiment.rules import rule_problems
from harness.experiment.soak import MAX_SCHEDULED_FAULTS
from harness.experiment.timeouts import BANDS, Timeout, cell_timeouts
from harness.platform.versions import Mode

__all__ = [
    "ATTEMPTS",
    "REVISION",
    "Menu",
    "beside_menu",
    "bound_faults",
    "cascade_menu",
    "draw_of",
    "drawable_kinds",
    "generic_schedule",
    "step_menu",
    "step_problems",
    "swarm",
]

# The generator's revision, raised whenever the same cell and seed draw another schedule: the
# discovery benchmark keeps searches of different revisions apart (bench/discovery_bench.py).
# 1: a cascade takes at most one replica's page cache. 2: a release before 2.5.0 is timed
# around its own ZooKeeper session and replica lag defaults (6 s and 10 s, not 18 s and 30 s).
# 3: half the cascades are one incident with one cause (one_cause). 4: half a cascade's gaps
# are drawn around a timeout, not inside one (_Draw.gap_s). 5: a request's hold is drawn around
# the timeouts its path races (RequestPath.waits), not any of the cell's.
REVISION: Final = 5
ATTEMPTS: Final = 20  # draws of one step before the schedule ends (none fits what is left)
CONNECTION_SHARES: Final = (25, 50, 100)  # % of the connections a request hold applies to
# The share of the requests family's steps that lose their requests rather than hold them late.
DROP_SHARE: Final = 0.3
# How often a request step holds requests its role receives as that role (ROLE_REQUESTS)
# rather than any of its path's: EndTxn held at a follower mostly holds nothing.
OWN_SHARE: Final = 0.75
# Requests only some workloads send; the others are left out of a cell without them.
TRANSACTIONAL: Final = frozenset({
    "InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn", "TxnOffsetCommit",
    "WriteTxnMarkers",
})  # fmt: skip
GROUP: Final = frozenset(
    {"OffsetCommit", "OffsetFetch", "JoinGroup", "Heartbeat", "LeaveGroup", "SyncGroup"}
)
KRAFT_ONLY: Final = frozenset(
    {"Vote", "BeginQuorumEpoch", "EndQuorumEpoch", "BrokerRegistration", "BrokerHeartbeat"}
)

Menu = dict[str, tuple[tuple[str, str], ...]]  # family -> the (kind, target) pairs it may draw
SWARM_KEEP: Final = 0.5  # the chance a feature stays in a swarm schedule's menu
# Kinds an overlapping schedule draws only while no other fault acts (beside_menu).
SOLO_KINDS: Final = frozenset(
    {"kill-all", "power-loss", "rolling-restart", "reassign", "remove-controller"}
)
T = TypeVar("T")
# The families whose node faults a cascade chains, and the roles it walks a partition by.
CASCADE_SOURCES: Final = ("process", "partition", "crash")
MIN_GAP_S: Final = 0.1  # the shortest gap between a cascade's steps (below, a fetch round)
RACE_GAPS: Final = 0.5  # the share of a cascade's gaps drawn inside a timeout, not around one
CASCADE_ROLES: Final = ("leader", "follower", "successor", "replica")


def step_problems(spec: Experiment, step: FaultStep) -> list[tuple[str, str]]:
    """What validation says of `step` as the one step of the cell's schedule (the file's own
    rules: targets the cell has, faults its quorum, disk and workload allow, an end before the
    workload's)."""
    faults = spec.faults.model_copy(update={"schedule": [step], "generate": None})
    alone = spec.model_copy(update={"faults": faults})
    return [(path, why) for path, why in rule_problems(alone) if path.startswith("faults.")]


@dataclass(frozen=True)
class _Cell:
    """A cell's spec keyed by its JSON, so that its menu is worked out once."""

    key: str
    spec: Experiment = field(compare=False, hash=False)


def step_menu(spec: Experiment) -> Menu:
    """Every family's (kind, target) pairs that validation allows in this cell."""
    return _menu(_Cell(spec.model_dump_json(), spec))


def drawable_kinds(spec: Experiment) -> list[str]:
    """The fault kinds the cell's generator may draw (what must be prepared before it runs)."""
    plan = spec.faults.generate
    if plan is None:
        return []
    if plan.mode == "uniform":
        return list(plan.faults)
    menu = step_menu(spec)
    kinds = [kind for family in plan.allowed_families for kind, _ in menu[family]]
    return list(dict.fromkeys(kinds))


@lru_cache(maxsize=128)
def _menu(cell: _Cell) -> Menu:
    menu: Menu = {}
    for family in FAMILIES:
        pairs = []
        for kind in family.kinds:
            for target in KIND_TARGETS.get(kind, family.targets):
                probe = FaultStep(at_s=0, fault=kind, target=target, duration_s=0.001)
                if not step_problems(cell.spec, probe):
                    pairs.append((kind, target))
        menu[family.name] = tuple(pairs)
    return menu


def _timing_ms(timeouts: Sequence[Timeout], rng: random.Random) -> float:
    """A length drawn within a band (below, at or above) of one of `timeouts`, in ms."""
    timeout = rng.choice(timeouts)
    low, high = rng.choice(BANDS).around(timeout.ms)
    return rng.uniform(low, high)


def _paths(spec: Experiment) -> list[tuple[RequestPath, tuple[str, ...]]]:
    """The request paths of this cell, each with the requests its workload and mode send."""
    workload = spec.workload
    txn = workload.transactions
    groups = bool(workload.consumers) or bool(txn and (txn.send_offsets or txn.reads))
    kraft = spec.kafka.effective_mode() is not Mode.ZOOKEEPER
    paths = []
    for path in REQUEST_PATHS:
        requests = tuple(
            r
            for r in path.requests
            if (txn is not None or r not in TRANSACTIONAL)
            and (groups or r not in GROUP)
            and (kraft or r not in KRAFT_ONLY)
        )
        if requests:
            paths.append((path, requests))
    return paths


@dataclass(frozen=True)
class _Draw:
    """What one step's draw needs: the cell, its menu, timeouts and request paths."""

    spec: Experiment
    menu: Menu
    timeouts: tuple[Timeout, ...]
    paths: list[tuple[RequestPath, tuple[str, ...]]]

    def hold_ms(self, rng: random.Random, cap: float, races: Sequence[str] = ()) -> int:
        """A hold length around the cell's timeouts, whole ms, at most `cap`: those named in
        `races` (a request path's waits), all of them when it names none the cell has."""
        named = tuple(t for t in self.timeouts if t.name in races) or self.timeouts
        return int(min(_timing_ms(named, rng), cap))

    def params(self, kind: str, rng: random.Random) -> dict[str, Any]:
        """The params of a `kind` step of the packets, partition, disk or membership family."""
        if kind == "partition":
            return {"mode": rng.choice(("from-brokers", "from-quorum", "full"))}
        if kind == "delay":
            return {"to": rng.choice(PEERS), "delay_ms": self.hold_ms(rng, MAX_DELAY_MS)}
        if kind == "reorder":
            return {"percent": rng.randint(10, 50), "delay_ms": self.hold_ms(rng, MAX_DELAY_MS)}
        if kind == "duplicate":
            return {"percent": rng.randint(5, 50), "to": rng.choice(PEERS)}
        if kind == "loss":
            return {"percent": rng.randint(10, 100), "to": rng.choice(PEERS)}
        if kind == "slow":
            return {"rate_kbit": rng.choice((64, 256, 1024))}
        if kind == "slow-disk":
            fsync_ms = self.hold_ms(rng, MAX_DISK_DELAY_MS)
            return {"fsync_ms": fsync_ms, "write_ms": fsync_ms // 10}
        if kind == "reassign":
            # A move needs a broker without a replica: none when every broker holds one.
            spare = self.spec.kafka.brokers > self.spec.topic.replication_factor
            return {"mode": rng.choice(("drop", "move") if spare else ("drop",))}
        return {}

    def requests_step(self, rng: random.Random) -> tuple[str, str, dict[str, Any]] | None:
        """(kind, target, params) of a request hold or drop: a path, a role it arrives at, the
        requests (in OWN_SHARE of the steps among those the role receives as that role); a
        drop loses them (with the rest of their connection) instead of holding."""
        targets = {target for _, target in self.menu["requests"]}
        paths = [(p, r) for p, r in self.paths if targets & set(p.targets)]
        if not paths:
            return None
        path, requests = rng.choice(paths)
        target = rng.choice(sorted(targets & set(path.targets)))
        own = [r for r in ROLE_REQUESTS.get((path.name, target), ()) if r in requests]
        pool = own if own and rng.random() < OWN_SHARE else list(requests)
        chosen = rng.sample(pool, min(len(pool), rng.randint(1, 2)))
        params = {
            "direction": "in",
            "from": [rng.choice(path.senders)],
            "requests": chosen,
            "connections_percent": rng.choice(CONNECTION_SHARES),
        }
        if rng.random() < DROP_SHARE:
            return "drop-requests", target, params
        delay_ms = self.hold_ms(rng, MAX_DELAY_MS, path.waits)
        return "delay", target, {**params, "delay_ms": delay_ms}

    def draw(self, family: str, at_s: float, rng: random.Random) -> list[FaultStep]:
        """The steps one draw of `family` makes from `at_s`: a cascade's, or one step ([]
        when the family has no draw here)."""
        if family == "cascade":
            return self.cascade(at_s, rng)
        step = self.step(family, at_s, rng)
        return [] if step is None else [step]

    def gap_s(self, rng: random.Random) -> float:
        """A gap between a cascade's steps, s. With chance RACE_GAPS inside one of the cell's
        timeouts, log-uniform from 0.1 s up to it, so each scale comes as often (within a
        fetch round, a few seconds, most of a session): the races. Otherwise around one of
        them (below, at or above: timeouts.BANDS), so that what the cluster detects by then
        (a session expired, an ISR shrunk to the replicas left) comes before the next step
        as often as not."""
        if rng.random() >= RACE_GAPS:
            return _timing_ms(self.timeouts, rng) / 1000
        top = max(rng.choice(self.timeouts).ms / 1000, MIN_GAP_S)
        return math.exp(rng.uniform(math.log(MIN_GAP_S), math.log(top)))

    def cascade(self, at_s: float, rng: random.Random) -> list[FaultStep]:
        """Two to all of one partition's replicas down one after another (its followers then
        its leader, or its leader, its successor, then any replica left), each by a node fault
        the cascade's menu allows on that role, at most one of them taking its page cache
        (cache_keeping), at gaps drawn within or around the cell's timeouts (gap_s); all held a
        time drawn around the timeouts after the last goes down, then brought back in a random
        order at such gaps.
        With chance ONE_CAUSE its members' kinds are one incident's (one_cause), else each
        member's own. [] when the topic has one replica or a role has no kind."""
        replicas = self.spec.topic.replication_factor
        if replicas < 2:
            return []
        n = rng.randint(2, replicas)
        if rng.random() < 0.5:
            roles = ["follower"] * (n - 1) + ["leader"]
        else:
            # After the successor, whoever of the replicas is left: the leader once one is
            # elected, else a follower (`follower` would name only held nodes then).
            roles = ["leader", "successor"] + ["replica"] * (n - 2)
        kinds = {role: [k for k, t in self.menu["cascade"] if t == role] for role in roles}
        if not all(kinds.values()):
            return []
        starts = [at_s]
        for _ in roles[1:]:
            starts.append(starts[-1] + self.gap_s(rng))
        ends = [starts[-1] + _timing_ms(self.timeouts, rng) / 1000]
        for _ in roles[1:]:
            ends.append(ends[-1] + self.gap_s(rng))
        rng.shuffle(ends)
        partition = rng.randrange(self.spec.topic.partitions)
        menus = [kinds[role] for role in roles]
        cause = one_cause(menus, rng) if rng.random() < ONE_CAUSE else None
        steps: list[FaultStep] = []
        for i, (role, start, end) in enumerate(zip(roles, starts, ends, strict=True)):
            taken = any(takes_page_cache(step.fault) for step in steps)
            kind = cause[i] if cause else rng.choice(cache_keeping(menus[i]) if taken else menus[i])
            steps.append(
                FaultStep(
                    at_s=round(start, 3),
                    fault=kind,
                    target=role,
                    partition=partition,
                    duration_s=max(round(end - start, 3), 0.001),
                    params=self.params(kind, rng),
                )
            )
        return steps

    def step(self, family: str, at_s: float, rng: random.Random) -> FaultStep | None:
        """One step of `family` starting at `at_s`; None when the family has no draw here."""
        if family == "requests":
            drawn = self.requests_step(rng)
            if drawn is None:
                return None
            kind, target, params = drawn
        else:
            kind, target = rng.choice(self.menu[family])
            params = self.params(kind, rng)
        partitions = self.spec.topic.partitions
        partition = rng.randrange(partitions) if target in PARTITION_TARGETS else 0
        duration_s = max(round(_timing_ms(self.timeouts, rng) / 1000, 3), 0.001)
        if family == "requests" and kind == "delay":
            # The shaper lets every held request go when its fault ends: the drawn duration is
            # the window a request may arrive in, and each then stays held its whole hold.
            duration_s = round(duration_s + params["delay_ms"] / 1000, 3)
        return FaultStep(
            at_s=at_s,
            fault=kind,
            target=target,
            partition=partition,
            duration_s=duration_s,
            params=params,
        )


def _half(items: Sequence[T], rng: random.Random) -> list[T]:
    """Each of `items` kept with probability 1/2, at least one (swarm testing's coin)."""
    kept = [item for item in items if rng.random() < SWARM_KEEP]
    return kept or [rng.choice(items)]


def swarm(
    families: Sequence[str],
    menu: Menu,
    paths: Sequence[tuple[RequestPath, tuple[str, ...]]],
    rng: random.Random,
) -> tuple[list[str], Menu, list[tuple[RequestPath, tuple[str, ...]]]]:
    """One schedule's swarm (Groce et al., swarm testing): a random half of the families,
    of each kept family's (kind, target) pairs and of each request path's API keys, at least
    one of each. A schedule that leaves most features out draws the rest often, so pairings
    a whole menu makes rare (EndTxn held at the transaction coordinator; two kills in a row)
    come within minutes in some schedules, while others never draw them."""
    kept_families = _half(families, rng)
    kept_menu = {
        family: tuple(_half(pairs, rng)) if family in kept_families else ()
        for family, pairs in menu.items()
        if pairs
    }
    kept_paths = [(path, tuple(_half(requests, rng))) for path, requests in paths]
    return kept_families, {**menu, **kept_menu}, kept_paths


def generic_schedule(
    spec: Experiment, plan: FaultGenerator, horizon_s: float, rng: random.Random
) -> list[FaultStep]:
    """The generic nemesis' steps for the cell `spec` within `horizon_s`, drawn from `rng`:
    each draw after an exponential gap from the previous heal (with `overlap`, from the
    previous start while fewer than `overlap` act: bound_faults), from the allowed families
    the cell can run (by their weights), each step valid by the file's own rules. A schedule
    whose faults may act at once (overlap, or a cascade) binds each and heals it by name."""
    menu = step_menu(spec)
    families = list(plan.allowed_families)
    menu = {**menu, "cascade": cascade_menu(menu, families)}
    families = [f for f in families if menu[f] and plan.weights.get(f, 1) > 0]
    if not families:
        return []
    paths = _paths(spec)
    if plan.swarm:
        families, menu, paths = swarm(families, menu, paths, rng)
        menu = {**menu, "cascade": cascade_menu(menu, families) if "cascade" in families else ()}
    timeouts = cell_timeouts(spec)
    draw = _Draw(spec, menu, timeouts, paths)
    # Beside a fault in force: no step that needs the whole cluster, no cascade (beside_menu).
    beside = _Draw(spec, beside_menu(menu), timeouts, paths)
    mean_gap_s = plan.mean_gap_s
    draws: list[list[FaultStep]] = []
    clock = 0.0  # one at a time: the previous heal; overlapping: the previous start
    in_force: list[float] = []  # overlapping: the ends of the faults drawn so far
    while sum(len(d) for d in draws) < MAX_SCHEDULED_FAULTS:
        at_s = round(clock + rng.expovariate(1.0 / mean_gap_s), 3)
        if plan.overlap > 1:
            at_s, in_force = _room(at_s, in_force, plan.overlap, rng, mean_gap_s)
        if at_s >= horizon_s:
            break
        drawing = beside if plan.overlap > 1 and in_force else draw
        choices = [f for f in families if drawing.menu[f]]
        if not choices:  # nothing may act beside what does: try again later
            clock = at_s
            continue
        weights = [plan.weights.get(f, 1) for f in choices]
        drawn = next(
            (
                d
                for _ in range(ATTEMPTS)
                if (d := drawing.draw(rng.choices(choices, weights)[0], at_s, rng))
                and not any(step_problems(spec, s) for s in d)
            ),
            None,
        )
        if drawn is None:
            break
        draws.append(drawn)
        ends = [s.end_s or 0.0 for s in drawn]
        in_force += ends
        clock = (drawn[-1].at_s or 0.0) if plan.overlap > 1 else max(ends)
    if plan.overlap == 1 and all(len(d) == 1 for d in draws):
        return [step for d in draws for step in d]
    return bound_faults(draws)


def cascade_menu(menu: Menu, families: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """The (kind, target) pairs a cascade chains: the node faults of the allowed families
    among CASCADE_SOURCES on a partition's roles (none that needs the whole cluster); a
    `replica` takes the kinds a follower may."""
    pairs = [
        (kind, target)
        for family in CASCADE_SOURCES
        if family in families
        for kind, target in menu.get(family, ())
        if target in CASCADE_ROLES and kind not in SOLO_KINDS
    ]
    return tuple(pairs + [(kind, "replica") for kind, target in pairs if target == "follower"])


def beside_menu(menu: Menu) -> Menu:
    """`menu` without what needs the whole cluster to itself (SOLO_KINDS): a fault on every
    node, or a membership change that completes only on a healthy cluster (a reassignment
    waits for its new replicas to catch up, a rolling restart for each node's return)."""
    return {
        family: () if family == "cascade" else tuple(p for p in pairs if p[0] not in SOLO_KINDS)
        for family, pairs in menu.items()
    }


def _room(
    at_s: float, in_force: list[float], overlap: int, rng: random.Random, mean_gap_s: float
) -> tuple[float, list[float]]:
    """The start at or after `at_s` when fewer than `overlap` of the faults ending at
    `in_force` still act (when `overlap` act at `at_s`: a gap drawn after the heal that
    leaves overlap - 1, as after any heal: a node a heal restarts is not hit as it comes
    back), and those that then still act."""
    acting = sorted(end for end in in_force if end > at_s)
    while len(acting) >= overlap:
        healed = acting[len(acting) - overlap]
        at_s = round(healed + rng.expovariate(1.0 / mean_gap_s), 3)
        acting = [end for end in acting if end > at_s]
    return at_s, acting


def draw_of(name: str | None) -> str | None:
    """The draw a fault bound as `name` came from when it was one of a cascade's (bound_faults
    names those `c<draw>_<j>`): 'c<draw>'; None for any other name."""
    head, _, member = (name or "").partition("_")
    return head if head[:1] == "c" and head[1:].isdigit() and member.isdigit() else None


def bound_faults(draws: Sequence[Sequence[FaultStep]]) -> list[FaultStep]:
    """Drawn steps (each healed after its duration) as a schedule whose faults may be in
    force at once: each left open under a name, `g<i>` for the i-th draw's one step and
    `c<i>_<j>` for its j-th when the draw was a cascade, and ended by a heal step at its
    planned end; every step in time order (a heal before a start at the same time)."""
    timed: list[tuple[float, int, FaultStep]] = []
    for index, drawn in enumerate(draws):
        for j, step in enumerate(drawn):
            name = f"g{index}" if len(drawn) == 1 else f"c{index}_{j}"
            opened = step.model_copy(update={"duration_s": None, "as_": name})
            end_s = round(step.end_s or 0.0, 3)
            heal = FaultStep(at_s=end_s, fault="heal", target=f"@{name}")
            timed += [(step.at_s or 0.0, 1, opened), (end_s, 0, heal)]
    return [step for _, _, step in sorted(timed, key=lambda t: (t[0], t[1]))]
