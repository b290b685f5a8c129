"""Mutation score of the checker's pure modules, from the results `mutmut run` left in mutants/.

mutmut 3 records an exit code per mutant in mutants/<module>.meta; this reads those files for
the modules that pyproject.toml's [tool.mutmut] only_mutate names, classifies each exit code
with mutmut's own table, and prints the score, per module and in total. Only "killed" counts
as killed: a survivor, a timeout, a mutant no test reached or one not yet checked lowers it.
  python bench/mutation_score.py [--survivors] [--fail-under 85] [--only NAMES_FILE]
                                 [--write-survivors FILE]

--only scores the mutants a file names (one mutant name a line) and no other: a random sample
run with `mutmut run <names>` when the whole run does not fit the time there is.
--write-survivors writes the survivors' and timeouts' names to FILE, one a line, for
`mutmut run <names>` to test them again on the current tests (make mutation-survivors).
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from collections import Counter
from pathlib import Path

from mutmut.stats import status_by_exit_code

KILLED = "killed"
RETRIED = ("survived", "timeout")  # what make mutation-survivors tests again


def modules(pyproject: Path) -> list[str]:
    """The files [tool.mutmut] only_mutate names (plain paths, no globs)."""
    config = tomllib.loads(pyproject.read_text("utf-8"))["tool"]["mutmut"]
    return list(config["only_mutate"])


def statuses(meta: Path) -> dict[str, str]:
    """Mutant name → mutmut status ("killed", "survived", "timeout", …) from one .meta file."""
    exit_codes = json.loads(meta.read_text("utf-8"))["exit_code_by_key"]
    return {name: status_by_exit_code[code] for name, code in exit_codes.items()}


def score_line(killed: int, total: int) -> str:
    """'mutation score: K of N mutants killed (P %)'."""
    percent = 100.0 * killed / total if total else 0.0
    return f"mutation score: {killed} of {total} mutants killed ({percent:.1f} %)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("."), help="project root")
    parser.add_argument("--survivors", action="store_true", help="list every mutant not killed")
    parser.add_argument("--fail-under", type=float, help="exit 1 below this percentage")
    parser.add_argument("--only", type=Path, help="score only the mutants this file names")
    parser.add_argument("--write-survivors", type=Path, help="write survivors' names to this file")
    args = parser.parse_args(argv)
    only = None if args.only is None else set(args.only.read_text("utf-8").split())

    total: Counter[str] = Counter()
    not_killed: list[tuple[str, str]] = []
    for module in modules(args.root / "pyproject.toml"):
        meta = args.root / "mutants" / f"{module}.meta"
        if not meta.is_file():
            print(
                f"no mutmut results for {module} ({meta} missing): run mutmut first",
                file=sys.stderr,
            )
            return 2
        by_name = statuses(meta)
        if only is not None:
            by_name = {name: s for name, s in by_name.items() if name in only}
        counts = Counter(by_name.values())
        others = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()) if s != KILLED)
        print(f"{module}: {counts[KILLED]} of {len(by_name)} killed ({others or 'none other'})")
        total.update(counts)
        not_killed += [(name, s) for name, s in sorted(by_name.items()) if s != KILLED]

    if args.survivors:
        for name, status in not_killed:
            print(f"  {status}: {name}")
    if args.write_survivors is not None:
        names = [name for name, status in not_killed if status in RETRIED]
        args.write_survivors.write_text("".join(f"{name}\n" for name in names), "utf-8")
    killed, n = total[KILLED], sum(total.values())
    print(score_line(killed, n))
    if n == 0:
        return 2
    if args.fail_under is not None and 100.0 * killed / n < args.fail_under:
        print(f"below the required {args.fail_under:g} %", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
