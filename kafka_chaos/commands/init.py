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

    source = settings.shipped_experiment(args.source)
    if source is None:
        print(unknown_source(args.source, settings), file=sys.stderr)
        return EXIT_ERROR
    target: Path = args.file
    if problem := target_problem(target):
        print(problem, file=sys.stderr)
        return EXIT_ERROR
    name = experiment_name(target)
    text = NAME_LINE.sub(f"name: {name}", source.read_text(), count=1)
    try:
        target.write_text(text)
    except OSError as exc:  # e.g. no permission: said with the fix, not a traceback
        print(f"cannot write {target}: {exc.strerror}; give a file in a folder you can write to",
              file=sys.stderr)  # fmt: skip
        return EXIT_ERROR
    try:
        load_experiment(target)
    except SpecError as exc:  # the name made from the file's: remove what was written
        target.unlink()
        print(f"{exc}\nchoose a file name of letters, digits, '-' and '_'", file=sys.stderr)
        return EXIT_ERROR
    print(
        f"wrote {target} (from {source.relative_to(settings.experiments_dir)}, name: {name}); next:"
    )
    print(f"  kafka-chaos validate {target}")
    print(f"  kafka-chaos run {target}")
    return EXIT_OK


def unknown_source(given: str, settings: Settings) -> str:
    """The line for an --from naming no shipped experiment: the nearest name, then all of them
    as `kafka-chaos list experiments` names them (known-bugs/... included)."""
    import difflib

    root = settings.experiments_dir
    known = sorted(p.relative_to(root).with_suffix("").as_posix() for p in root.rglob("*.yaml"))
    by_stem = {name.rpartition("/")[2]: name for name in known}  # known-bugs/x by x too
    stem = given.removesuffix(".yaml").rpartition("/")[2]
    close = difflib.get_close_matches(stem, list(by_stem), n=1)
    hint = f"did you mean {by_stem[close[0]]!r}? " if close else ""
    return f"no shipped experiment {given!r}; {hint}choose from {', '.join(known)}"


def target_problem(target: Path) -> str | None:
    """Why the starter file cannot be written at `target` (it exists, its folder does not or is
    a file), as one line with the fix; None when it can."""
    if target.exists():
        return f"{target} exists: give another file name, or remove it first"
    folder = target.parent
    if not folder.exists():
        return f"the folder {folder} does not exist: create it first (mkdir -p {folder})"
    if not folder.is_dir():
        return f"{folder} is a file, not a folder: give a file name in a folder"
    return None


def experiment_name(path: Path) -> str:
    """The experiment's name from its file's: lowercase, runs of other characters as '-'."""
    return re.sub(r"[^a-z0-9_-]+", "-", path.stem.lower()).strip("-") or "experiment"
