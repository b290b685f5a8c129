"""What the generic nemesis draws for one cell, and how often: the steps a search without aim
makes, counted over many seeds, so that the chance of a given step (EndTxn held at the
transaction coordinator, say) can be read before any cluster runs.

    python bench/nemesis_draws.py EXPERIMENT [--cell GLOB] [--seeds 200] [--minutes 10]
                                  [--match 'delay@txn-coordinator:EndTxn'] [--top 15] [--swarm]
                                  [--overlap 2] [--beside 'kill@leader'] [--cascade 3]
                                  [--families requests ...] [--settled 9] [--within 30]
                                  [--seed-base 9000] [--lasting 11 55]
                                  [--param mode=from-brokers] [--show]

The cell keeps its workload and configuration; its faults become the generic nemesis with the
discovery benchmark's settings (bench/discovery_bench.py). Each step is named
`kind@target[:request,request]`. Printed: steps per minute of workload, the most drawn names
with their share of all steps, and for --match (an fnmatch pattern over the names) its share
and the minutes of workload expected before the first such step, also as a search in chunks
of --minutes (one seed a chunk) expects it. --swarm draws each seed from its own half of the
menu (swarm testing); --overlap lets that many faults act at once, and --beside counts a
--match only when it starts while a fault it names acts (given twice, two distinct faults),
with --settled S only a fault begun at least S s before (one the cluster has detected), and
with --within W at most W s before (the kernel's 30 s writeback age: a page cache lost later
keeps what was written before that fault).
--seed-base B draws seeds B to B + --seeds - 1 (the discovery benchmark's seed S, chunk C is
S * 1000 + C), and the seeds that draw a --match are listed. --lasting LOW HIGH counts a --match
only when it acts LOW to HIGH s (a cut past a session and inside a commit's timeout, say), and
--param KEY=VALUE only when its params hold that value (given again: each of them). --show
prints each --match drawn with its seed, start, end and params (a hold's delay_ms, say).
"""

from __future__ import annotations

import argparse
import fnmatch
import math
import random
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import permutations
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def step_name(step) -> str:
    """kind@target, with the requests a request step holds or drops."""
    requests = getattr(step.params, "requests", None)
    held = ":" + ",".join(sorted(requests)) if requests else ""
    return f"{step.fault}@{step.target}{held}"


@dataclass(frozen=True)
class Drawn:
    """One drawn fault: its name, when it starts and ends (s of workload), and its params as
    text (key, value) pairs."""

    name: str
    start_s: float
    end_s: float
    params: tuple[tuple[str, str], ...] = ()


def faults_of(steps: list) -> list[Drawn]:
    """The faults of a generated schedule: a step healed after its duration, or a step bound
    to a name with the heal step naming it (an overlapping schedule)."""
    heals = {s.target[1:]: s.at_s for s in steps if s.heals}
    return [
        Drawn(
            step_name(s),
            s.at_s,
            heals[s.as_] if s.as_ else s.at_s + s.duration_s,
            _params_of(s),
        )
        for s in steps
        if not s.heals
    ]


def _params_of(step) -> tuple[tuple[str, str], ...]:
    """A step's params with a value, as sorted text pairs (a list joined by commas)."""
    if step.params is None:
        return ()
    dumped = step.params.model_dump(by_alias=True, exclude_none=True)
    return tuple(
        sorted(
            (key, ",".join(map(str, value)) if isinstance(value, list) else str(value))
            for key, value in dumped.items()
        )
    )


def matches(
    faults: list[Drawn],
    pattern: str,
    besides: Sequence[str] = (),
    settled_s: float = 0.0,
    lasting: tuple[float, float] = (0.0, math.inf),
    params: Sequence[tuple[str, str]] = (),
    within_s: float = math.inf,
) -> list[Drawn]:
    """The faults named by `pattern` that act `lasting` (low to high, s, both included) with
    each of `params` among theirs; with `besides`, only those that start while, for each
    of those patterns, a distinct other fault it names acts (a kill of the successor while
    the leader is down; the leader's power lost while both followers are), begun at least
    `settled_s` before (long enough for the cluster to have detected it) and at most
    `within_s` before (a page cache lost later than the kernel's writeback age keeps what
    was written before that fault began)."""
    low, high = lasting
    found = [
        f
        for f in faults
        if fnmatch.fnmatch(f.name, pattern)
        and low <= f.end_s - f.start_s <= high
        and set(params) <= set(f.params)
    ]
    return [f for f in found if _beside(f, faults, besides, (settled_s, within_s))]


def _beside(
    fault: Drawn, faults: list[Drawn], besides: Sequence[str], begun: tuple[float, float]
) -> bool:
    """Whether distinct faults other than `fault`, acting at its start and begun `begun` (at
    least, at most: s) before it, match `besides` one each (any assignment of them to the
    patterns)."""
    least, most = begun
    acting = [
        o
        for o in faults
        if o is not fault
        and o.start_s + least <= fault.start_s <= o.start_s + most
        and fault.start_s < o.end_s
    ]
    return any(
        all(fnmatch.fnmatch(o.name, b) for o, b in zip(chosen, besides, strict=True))
        for chosen in permutations(acting, len(besides))
    )


def _since(settled_s: float, within_s: float) -> str:
    """How long before a --match its --beside faults began, as printed (empty: any time)."""
    if within_s == math.inf:
        return f" (begun {settled_s:g} s before)" if settled_s else ""
    return f" (begun {settled_s:g} to {within_s:g} s before)"


def _param(text: str) -> tuple[str, str]:
    """KEY=VALUE as a (key, value) pair."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r}: expected KEY=VALUE, e.g. mode=from-brokers")
    return key, value


def searched_in_chunks(firsts: list[float | None], chunk_minutes: float) -> str:
    """What a search in chunks of `chunk_minutes` (one seed a chunk, as the discovery
    benchmark runs) expects, from each chunk's first match (s, or None): the share of chunks
    with one, and the minutes of workload to the first (chunks that miss, then the minutes
    into the chunk that hits)."""
    hit = [t / 60 for t in firsts if t is not None]
    if not hit:
        return f"no chunk of {chunk_minutes:g} minutes drew it ({len(firsts)} seeds)"
    p = len(hit) / len(firsts)
    expected = (1 - p) / p * chunk_minutes + sum(hit) / len(hit)
    return (
        f"chunks of {chunk_minutes:g} minutes that draw it: {p:.1%}; expected minutes of "
        f"workload to the first: {expected:.1f}"
    )


def main() -> int:
    from bench.discovery_bench import Nemesis, unaimed
    from harness.experiment.generic import generic_schedule
    from harness.experiment.load import load_experiment, parse_experiment
    from harness.experiment.matrix import expand

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("experiment", type=Path)
    parser.add_argument("--cell", default="*")
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument(
        "--seed-base",
        type=int,
        default=0,
        help="the first seed; the discovery benchmark draws seed S's chunk C with S * 1000 + C",
    )
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--match", default=None)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument(
        "--swarm", action="store_true", help="each seed draws its own half of the menu"
    )
    parser.add_argument("--overlap", type=int, default=1, help="faults in force at once")
    parser.add_argument(
        "--beside",
        action="append",
        default=[],
        help="count a --match only while a fault so named acts (again: another one too)",
    )
    parser.add_argument(
        "--settled",
        type=float,
        default=0.0,
        help="count a --beside fault only once it has acted this long, s (a session, say)",
    )
    parser.add_argument(
        "--within",
        type=float,
        default=math.inf,
        help="count a --beside fault only if begun at most this long before, s (a page cache "
        "lost later than the kernel's writeback age, 30 s, keeps what was written before it)",
    )
    parser.add_argument(
        "--lasting",
        nargs=2,
        type=float,
        default=[0.0, math.inf],
        metavar=("LOW", "HIGH"),
        help="count a --match only when it acts LOW to HIGH s",
    )
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        type=_param,
        help="count a --match only when its params hold KEY=VALUE (again: each of them)",
    )
    parser.add_argument(
        "--show",
        action="store_true",
        help="print each --match drawn: its seed, start and end (s of workload) and params",
    )
    parser.add_argument("--cascade", type=float, default=1.0, help="the cascade family's weight")
    parser.add_argument("--families", nargs="+", default=[], help="only these fault families")
    args = parser.parse_args()
    cells = [
        c for c in expand(load_experiment(args.experiment)) if fnmatch.fnmatch(c.name, args.cell)
    ]
    if not cells:
        print(f"no cell of {args.experiment} matches {args.cell!r}", file=sys.stderr)
        return 2
    horizon_s = args.minutes * 60
    nemesis = Nemesis(args.swarm, args.overlap, args.cascade, tuple(args.families))
    document = unaimed(cells[0].spec.model_dump(by_alias=True), horizon_s, nemesis)
    (cell,) = expand(parse_experiment(document))
    plan = cell.spec.faults.generate
    schedules = [
        faults_of(generic_schedule(cell.spec, plan, horizon_s, random.Random(seed)))
        for seed in range(args.seed_base, args.seed_base + args.seeds)
    ]
    names = Counter(fault.name for schedule in schedules for fault in schedule)
    total = sum(names.values())
    minutes = args.seeds * args.minutes
    print(f"{cells[0].name}: {total / minutes:.2f} steps a minute over {args.seeds} seeds")
    for name, count in names.most_common(args.top):
        print(f"  {count / total:7.2%}  {name}")
    if args.match:
        low, high = args.lasting
        found = [
            matches(
                schedule,
                args.match,
                args.beside,
                args.settled,
                (low, high),
                args.param,
                args.within,
            )
            for schedule in schedules
        ]
        hits = sum(len(f) for f in found)
        share = hits / total if total else 0.0
        first = minutes / hits if hits else float("inf")
        since = _since(args.settled, args.within)
        shown = args.match + "".join(f" {k}={v}" for k, v in args.param)
        if args.lasting != [0.0, math.inf]:
            shown += f" acting {low:g} to {high:g} s"
        shown += "".join(f" while {b} acts{since}" for b in args.beside)
        print(f"{shown}: {share:.2%} of the steps; one in every {first:.0f} minutes of workload")
        firsts = [min((f.start_s for f in chunk), default=None) for chunk in found]
        print(searched_in_chunks(firsts, args.minutes))
        if args.show:
            for i, chunk in enumerate(found):
                for fault in chunk:
                    params = " ".join(f"{k}={v}" for k, v in fault.params)
                    print(f"  seed {args.seed_base + i}: {fault.name} "
                          f"{fault.start_s:.1f}-{fault.end_s:.1f} s {params}")  # fmt: skip
        drawn = [args.seed_base + i for i, first in enumerate(firsts) if first is not None]
        print(f"seeds that draw it: {' '.join(map(str, drawn[:20])) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
