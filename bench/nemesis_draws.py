"""What the generic nemesis draws for one cell, and how often: the steps a search without aim
makes, counted over many seeds, so that the chance of a given step (EndTxn held at the
transaction coordinator, say) can be read before any cluster runs.

    python bench/nemesis_draws.py EXPERIMENT [--cell GLOB] [--seeds 200] [--minutes 10]
                                  [--match 'delay@txn-coordinator:EndTxn'] [--top 15]

The cell keeps its workload and configuration; its faults become the generic nemesis with the
discovery benchmark's settings (bench/discovery_bench.py). Each step is named
`kind@target[:request,request]`. Printed: steps per minute of workload, the most drawn names
with their share of all steps, and for --match (an fnmatch pattern over the names) its share
and the minutes of workload expected before the first such step.
"""

from __future__ import annotations

import argparse
import fnmatch
import random
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def step_name(step) -> str:
    """kind@target, with the requests a request step holds or drops."""
    requests = getattr(step.params, "requests", None)
    held = ":" + ",".join(sorted(requests)) if requests else ""
    return f"{step.fault}@{step.target}{held}"


def main() -> int:
    from bench.discovery_bench import unaimed
    from harness.experiment.generic import generic_schedule
    from harness.experiment.load import load_experiment, parse_experiment
    from harness.experiment.matrix import expand

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("experiment", type=Path)
    parser.add_argument("--cell", default="*")
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--match", default=None)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    cells = [
        c for c in expand(load_experiment(args.experiment)) if fnmatch.fnmatch(c.name, args.cell)
    ]
    if not cells:
        print(f"no cell of {args.experiment} matches {args.cell!r}", file=sys.stderr)
        return 2
    horizon_s = args.minutes * 60
    document = unaimed(cells[0].spec.model_dump(by_alias=True), horizon_s)
    (cell,) = expand(parse_experiment(document))
    plan = cell.spec.faults.generate
    names = Counter(
        step_name(step)
        for seed in range(args.seeds)
        for step in generic_schedule(cell.spec, plan, horizon_s, random.Random(seed))
    )
    total = sum(names.values())
    minutes = args.seeds * args.minutes
    print(f"{cells[0].name}: {total / minutes:.2f} steps a minute over {args.seeds} seeds")
    for name, count in names.most_common(args.top):
        print(f"  {count / total:7.2%}  {name}")
    if args.match:
        hits = sum(n for name, n in names.items() if fnmatch.fnmatch(name, args.match))
        share = hits / total if total else 0.0
        first = minutes / hits if hits else float("inf")
        print(
            f"{args.match}: {share:.2%} of the steps; one in every {first:.0f} minutes of workload"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
