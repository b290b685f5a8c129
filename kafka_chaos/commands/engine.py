"""`kafka-chaos engine`: make sure a Docker engine answers (installed and started if root)."""

from __future__ import annotations

import argparse

from harness.settings import Settings
from kafka_chaos.commands.common import EXIT_ERROR, EXIT_OK

NAME = "engine"
HELP = "make sure a Docker engine answers (install/start if root)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No arguments."""


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Exit 0 once an engine answers, 2 when none can be started."""
    from harness.platform.engine import main as engine_main

    return EXIT_OK if engine_main() == 0 else EXIT_ERROR
