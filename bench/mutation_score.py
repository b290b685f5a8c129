"""Mutation score of the checker's pure modules, from the results `mutmut run` left in mutants/.

mutmut 3 records an exit code per mutant in mutants/<module>.meta; this reads those files for
the modules that pyproject.toml's [tool.mutmut] only_mutate names, classifies each exit code
with mutmut's own table, and prints the score, per module and in total. Only "killed" counts
as killed: a survivor, a timeout, a mutant no test reached or one not yet checked lowers it.
  python bench/mutation_score.py [--survivors] [--fail-under 85] [--only NAMES_FILE]
                                 [--write-survivors FILE] [--equivalents FILE]

A survivor shown equivalent (no input can tell it from the code: bench/mutation_equivalents.jsonl,
one {"mutant", "line", "why"} a line) leaves the denominator, as mutation scores are defined,
but only while the mutant mutmut generated still holds the recorded mutated line: a function
changed since renumbers its mutants, and its old entries then count for nothing. Both scores are
printed; --fail-under applies to the one without the survivors shown equivalent.

--only scores the mutants a file names (one mutant name a line) and no other: a random sample
run with `mutmut run <names>` when the whole run does not fit the time there is.
--write-survivors writes the survivors' and timeouts' names to FILE, one a line, for
`mutmut run <names>` to test them again on the current tests (make mutation-survivors).
"""

from __future__ import annotations

import argparse
import ast
import functools
import json
import sys
import tomllib
from collections import Counter
from pathlib import Path

from mutmut.stats import status_by_exit_code

KILLED = "killed"
RETRIED = ("survived", "timeout")  # what make mutation-survivors tests again
EQUIVALENTS = Path("bench/mutation_equivalents.jsonl")


def modules(pyproject: Path) -> list[str]:
    """The files [tool.mutmut] only_mutate names (plain paths, no globs)."""
    config = tomllib.loads(pyproject.read_text("utf-8"))["tool"]["mutmut"]
    return list(config["only_mutate"])


def statuses(meta: Path) -> dict[str, str]:
    """Mutant name → mutmut status ("killed", "survived", "timeout", …) from one .meta file."""
    exit_codes = json.loads(meta.read_text("utf-8"))["exit_code_by_key"]
    return {name: status_by_exit_code[code] for name, code in exit_codes.items()}


def mutant_source(root: Path, name: str) -> str:
    """The source of mutant `name` as mutmut wrote it under root/mutants ('' when not found):
    `analysis.judge.findings.x_judge_loss__mutmut_3` is the function `x_judge_loss__mutmut_3`
    of mutants/analysis/judge/findings.py (a package's in its __init__.py)."""
    module, sep, function = name.partition(".x")
    base = root / "mutants" / module.replace(".", "/")
    path = next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.is_file()), None)
    if not sep or path is None:
        return ""
    return _functions(path).get(f"x{function}", "")


@functools.cache
def _functions(path: Path) -> dict[str, str]:
    """Every function (methods too) of the file at `path`, by name, with its source."""
    text = path.read_text("utf-8")
    lines = text.splitlines()
    return {
        node.name: "\n".join(lines[node.lineno - 1 : node.end_lineno])
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }


def shown_equivalent(root: Path, path: Path) -> set[str]:
    """The mutants `path` shows equivalent whose generated source still holds the mutated
    line it recorded."""
    if not path.is_file():
        return set()
    rows = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    return {row["mutant"] for row in rows if row["line"] in mutant_source(root, row["mutant"])}


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
    parser.add_argument(
        "--equivalents", type=Path, default=EQUIVALENTS, help="survivors shown equivalent"
    )
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

    equivalent = shown_equivalent(args.root, args.root / args.equivalents)
    equivalent &= {name for name, status in not_killed if status == "survived"}
    if args.survivors:
        for name, status in not_killed:
            print(f"  {'equivalent' if name in equivalent else status}: {name}")
    if args.write_survivors is not None:
        names = [n for n, status in not_killed if status in RETRIED and n not in equivalent]
        args.write_survivors.write_text("".join(f"{name}\n" for name in names), "utf-8")
    killed, n = total[KILLED], sum(total.values())
    print(score_line(killed, n))
    if n == 0:
        return 2
    scored = n - len(equivalent)
    percent = 100.0 * killed / scored if scored else 0.0
    print(
        f"without the {len(equivalent)} survivors shown equivalent ({args.equivalents}): "
        f"{killed} of {scored} killed ({percent:.1f} %)"
    )
    if args.fail_under is not None and percent < args.fail_under:
        print(f"below the required {args.fail_under:g} %", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
