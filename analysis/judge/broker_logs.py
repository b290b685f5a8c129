"""What the brokers logged about one partition: the first line of the run's kept broker logs
(broker-logs/) that names it and one of some needles, quoted as a mechanism's evidence."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from harness.rundir import layout

__all__ = ["LOG_LINES_SCANNED", "log_evidence"]

LOG_LINES_SCANNED: Final = 2_000_000  # per node log: bounded work on a huge log
# A truncation to offset 0 is what every follower logs when the partition is created: quoted
# only when nothing else matches.
_EMPTY_LOG: Final = re.compile(r"to offset 0\b")


def log_evidence(run_dir: str, topic: str, partition: int, needles: Sequence[str]) -> str:
    """The first broker-log line naming the partition and one of `needles`, as
    '<node>: <line>'; '' when none does (or the logs were not kept)."""
    folder = Path(run_dir) / layout.BROKER_LOGS
    name = f"{topic}-{partition}"
    if not needles or not folder.is_dir():
        return ""
    fallback = ""
    for path in sorted(folder.glob("*.log")):
        with path.open(encoding="utf-8", errors="replace") as lines:
            for number, line in enumerate(lines):
                if number >= LOG_LINES_SCANNED:
                    break
                if _names_partition(line, name) and any(n in line for n in needles):
                    found = f"{path.stem}: {line.strip()[:300]}"
                    if not _EMPTY_LOG.search(line):
                        return found
                    fallback = fallback or found
    return fallback


def _names_partition(line: str, name: str) -> bool:
    """True when `line` names partition `name` (chaos-1, not chaos-10)."""
    start = line.find(name)
    while start >= 0:
        end = start + len(name)
        if end == len(line) or not line[end].isdigit():
            return True
        start = line.find(name, end)
    return False
