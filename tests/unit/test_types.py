"""The type checker passes: mypy over harness/, analysis/ and kafka_chaos/ with the project's
configuration ([tool.mypy] in pyproject.toml: strict on the run directory, the anomaly
registry and the judge)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("harness", "analysis", "kafka_chaos")


def test_mypy_finds_no_error() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mypy", *PACKAGES],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
