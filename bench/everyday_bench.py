"""The everyday loop as a new user meets it: `make run` in a fresh clone, timed stage by stage.

    python bench/everyday_bench.py [--no-pip-cache] [--keep]

Clones the checkout's HEAD into a temporary folder (no virtualenv, no runs, no reports), then
times `make venv` (a new virtualenv from the lock; --no-pip-cache downloads every wheel again,
as on a machine that never ran pip), `make engine image` (the Docker engine answering and the
broker image: found by its content tag when this machine built it before; a cold build is
`python bench/cluster_bench.py --cold`), and `make run` split into its cells and the analysis
(from the run's own timestamped progress lines). Target on a 2-core machine: `make run` on a
fresh machine in at most 5 minutes. The clone is removed unless --keep.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET_S = 300.0
STAMP = re.compile(r"^(\d\d:\d\d:\d\d) \[(\d+)/(\d+) ")


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, str]:
    """Run argv in cwd; return (seconds, its combined output); exit on failure with the tail."""
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    output = done.stdout + done.stderr
    if done.returncode not in (0, 1):  # 1 is a violation verdict: the loop still ran
        sys.exit(f"{' '.join(argv)} exited {done.returncode}:\n{output[-3000:]}")
    return seconds, output


def cells_seconds(output: str, run_s: float) -> tuple[float | None, float | None]:
    """(seconds from the first cell's start to the last progress line, the rest of run_s) from
    the run's timestamped lines; None when it printed none."""
    stamps = [m.group(1) for line in output.splitlines() if (m := STAMP.match(line))]
    if not stamps:
        return None, None
    first, last = (datetime.strptime(s, "%H:%M:%S") for s in (stamps[0], stamps[-1]))
    cells = (last - first).total_seconds() % 86_400
    return cells, run_s - cells


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-pip-cache", action="store_true", help="download every wheel")
    parser.add_argument("--keep", action="store_true", help="keep the clone")
    args = parser.parse_args()
    clone = Path(tempfile.mkdtemp(prefix="everyday-bench-"))
    env = {**os.environ, "CI": "true"}  # plain progress lines, as a pipeline sees them
    if args.no_pip_cache:
        env["PIP_NO_CACHE_DIR"] = "1"
    try:
        subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
        venv_s, _ = timed(["make", "venv"], clone, env)
        image_s, _ = timed(["make", "engine", "image"], clone, env)
        run_s, output = timed(["make", "run"], clone, env)
        cells, rest = cells_seconds(output, run_s)
    finally:
        if not args.keep:
            shutil.rmtree(clone, ignore_errors=True)
    total = venv_s + image_s + run_s
    cache = "off" if args.no_pip_cache else "on"
    print(f"make venv                 {venv_s:7.1f} s  (pip cache {cache})")
    print(f"make engine image         {image_s:7.1f} s")
    print(f"make run                  {run_s:7.1f} s")
    if cells is not None and rest is not None:
        print(f"  cells (first start to last line) {cells:7.1f} s")
        print(f"  the rest (Spark, analysis, report) {rest:7.1f} s")
    print(f"fresh clone to report     {total:7.1f} s")
    verdict = "met" if total <= TARGET_S else "MISSED"
    print(
        f"target: fresh clone to report in {TARGET_S / 60:.0f} min: {total / 60:.1f} min {verdict}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
