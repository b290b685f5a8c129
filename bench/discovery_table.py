"""Where the discovery benchmark stands against its goal, read from what it recorded.

    python bench/discovery_table.py [--results bench/discovery.jsonl] [--cap-minutes 20]

For each row of the known-bug table that an aimed experiment reproduced (the rows of
bench/discovery_bench.py but those of NOT_REPRODUCED), prints its best search: the cell and
nemesis whose seeds 0 to 2 found the row within --cap-minutes of workload most often, with
each seed's minutes ("-" for not found, "?" for not run), and the smallest shrunk file shipped
in experiments/ from a run the benchmark found (its header, written by `kafka-chaos shrink`,
names that run, its faults and its k of n). Then the two figures the benchmark aims at: rows
found in at least 2 of 3 seeds, and found rows whose shrunk file has at most 3 faults.
Reads files only: no cluster.
"""

from __future__ import annotations

import argparse
import fnmatch
import re
import sys
from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from discovery_bench import NEED_SEEDS, Row, Search, rows_of, searches_of  # noqa: E402 (bench/ is not a package)

# Rows of the known-bug table no aimed experiment reproduced (docs/known-bugs.md, "tried"):
# the goal counts the reproduced rows only.
NOT_REPRODUCED = frozenset({"KAFKA-6361", "KAFKA-19012"})
SEEDS = (0, 1, 2)
MAX_FAULTS = 3
_HEADER = re.compile(
    r"# Shrunk by `kafka-chaos shrink` from (?P<run>\S+): .*\n"
    r"# reproduced in (?P<hits>\d+) of (?P<tried>\d+) replays \(needed (?P<need>\d+) of \d+\) "
    r"with these (?P<faults>\d+) fault"
)


@dataclass(frozen=True)
class Shrunk:
    """A shrunk file shipped in experiments/: the run it came from and what its header says."""

    path: str
    run: str
    faults: int
    hits: int
    need: int

    def shrinks(self, row: Row, searched: Collection[str]) -> bool:
        """Whether it shrank a discovery run of `row` (runs/discovery/<reference>/<cell>/...,
        the cell one of the row's that its searches ran, `searched`: two rows of one reference
        in two experiments share the run directory's reference) that reproduced as often as
        it needed."""
        parts = Path(self.run).parts
        at = parts.index("discovery") if "discovery" in parts[:-2] else -1
        return (
            at >= 0
            and parts[at + 1] == row.reference
            and fnmatch.fnmatchcase(parts[at + 2], row.cells)
            and parts[at + 2] in searched
            and self.hits >= self.need
        )


Table = dict[tuple[Row, str, str], dict[int, float | None]]


def seed_minutes(searches: Iterable[Search], rows: Iterable[Row]) -> Table:
    """(row, cell, nemesis) → seed → minutes to the first reproduction, for the searches of
    `rows` (a search is its row's when it names its reference and experiment and one of its
    cells)."""
    table: Table = defaultdict(dict)
    rows = list(rows)
    for s in searches:
        for row in rows:
            mine = (s.reference, s.experiment) == (row.reference, row.experiment)
            if mine and fnmatch.fnmatchcase(s.cell, row.cells):
                table[(row, s.cell, s.nemesis)][s.seed] = s.minutes
    return table


def found(minutes: dict[int, float | None], cap: float) -> int:
    """How many of seeds 0 to 2 found the row within `cap` minutes (a seed not run did not)."""
    return sum(1 for seed in SEEDS if (m := minutes.get(seed)) is not None and m <= cap)


def best(
    row: Row, table: Table, cap: float
) -> tuple[tuple[str, str] | None, dict[int, float | None]]:
    """The (cell, nemesis) of `row` that found it in the most seeds (then the most seeds
    run), with its minutes by seed; (None, {}) for a row never searched."""
    mine = [(key, minutes) for key, minutes in table.items() if key[0] == row]
    if not mine:
        return None, {}
    key, minutes = max(mine, key=lambda item: (found(item[1], cap), len(item[1])))
    return (key[1], key[2]), minutes


def shrunk_files(root: Path) -> list[Shrunk]:
    """Every experiment file under `root` headed by `kafka-chaos shrink`."""
    files = []
    for path in sorted(root.rglob("*.yaml")):
        match = _HEADER.match(path.read_text(errors="replace")[:1000])
        if match:
            files.append(
                Shrunk(
                    str(path.relative_to(root.parent)),
                    match["run"],
                    int(match["faults"]),
                    int(match["hits"]),
                    int(match["need"]),
                )
            )
    return files


def smallest_shrunk(row: Row, files: Iterable[Shrunk], searched: Collection[str]) -> Shrunk | None:
    """The shrunk file with the fewest faults from a discovery run of `row` that reproduced
    as often as it needed; None when there is none."""
    mine = [f for f in files if f.shrinks(row, searched)]
    return min(mine, key=lambda f: f.faults, default=None)


def _shown(minutes: dict[int, float | None]) -> str:
    """Seeds' minutes as '2.5, -, ?'."""
    return ", ".join(
        "?" if seed not in minutes else "-" if minutes[seed] is None else f"{minutes[seed]:g}"
        for seed in SEEDS
    )


def main(argv: Sequence[str] | None = None) -> int:
    from analysis.judge.known_bugs import KNOWN_BUGS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "discovery.jsonl")
    parser.add_argument("--cap-minutes", type=float, default=20)
    args = parser.parse_args(argv)
    lines = args.results.read_text().splitlines() if args.results.is_file() else []
    rows = [r for r in rows_of(KNOWN_BUGS) if r.reference not in NOT_REPRODUCED]
    table = seed_minutes(searches_of(lines), rows)
    files = shrunk_files(ROOT / "experiments")
    hit = small = 0
    for row in rows:
        where, minutes = best(row, table, args.cap_minutes)
        is_found = found(minutes, args.cap_minutes) >= NEED_SEEDS
        cells_run = {cell for (r, cell, _) in table if r == row}
        shrunk = smallest_shrunk(row, files, cells_run)
        hit += is_found
        small += is_found and shrunk is not None and shrunk.faults <= MAX_FAULTS
        searched = "never searched" if where is None else f"{where[0]} [{where[1]}]"
        filed = "no shrunk file" if shrunk is None else f"{shrunk.path}: {shrunk.faults} faults"
        mark = "FOUND" if is_found else "not found"
        print(f"{row.reference} ({row.experiment}): {mark}, {_shown(minutes)} min by seed")
        print(f"    {searched}; {filed}")
    print(
        f"rows found within {args.cap_minutes:g} minutes in at least {NEED_SEEDS} of "
        f"{len(SEEDS)} seeds: {hit} of {len(rows)}"
    )
    print(f"found rows shrunk to at most {MAX_FAULTS} faults: {small} of {hit}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
