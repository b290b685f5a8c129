"""`kafka-chaos clean`: remove the containers and networks of harnesses that are gone."""

from __future__ import annotations

import argparse
import sys

from harness.settings import Settings
from kafka_chaos.commands.common import EXIT_ERROR, EXIT_OK

NAME = "clean"
HELP = "remove containers/networks a crashed run left"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--all: also those of running harnesses."""
    parser.add_argument("--all", action="store_true", help="also those of running harnesses")


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Print how many containers and networks were removed."""
    from harness.platform.engine import EngineUnavailable, ensure_engine
    from harness.platform.leftovers import remove_leftovers

    try:
        ensure_engine()
    except EngineUnavailable as exc:
        print(exc, file=sys.stderr)
        return EXIT_ERROR
    print(f"removed {remove_leftovers(settings, all_owners=args.all)} containers/networks")
    return EXIT_OK
