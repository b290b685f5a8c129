"""The documentation: the site builds strict (every page in the nav, every link and anchor
valid) and every relative link of the README, the front door, points at a file that exists."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 300  # a front door, read in five minutes


def test_the_docs_site_builds_strict(tmp_path: Path) -> None:
    mkdocs = Path(sys.executable).parent / "mkdocs"
    done = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "testing" / "index.html").is_file()


def test_every_relative_link_of_the_readme_points_at_a_file() -> None:
    text = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    relative = [t for t in targets if "://" not in t and not t.startswith("mailto:")]
    assert relative, "the README links no page"
    assert [t for t in relative if not (ROOT / t).exists()] == []


def test_the_readme_is_a_front_door_with_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= README_MAX_LINES
    assert "make run" in text and "make test" in text


def test_the_known_bug_page_lists_every_row_of_the_checkers_table():
    """docs/known-bugs.md names each bug the checker recognises, with its experiment file."""
    from analysis.judge.known_bugs import KNOWN_BUGS

    page = (ROOT / "docs" / "known-bugs.md").read_text()
    for bug in KNOWN_BUGS:
        assert bug.reference in page, bug.reference
        experiment_file = bug.experiment.split(" ", 1)[0]
        assert (ROOT / experiment_file).is_file(), experiment_file
        assert experiment_file in page, experiment_file
