"""`kafka-chaos validate FILE`: check an experiment file, list its cells and the wall time."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.settings import Settings
from kafka_chaos.commands.common import (
    EXIT_ERROR,
    EXIT_OK,
    add_user_settings,
    load_experiment,
    resolved_experiment,
)
from kafka_chaos.commands.run import shard_arg

NAME = "validate"
HELP = "check an experiment file and list its cells"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    parser.add_argument("experiment", type=Path)
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object: valid, the cells, the repetitions, the estimated seconds; "
        "or valid false and the problems",
    )
    parser.add_argument(
        "--shard",
        type=shard_arg,
        metavar="I/N",
        help="only the cells `run --shard I/N` runs, and their estimated wall time",
    )
    add_user_settings(parser)


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Print the file's cells and estimated wall time; exit 2 when it is invalid."""
    from harness.experiment.matrix import expand

    if args.json:
        return _print_json(args)
    experiment = load_experiment(args.experiment, args)
    if experiment is None:
        return EXIT_ERROR
    cells = _shard_cells(expand(experiment), args.shard)
    shard = f" in shard {args.shard[0]}/{args.shard[1]}" if args.shard else ""
    print(
        f"{args.experiment}: valid, {len(cells)} cells{shard} x {experiment.repetitions} "
        "repetitions"
    )
    for cell in cells:
        print(f"  {cell.name}")
    for line in wall_time_lines(cells, experiment.repetitions):
        print(line)
    return EXIT_OK


def _print_json(args: argparse.Namespace) -> int:
    """`validate --json`: one JSON object on stdout, whether the file is valid or not."""
    import json

    from harness.experiment.matrix import expand
    from harness.experiment.plan import repetition_seconds, wall_time
    from harness.experiment.problems import SpecError

    try:
        experiment = resolved_experiment(args.experiment, args)
    except OSError as exc:
        problem = f"{exc.filename}: {exc.strerror}; give the path of a property file"
        print(json.dumps({"file": str(args.experiment), "valid": False, "problems": [problem]}))
        return EXIT_ERROR
    except SpecError as exc:
        # The message's first line names the file; each line after it is one problem. A
        # one-line message (an --set path that is no field) gives its problem as field: reason.
        lines = str(exc).splitlines()[1:]
        one = [f"{path}: {reason}" for path, reason in exc.problems[:1]] or [str(exc)]
        problems = [line.strip() for line in lines] or one
        document = {"file": str(args.experiment), "valid": False, "problems": problems}
        print(json.dumps(document, indent=2))
        return EXIT_ERROR
    cells = _shard_cells(expand(experiment), args.shard)
    estimate = wall_time(cells, experiment.repetitions)
    document = {
        "file": str(args.experiment),
        "valid": True,
        "name": experiment.name,
        "shard": f"{args.shard[0]}/{args.shard[1]}" if args.shard else None,
        "cells": [cell.name for cell in cells],
        "repetitions": experiment.repetitions,
        "estimated_seconds": round(estimate.seconds),
        # One repetition of each cell (its workload plus a cluster's start, topic, full ISR
        # and read-back); None when its workload has no time bound.
        "cell_seconds": {cell.name: _rounded(repetition_seconds(cell)) for cell in cells},
    }
    print(json.dumps(document, indent=2))
    return EXIT_OK


def _shard_cells(cells, shard: tuple[int, int] | None) -> list:
    """The cells of shard i/n, as `run --shard` deals them; every cell without a shard."""
    from harness.run.repetition import select_shard

    return select_shard(cells, shard)


def _rounded(seconds: float | None) -> int | None:
    return None if seconds is None else round(seconds)


def duration(seconds: float) -> str:
    """`seconds` as people read a wall time: 45 s, 5 min 30 s, 2 h 05 min."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def wall_time_lines(cells, repetitions: int) -> list[str]:
    """What `validate` says about how long the experiment will take, and on what assumption."""
    from harness.experiment.plan import (
        AGEING_RATE,
        CLUSTER_START_S,
        TOPIC_ISR_READBACK_S,
        wall_time,
    )

    estimate = wall_time(cells, repetitions)
    runs = f"{estimate.repetitions} repetition{'s' if estimate.repetitions != 1 else ''}"
    lines = [
        f"estimated wall time: {duration(estimate.seconds)} for {runs} (each: its workload "
        f"plus ~{CLUSTER_START_S:.0f} s to start a fresh cluster and ~{TOPIC_ISR_READBACK_S:.0f}"
        " s for topic, full ISR and read-back; the analysis comes on top)"
    ]
    if ageing := [c.name for c in cells if (t := c.spec.workload.transactions) and t.age_commits]:
        lines.append(
            f"  ageing the transactional.id first ({', '.join(ageing)}) is counted at "
            f"{AGEING_RATE} commits a second (workload.transactions.age_commits)"
        )
    if estimate.unbounded_cells:
        lines.append(
            f"  not counted: the workload of {len(estimate.unbounded_cells)} cells (count "
            "without rate has no time bound), e.g. " + estimate.unbounded_cells[0]
        )
    return lines
