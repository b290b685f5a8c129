"""`kafka-chaos init [FILE] [--from EXPERIMENT]`: write a commented starter experiment file,
a copy of a shipped experiment (the default one unless told) renamed after FILE, that
validates as written."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from harness.settings import Settings
from kafka_chaos.commands.common import EXIT_ERROR, EXIT_OK

NAME = "init"
HELP = "write a commented starter experiment file (a copy of a shipped one) that validates"
NAME_LINE = re.compile(r"^name:.*$", re.M)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    parser.add_argument(
        "file", nargs="?", type=Path, default=Path("experiment.yaml"), help="(experiment.yaml)"
    )
    parser.add_argument(
        "--from",
        dest="source",
        default="default",
        metavar="EXPERIMENT",
        help="the shipped experiment to start from (kafka-chaos list experiments; default)",
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Write the starter file and validate it; exit 2 (writing nothing) when the file exists,
    the shipped experiment is unknown, or the name cannot be made valid."""
    from harness.experiment.load import load_experiment
    from harness.experiment.problems import SpecError

    source = settings.experiments_dir / f"{args.source.removesuffix('.yaml')}.yaml"
    if not source.is_file():
        known = ", ".join(sorted(p.stem for p in settings.experiments_dir.glob("*.yaml")))
        print(f"no shipped experiment {args.source!r}; choose from {known}", file=sys.stderr)
        return EXIT_ERROR
    target: Path = args.file
    if target.exists():
        print(f"{target} exists: give another file name, or remove it first", file=sys.stderr)
        return EXIT_ERROR
    name = experiment_name(target)
    text = NAME_LINE.sub(f"name: {name}", source.read_text(), count=1)
    target.write_text(text)
    try:
        load_experiment(target)
    except SpecError as exc:  # the name made from the file's: remove what was written
        target.unlink()
        print(f"{exc}\nchoose a file name of letters, digits, '-' and '_'", file=sys.stderr)
        return EXIT_ERROR
    print(f"wrote {target} (from {source.name}, name: {name}); next:")
    print(f"  kafka-chaos validate {target}")
    print(f"  kafka-chaos run {target}")
    return EXIT_OK


def experiment_name(path: Path) -> str:
    """The experiment's name from its file's: lowercase, runs of other characters as '-'."""
    return re.sub(r"[^a-z0-9_-]+", "-", path.stem.lower()).strip("-") or "experiment"
