"""One outage of a partition's replicas, as a cascade of the generic nemesis draws it: the
fault kind each replica suffers. The page caches of several replicas lost within one outage
have no outcome Kafka documents (the judge reads any loss there as UNKNOWN, and a draw that can
only end UNKNOWN finds nothing), so an outage takes at most one replica's (cache_keeping); in a
power loss the last replica down takes it and the others crash with theirs kept
(crash_keeping)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Final

from harness.chaos.faults import FAULT_TYPES
from harness.rundir.fault_classes import ClassKind

__all__ = ["ONE_CAUSE", "cache_keeping", "crash_keeping", "one_cause", "takes_page_cache"]

# The chance a cascade is one incident with one cause (one_cause) rather than a mix.
ONE_CAUSE: Final = 0.5


def _harms(kind: str, harm: ClassKind) -> bool:
    """Whether the fault type `kind` (in the registry) belongs to the class kind `harm`."""
    fault = FAULT_TYPES.get(kind)
    return fault is not None and harm in fault.class_kinds


def takes_page_cache(kind: str) -> bool:
    """Whether a fault of `kind` undoes its node's unflushed writes (its class is a power
    loss: lose-unsynced, torn-write, a node's power loss, a log's tail cut)."""
    return _harms(kind, ClassKind.POWER_LOSS)


def cache_keeping(kinds: Sequence[str]) -> list[str]:
    """`kinds` without those that take the page cache; all of `kinds` when every one does
    (a menu of crash faults alone is what the file asked for)."""
    return [kind for kind in kinds if not takes_page_cache(kind)] or list(kinds)


def crash_keeping(kinds: Sequence[str]) -> list[str]:
    """What of `kinds` a replica that loses power with its writes flushed suffers: a process
    kill (its class); the cache-keeping kinds when `kinds` has none."""
    return [kind for kind in kinds if _harms(kind, ClassKind.KILL)] or cache_keeping(kinds)


def one_cause(menus: Sequence[Sequence[str]], rng: random.Random) -> list[str] | None:
    """One incident's kinds for a cascade's members, whose kinds are `menus` in chain order:
    one kind every menu has, for each member; when it takes the page cache, the last member
    down takes it and each other crashes keeping its cache (crash_keeping): the last is the
    one whose unflushed writes no other replica holds (the others were down before it took
    them), where an earlier member's loss its peers would repair. None when the menus share
    no kind."""
    shared = [kind for kind in menus[0] if all(kind in menu for menu in menus[1:])]
    if not shared:
        return None
    kind = rng.choice(shared)
    if not takes_page_cache(kind):
        return [kind] * len(menus)
    *first, _ = menus
    return [rng.choice(crash_keeping(menu)) for menu in first] + [kind]
