"""The client families' programs built on demand: the harness's program for a library
(harness/platform/client_programs/<family>/) with that library at any release taken from its
registry, cached under the cache directory keyed by family, release and the program's source,
so a second run starts at once.

Go programs are built with the machine's `go` (the library pinned with `go mod edit`), the Node
program gets its library from npm beside it, a Python program gets a virtualenv of its own
holding only its library. The contract's plumbing a language's programs share is a folder of
its own (SHARED), copied in by the build and part of the cache key. What runs is a command
line; the role word (`produce`, `consume`) and the contract's arguments follow it
(docs/clients.md, "The client-program contract").
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.settings import Settings

__all__ = ["PROGRAMS_DIR", "ClientBuildError", "ProgramSource", "family_program"]

PROGRAMS_DIR = Path(__file__).resolve().parent / "client_programs"
# The folder under PROGRAMS_DIR a language's programs share, which the build puts beside the
# program's own files: Python's contract.py beside client.py (`import contract`), Go's
# contract_*.go beside the program's .go files (one package main, compiled together).
SHARED = {"go": "go_contract", "python": "python_contract"}
_BUILD_TIMEOUT_S = 600
# What tells the user how to get a missing toolchain: the project's own set-up installs both.
_TOOLCHAIN_FIX = {
    "go": "make tools (installs Go where it is missing), or put Go 1.21 or later on PATH (it "
    "fetches the newer toolchain a library asks for, e.g. Go 1.26 for franz-go 1.22)",
    "node": "make tools (installs Node.js and npm where missing), or put node and npm on PATH",
    "npm": "make tools (installs Node.js and npm where missing), or put node and npm on PATH",
}


@dataclass(frozen=True)
class ProgramSource:
    """What builds a family's program: the family's name, the toolchain (go, node, python),
    the library as its registry names it, and the program's folder under PROGRAMS_DIR."""

    name: str
    language: str
    package: str
    program: str


class ClientBuildError(RuntimeError):
    """A family's program cannot be built here; the message names the problem and the fix."""


def family_program(
    family: ProgramSource, version: str, settings: Settings | None = None
) -> tuple[str, ...]:
    """The command line that runs `family`'s program with its library at `version` (built on
    the first call, a lookup after); ClientBuildError naming the fix when it cannot be built."""
    settings = settings or Settings()
    source = PROGRAMS_DIR / family.program
    shared = SHARED.get(family.language)
    entry = f"clients/{family.name}-{version}-{_digest(source, shared)}"
    builder, product = _BUILDERS[family.language]
    built = settings.built_once(
        entry, product, lambda folder: builder(family, version, source, folder)
    )
    if family.language == "go":
        return (str(built),)
    if family.language == "node":
        return (_tool("node"), str(built))
    return (str(built.parent / "venv" / "bin" / "python"), str(built))


def _digest(source: Path, shared: str | None = None) -> str:
    """A short hash of the program's files and those of the folder its language's programs
    share (their names and bytes), so an edit to either rebuilds."""
    content = hashlib.sha256()
    for path in _files(source):
        content.update(path.relative_to(source).as_posix().encode() + b"\0" + path.read_bytes())
    if shared is not None:
        for path in _files(PROGRAMS_DIR / shared):
            name = path.relative_to(PROGRAMS_DIR).as_posix()
            content.update(b"shared\0" + name.encode() + b"\0" + path.read_bytes())
    return content.hexdigest()[:12]


_NOT_SOURCE = ("go.sum", "__pycache__", "*.pyc")


def _files(folder: Path) -> list[Path]:
    """A program folder's source files, sorted (no go.sum, no Python bytecode)."""
    return sorted(
        path
        for path in folder.rglob("*")
        if path.is_file()
        and path.name != "go.sum"
        and "__pycache__" not in path.relative_to(folder).parts
    )


def _copy_shared(language: str, into: Path) -> None:
    """The folder `language`'s programs share, its files copied into `into`; a shared file
    never replaces one of the program's own (ClientBuildError naming both)."""
    shared = PROGRAMS_DIR / SHARED[language]
    for path in _files(shared):
        if (into / path.relative_to(shared)).exists():
            raise ClientBuildError(
                f"{path.relative_to(PROGRAMS_DIR)} would replace the program's own "
                f"{path.relative_to(shared)} in {into}. Fix: rename one of them."
            )
    shutil.copytree(shared, into, dirs_exist_ok=True, ignore=shutil.ignore_patterns(*_NOT_SOURCE))


def _tool(name: str) -> str:
    """The path of a toolchain command; ClientBuildError naming the fix when it is missing."""
    path = shutil.which(name)
    if path is None:
        raise ClientBuildError(f"{name} is not installed. Fix: {_TOOLCHAIN_FIX.get(name, name)}")
    return path


def _run(argv: list[str], cwd: Path, what: str, env: dict[str, str] | None = None) -> None:
    """Run one build step; ClientBuildError with the end of its output when it fails."""
    result = subprocess.run(
        argv, cwd=cwd, capture_output=True, text=True, check=False, timeout=_BUILD_TIMEOUT_S,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-8:])
        raise ClientBuildError(
            f"{what} failed:\n{tail}\nFix: pick a release the registry has (kafka-chaos list "
            "clients names the current one), or report this with the output above."
        )


def _build_go(family: ProgramSource, version: str, source: Path, folder: Path) -> None:
    """The Go program, with the shared contract_*.go beside its own files, compiled with the
    library pinned at `version` (go.sum made afresh)."""
    go = _tool("go")
    work = folder / "src"
    shutil.copytree(source, work, ignore=shutil.ignore_patterns("go.sum"))
    _copy_shared("go", work)
    # A Go older than the library's go.mod asks for fetches that toolchain itself (GOTOOLCHAIN's
    # default, auto), so Debian's Go builds too.
    env = {"GOFLAGS": "-mod=mod"}
    what = f"building {family.name} {version}"
    _run([go, "mod", "edit", f"-require={family.package}@v{version}"], work, what, env)
    _run([go, "mod", "tidy"], work, what, env)
    _run([go, "build", "-o", str(folder / "client"), "."], work, what, env)


def _build_node(family: ProgramSource, version: str, source: Path, folder: Path) -> None:
    """The Node program beside its library at `version`, installed from npm."""
    shutil.copytree(source, folder, dirs_exist_ok=True)
    (folder / "package.json").write_text('{"private": true}\n')
    npm = [_tool("npm"), "install", "--no-audit", "--no-fund", "--no-save", "--prefix"]
    package = f"{family.package}@{version}"
    _run([*npm, str(folder), package], folder, f"npm install {package}")


def _build_python(family: ProgramSource, version: str, source: Path, folder: Path) -> None:
    """The Python program beside the shared contract.py and a virtualenv holding only its
    library at `version`."""
    shutil.copytree(source, folder, dirs_exist_ok=True, ignore=shutil.ignore_patterns(*_NOT_SOURCE))
    _copy_shared("python", folder)
    venv = folder / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], folder, f"a virtualenv for {family.name}")
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    package = f"{family.package}=={version}"
    _run([*pip, "--disable-pip-version-check", package], folder, f"pip install {package}")


_BUILDERS: dict[str, tuple[Callable[[ProgramSource, str, Path, Path], None], str]] = {
    "go": (_build_go, "client"),
    "node": (_build_node, "client.js"),
    "python": (_build_python, "client.py"),
}
