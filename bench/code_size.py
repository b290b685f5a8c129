"""Size of the production code (harness, analysis, kafka_chaos), and its floor under the style.

Prints the line count `find harness analysis kafka_chaos -name '*.py' | xargs cat | wc -l`
gives, split by kind (code, docstring, comment, blank), and the smallest count the same
definitions could have under the house style: every code line kept, the blank lines
`ruff format` requires (two around a top-level definition, one between methods) and a
one-line docstring where there is one now, no comment.
  python bench/code_size.py [--by-package]
"""

from __future__ import annotations

import argparse
import ast
import io
import tokenize
from collections import Counter
from pathlib import Path

ROOTS = ("harness", "analysis", "kafka_chaos")
DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def docstring_lines(tree: ast.Module) -> set[int]:
    """The line numbers taken by the docstrings of the module and of its definitions."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, *DEFINITIONS)) and ast.get_docstring(node) is not None:
            first = node.body[0]
            lines.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return lines


def comment_lines(source: str) -> set[int]:
    """The line numbers holding only a comment."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    lines = source.splitlines()
    return {
        t.start[0]
        for t in tokens
        if t.type == tokenize.COMMENT and lines[t.start[0] - 1].strip().startswith("#")
    }


def kinds_of(path: Path) -> Counter[str]:
    """Lines of `path` by kind, and its floor's parts (required blanks, docstrings)."""
    source = path.read_text()
    tree = ast.parse(source)
    docs, comments = docstring_lines(tree), comment_lines(source)
    counts: Counter[str] = Counter()
    for number, line in enumerate(source.splitlines(), 1):
        kind = "blank" if not line.strip() else "docstring" if number in docs else None
        counts[kind or ("comment" if number in comments else "code")] += 1
    top = sum(isinstance(node, DEFINITIONS) for node in tree.body)
    methods = sum(
        isinstance(member, DEFINITIONS)
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        for member in node.body
    )
    counts["required blank"] = 2 * top + methods
    counts["docstrings"] = sum(
        ast.get_docstring(node) is not None
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, *DEFINITIONS))
    )
    return counts


def report(name: str, counts: Counter[str]) -> str:
    """One line: the total, its kinds and the floor."""
    total = sum(counts[k] for k in ("code", "docstring", "comment", "blank"))
    floor = counts["code"] + counts["required blank"] + counts["docstrings"]
    kinds = ", ".join(f"{k} {counts[k]:,}" for k in ("code", "docstring", "comment", "blank"))
    return f"{name}: {total:,} lines ({kinds}); floor {floor:,}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--by-package", action="store_true", help="a line per package too")
    args = parser.parse_args()
    everything: Counter[str] = Counter()
    packages: dict[str, Counter[str]] = {}
    for root in ROOTS:
        for path in sorted(Path(root).rglob("*.py")):
            counts = kinds_of(path)
            everything += counts
            package = "/".join(path.parts[:2]) if len(path.parts) > 2 else root
            packages.setdefault(package, Counter()).update(counts)
    if args.by_package:
        for package, counts in sorted(packages.items()):
            print(report(package, counts))
    print(report("all", everything))


if __name__ == "__main__":
    main()
