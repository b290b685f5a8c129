"""One job per module: none of harness/, analysis/ or kafka_chaos/ grows past the line budget
(past it, a module is doing several jobs; split it along them)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("harness", "analysis", "kafka_chaos")
MAX_LINES = 500


def test_no_module_is_past_the_line_budget() -> None:
    long = {
        str(path.relative_to(ROOT)): lines
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        # The client programs run standalone, each in a toolchain of its own, and hold all of
        # a client's roles in one file the build copies; they are not harness modules.
        if "client_programs" not in path.parts
        and (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}
