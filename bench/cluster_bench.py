"""Prints cold and warm broker-image build times and the 3-node cluster's time to ready.

Targets on a 2-core machine: warm build <= 5 s, ready <= 20 s (warm image).
  python bench/cluster_bench.py [--cold] [--starts 3]
--cold removes the locally built image and base first (a full mmdebstrap + Maven build).
"""

from __future__ import annotations

import argparse
import statistics
import time

import docker

from harness.cluster import KafkaCluster
from harness.engine import ensure_engine
from harness.image import base_tag, ensure_image, image_tag
from harness.settings import load_settings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cold", action="store_true", help="also time a build from scratch")
    parser.add_argument("--starts", type=int, default=3, help="cluster starts to time")
    args = parser.parse_args()
    ensure_engine()
    settings = load_settings()
    if args.cold:
        client = docker.from_env()
        for tag in (
            image_tag(settings.kafka_version, settings.compose_dir),
            base_tag(settings.compose_dir),
        ):
            if client.images.list(name=tag):
                client.images.remove(tag, force=True)
        cold = ensure_image(log=lambda line: None)
        print(f"cold image build          {cold.seconds:7.1f} s  ({cold.tag})")
    warm = ensure_image(log=lambda line: None)
    print(f"warm image build          {warm.seconds:7.1f} s  (target <= 5 s)")
    ready = []
    for _ in range(args.starts):
        started = time.monotonic()
        cluster = KafkaCluster(image=warm.tag)
        try:
            cluster.start()
            ready.append(time.monotonic() - started)
        finally:
            cluster.close()
    print(
        f"cluster ready (3 nodes)   median {statistics.median(ready):5.1f} s, "
        f"min {min(ready):.1f} s, max {max(ready):.1f} s over {len(ready)} starts "
        "(target <= 20 s)"
    )


if __name__ == "__main__":
    main()
