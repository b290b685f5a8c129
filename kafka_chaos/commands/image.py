"""`kafka-chaos image`: build (or find) the broker image and print its tag."""

from __future__ import annotations

import argparse
import sys

from harness.settings import Settings
from kafka_chaos.commands.common import EXIT_ERROR, EXIT_OK

NAME = "image"
HELP = "build (or find) the broker image and print its tag"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Which Kafka, or which prebuilt image; --rebuild ignores the cache."""
    parser.add_argument("--kafka-version")
    parser.add_argument("--image", help="use this prebuilt image instead (pulled if missing)")
    parser.add_argument("--rebuild", action="store_true")


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Print the image's tag, where it came from and how long it took."""
    from harness.platform.engine import EngineUnavailable, ensure_engine
    from harness.platform.image import ImageError, ensure_image

    try:
        ensure_engine()
        built = ensure_image(
            args.kafka_version,
            image=args.image,
            rebuild=args.rebuild,
            settings=settings,
            log=lambda line: print(line, file=sys.stderr),
        )
    except (EngineUnavailable, ImageError) as exc:
        print(exc, file=sys.stderr)
        return EXIT_ERROR
    print(f"{built.tag} ({built.source} in {built.seconds:.1f} s)")
    return EXIT_OK
