"""What `run`, `report` and `reconcile` check of their command line before Spark or a cluster
starts, so a typo costs a second rather than a Spark job or an experiment: the Spark master
URL and the local folders and files the report is written to. Each check returns the one line
to print (the problem and its fix), or None when the input is fine."""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path

from harness.settings import Settings

MASTER_ENV = "KCHAOS_SPARK_MASTER"
# The master URLs SparkContext accepts (Spark 3 and 4; Mesos left with Spark 4), as help says them.
MASTER_FORMS = (
    "local, local[N], local[*], local[N,F], local-cluster[N,C,M], spark://HOST:PORT, yarn, "
    "k8s://HOST:PORT"
)
_THREADS = r"(?:[1-9][0-9]*|\*)"  # Spark refuses local[0]: it asks for at least one thread
_MASTER = re.compile(
    rf"local|local\[{_THREADS}\]|local\[{_THREADS}\s*,\s*[0-9]+\]"
    r"|local-cluster\[\s*[0-9]+\s*,\s*[0-9]+\s*,\s*[0-9]+\s*\]"
    r"|yarn|k8s://\S+"
)
# One spark:// address: a host name or [IPv6] address, then a port; several are comma-separated.
_SPARK_ADDRESS = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[^\s:/,\[\]]+):([0-9]{1,5})")
_SCHEMES = ("local", "local-cluster", "spark", "yarn", "k8s")


def is_spark_master(master: str) -> bool:
    """True when `master` has a form SparkContext accepts (MASTER_FORMS; spark:// with one or
    more comma-separated HOST:PORT, ports 1 to 65535)."""
    if _MASTER.fullmatch(master):
        return True
    if not master.startswith("spark://"):
        return False
    addresses = [_SPARK_ADDRESS.fullmatch(part) for part in master[8:].split(",")]
    return all(found and 0 < int(found[1]) < 65536 for found in addresses)


def master_problem(given: str | None, settings: Settings) -> str | None:
    """The line naming the Spark master (--master `given`, else $KCHAOS_SPARK_MASTER or the
    default) when Spark would refuse its form, with the accepted forms; else None."""
    master = given or settings.spark_master
    if is_spark_master(master):
        return None
    source = f"--master {master}" if given else f"{MASTER_ENV}={master}"
    head = re.split(r"[\[:]", master, maxsplit=1)[0]
    close = difflib.get_close_matches(head, _SCHEMES, n=1)
    guess = master.replace(head, close[0], 1) if close else ""
    hint = f"did you mean {guess}? " if guess and is_spark_master(guess) else ""
    return f"{source} is not a Spark master URL; {hint}Spark accepts {MASTER_FORMS}"


def _nearest_existing(path: Path) -> Path:
    """`path` or its nearest ancestor that exists (the current folder at worst)."""
    return next((p for p in (path, *path.parents) if p.exists()), Path.cwd())


def folder_problem(path: Path, flag: str) -> str | None:
    """The line saying why the folder `path` (given as `flag`) cannot be made or written: a
    file in its place or above it, or no permission; else None."""
    existing = _nearest_existing(path)
    if existing == path and not path.is_dir():
        return f"{flag} {path} is a file, not a folder: name a folder, or remove that file"
    if not existing.is_dir():
        return f"{flag} {path}: {existing} is a file, so no folder can be made in it; name a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        return (
            f"{flag} {path}: no permission to write in {existing}; name a folder you can write to"
        )
    return None


def file_problem(path: Path, flag: str) -> str | None:
    """The line saying why the file `path` (given as `flag`) cannot be written: a folder in
    its place, a file where its folder would be, or no permission; else None."""
    if path.is_dir():
        return f"{flag} {path} is a folder; name the file to write, e.g. {path / 'junit.xml'}"
    existing = _nearest_existing(path.parent)
    if not existing.is_dir():
        return f"{flag} {path}: {existing} is a file, so no folder can be made in it; name a file"
    writable = os.access(existing, os.W_OK | os.X_OK) and (
        not path.exists() or os.access(path, os.W_OK)
    )
    if not writable:
        return f"{flag} {path}: no permission to write it; name a file you can write"
    return None


def analysis_problem(
    master: str | None, settings: Settings, out: str | Path | None, junit: Path | None
) -> str | None:
    """The first problem of the analysis's input (the Spark master, a local --out folder, the
    --junit file) as one line, or None; checked before Spark starts."""
    from analysis.report.publish import is_uri

    problem = master_problem(master, settings)
    if problem is None and out is not None and not is_uri(str(out)):
        problem = folder_problem(Path(out), "--out")
    if problem is None and junit is not None:
        problem = file_problem(junit, "--junit")
    return problem
