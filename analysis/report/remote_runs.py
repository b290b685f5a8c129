"""Run directories kept where data teams keep data: `kafka-chaos report s3a://bucket/runs/*`.

A runs pattern that is a URI (any file system pyarrow opens, as for `--out`) is matched the
way a local glob is (`*`, `?`, `[...]` within a name, `**` across folders, a match selecting
the run directories at or under it) and every run directory it selects is copied to a local
mirror, `<cache>/runs/<scheme>/<path>` (s3a:// and s3n:// mirror as s3), together with the
files of its experiment run's root (plan, provenance, repetitions). The analysis then reads
the copies like any local run: it writes results.json beside them, never to the store.

What is copied: everything a run directory holds, except a producer's journal streams once
`acked.parquet` exists (the analysis reads the Parquet; the journal is what a crashed harness
leaves, to be finalized, and is then copied). A file whose copy has the same size and
modification time is not copied again, so reporting the same runs twice downloads once.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Final

import pyarrow.fs as pafs

from analysis.report.publish import Destination, DestinationError, destination, is_uri
from harness.rundir import layout

__all__ = ["local_mirror", "select_run_dirs", "stage_runs"]

_GLOB_CHARS: Final = frozenset("*?[")
# A producer's journal streams: read by finalize only, which acked.parquet makes unneeded.
_JOURNAL_STREAM_GLOB: Final = "journal-*.arrows"
_LEVELS_TO_ROOT: Final = 2  # layout.experiment_run_root: a repetition lies two levels down


@dataclass(frozen=True)
class _Listing:
    """The files under a URI's fixed prefix: path (pyarrow's form) to its file info."""

    files: dict[str, pafs.FileInfo]


def stage_runs(patterns: Sequence[str], cache: Path) -> list[str]:
    """`patterns` with every URI replaced by the local copies of the run directories it
    selects (local patterns pass through unchanged). Raises DestinationError naming the URI
    and the fix when the store cannot be reached or the URI selects no run directory."""
    staged: list[str] = []
    for pattern in patterns:
        if not is_uri(pattern):
            staged.append(pattern)
            continue
        source = destination(_without_glob(pattern))
        listing = _list(source)
        run_dirs = select_run_dirs(_pattern_path(source, pattern), listing.files)
        if not run_dirs:
            raise DestinationError(
                f"no run directory under {pattern} (a run directory holds {layout.SPEC} and "
                f"{layout.ACKED} or a journal). Fix: name the folder the runs were copied to, "
                "e.g. s3a://bucket/runs/<experiment>/<timestamp>, or a parent of it"
            )
        for run_dir in run_dirs:
            staged.append(str(_copy_run(source, run_dir, listing, cache)))
    return staged


def select_run_dirs(pattern: str, files: dict[str, object]) -> list[str]:
    """The run directories (folders holding spec.json) among `files`' paths that lie at or
    under a match of `pattern`, matched name by name as glob.glob(recursive=True) matches:
    `*`, `?` and `[...]` within a name, `**` for any number of folders, and a name starting
    with a dot matched only by a pattern name starting with one. Each is spelt as `files`
    spell it (a doubled slash kept: the run's files are found by that prefix). Sorted."""
    wanted = PurePosixPath(pattern).parts
    found = set()
    for path in files:
        spec = PurePosixPath(path)
        if spec.name != layout.SPEC:
            continue
        parts = spec.parent.parts
        if any(_names_match(wanted, parts[:k]) for k in range(len(parts) + 1)):
            found.add(path.removesuffix(layout.SPEC).rstrip("/") or spec.parent.as_posix())
    return sorted(found)


def local_mirror(cache: Path, uri: str, path: str) -> Path:
    """Where a file or folder at `path` on the store `uri` names is copied to."""
    scheme = uri.partition("://")[0].lower()
    scheme = "s3" if scheme in ("s3a", "s3n") else scheme
    return cache / "runs" / scheme / path.lstrip("/")


def _names_match(pattern: Sequence[str], names: Sequence[str]) -> bool:
    """True when the folder names `names` match the pattern's names exactly (see
    select_run_dirs for the rules)."""
    if not pattern:
        return not names
    head, rest = pattern[0], pattern[1:]
    if head == "**":  # zero or more folders, none of them hidden
        return any(
            _names_match(rest, names[skip:])
            for skip in range(len(names) + 1)
            if not any(name.startswith(".") for name in names[:skip])
        )
    if not names:
        return False
    name = names[0]
    if name.startswith(".") and not head.startswith("."):
        return False
    return fnmatch.fnmatchcase(name, head) and _names_match(rest, names[1:])


def _without_glob(pattern: str) -> str:
    """The URI up to the last folder before its first glob character."""
    scheme, _, rest = pattern.partition("://")
    kept = []
    for name in rest.split("/"):
        if _GLOB_CHARS & set(name):
            break
        kept.append(name)
    return f"{scheme}://{'/'.join(kept)}"


def _pattern_path(source: Destination, pattern: str) -> str:
    """The pattern in the store's path form (no scheme, bucket first on S3)."""
    tail = pattern.partition("://")[2].split("/")
    fixed = source.uri.partition("://")[2].rstrip("/").split("/")
    return "/".join([source.path, *tail[len(fixed) :]]).rstrip("/")


def _list(source: Destination) -> _Listing:
    """Every file under the pattern's fixed folder on the store (one recursive listing)."""
    selector = pafs.FileSelector(source.path, recursive=True, allow_not_found=True)
    try:
        infos = source.filesystem.get_file_info(selector)
    except OSError as exc:
        raise DestinationError(f"cannot list {source.uri}: {exc}".splitlines()[0]) from None
    return _Listing({info.path: info for info in infos if info.type == pafs.FileType.File})


def _copy_run(source: Destination, run_dir: str, listing: _Listing, cache: Path) -> Path:
    """Copy one run directory and its experiment root's files; return the local copy."""
    inside = {p: i for p, i in listing.files.items() if p.startswith(run_dir + "/")}
    finalized = f"{run_dir}/{layout.ACKED}" in inside
    for path, info in inside.items():
        name = PurePosixPath(path).name
        if finalized and fnmatch.fnmatchcase(name, _JOURNAL_STREAM_GLOB):
            continue
        _copy_file(source, info, local_mirror(cache, source.uri, path))
    root = PurePosixPath(run_dir)
    for _ in range(_LEVELS_TO_ROOT):
        root = root.parent
    for info in source.filesystem.get_file_info(pafs.FileSelector(root.as_posix())):
        if info.type == pafs.FileType.File:
            _copy_file(source, info, local_mirror(cache, source.uri, info.path))
    return local_mirror(cache, source.uri, run_dir)


def _copy_file(source: Destination, info: pafs.FileInfo, target: Path) -> None:
    """Copy one file unless its copy has the same size and modification time."""
    mtime = info.mtime.timestamp() if info.mtime is not None else None
    if target.is_file():
        here = target.stat()
        if here.st_size == info.size and (mtime is None or here.st_mtime == mtime):
            return
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    pafs.copy_files(
        info.path,
        str(partial.absolute()),  # relative, "kc:cache/..." would be refused as a URI
        source_filesystem=source.filesystem,
        destination_filesystem=pafs.LocalFileSystem(),
    )
    if mtime is not None:
        os.utime(partial, (mtime, mtime))
    partial.replace(target)  # a copy cut short never passes for a whole one
