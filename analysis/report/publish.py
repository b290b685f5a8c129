"""Where a report and its results dataset go when that is not a local folder: any file system
pyarrow opens by URI (s3://, and Hadoop's s3a:// name for the same store, gs://, hdfs:// where
libhdfs is installed, file://).

A report is written to a local staging folder first (the renderers and JUnit write local files)
and then copied whole to its URI. A results lake is different: many reports append to one
dataset there, each report's files named by a digest of the runs it covers, so reporting the
same runs again replaces its own files and never another report's.

S3 settings come from the environment the AWS SDK reads (AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION, AWS_ENDPOINT_URL for an S3-compatible server) or
from the URI's query (`?endpoint_override=host:port&scheme=http`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from analysis.crossrun.dataset import RESULTS_SCHEMA, results_partitioning

__all__ = [
    "Destination",
    "DestinationError",
    "append_results",
    "destination",
    "is_uri",
    "publish_folder",
]

# Hadoop's names for the S3 connectors; pyarrow knows the store as s3.
_S3_ALIASES: Final = ("s3a://", "s3n://")
_FIX: Final = (
    "Fix: give a local folder, or a URI pyarrow opens (s3://bucket/prefix, s3a://bucket/prefix, "
    "gs://bucket/prefix, hdfs://namenode:port/path with libhdfs installed, file:///path)"
)


class DestinationError(ValueError):
    """A destination that cannot be opened or written; the message names it and the fix."""


@dataclass(frozen=True)
class Destination:
    """A folder on some file system: the text the user gave, the file system and the path in
    it (pyarrow's form: no scheme, e.g. 'bucket/prefix' on S3)."""

    uri: str
    filesystem: pafs.FileSystem
    path: str

    def child(self, name: str) -> str:
        """The URI of `name` inside this folder, for printing."""
        return f"{self.uri.rstrip('/')}/{name}"


def is_uri(text: str) -> bool:
    """True when `text` names a file system by scheme (`scheme://...`), not a local path."""
    scheme, sep, _ = text.partition("://")
    return bool(sep) and scheme.isascii() and scheme.replace("+", "").isalnum()


def destination(text: str) -> Destination:
    """The folder `text` names, opened and checked writable-looking (it may not exist yet; its
    store must answer); a local path as it is. Raises DestinationError naming the problem and
    the fix."""
    if not is_uri(text):
        return Destination(text, pafs.LocalFileSystem(), Path(text).resolve().as_posix())
    uri = text
    for alias in _S3_ALIASES:
        if text.startswith(alias):
            uri = "s3://" + text[len(alias) :]
    try:
        filesystem, path = pafs.FileSystem.from_uri(uri)
    except (ValueError, OSError) as exc:  # ArrowInvalid is a ValueError
        raise DestinationError(f"cannot open {text}: {_first_line(exc)}. {_FIX}") from None
    path = path.rstrip("/")
    try:
        found = filesystem.get_file_info(path)
    except OSError as exc:  # no such bucket, no credentials, nothing listening
        raise DestinationError(f"cannot reach {text}: {_first_line(exc)}. {_FIX}") from None
    if found.type == pafs.FileType.File:
        raise DestinationError(f"{text} is a file, not a folder. {_FIX}")
    return Destination(text, filesystem, path)


def publish_folder(local: Path, target: Destination) -> list[str]:
    """Copy every file under `local` to the same relative path under `target`; return the
    URIs written, in sorted order."""
    local_fs = pafs.LocalFileSystem()
    files = sorted(p for p in local.rglob("*") if p.is_file())
    for path in files:
        relative = path.relative_to(local).as_posix()
        parent = f"{target.path}/{relative}".rsplit("/", 1)[0]
        target.filesystem.create_dir(parent, recursive=True)
        pafs.copy_files(
            str(path.absolute()),  # relative, "kc:report/x" would read as a URI of scheme "kc"
            f"{target.path}/{relative}",
            source_filesystem=local_fs,
            destination_filesystem=target.filesystem,
        )
    return [target.child(p.relative_to(local).as_posix()) for p in files]


def append_results(dataset_dir: Path, lake: Destination) -> int:
    """Add the results dataset at `dataset_dir` (as crossrun.dataset writes it) to the dataset
    at `lake`, partitioned the same way; return the rows written. Its files are named by a
    digest of the run directories it holds, so the same runs reported again replace their own
    files (never another report's), and an empty dataset writes nothing."""
    local = ds.dataset(
        dataset_dir, schema=RESULTS_SCHEMA, partitioning=results_partitioning(), format="parquet"
    )
    table = local.to_table()
    if table.num_rows == 0:
        return 0
    digest = runs_digest(pc.unique(table["run_dir"]).to_pylist())
    ds.write_dataset(
        table,
        lake.path,
        filesystem=lake.filesystem,
        format="parquet",
        partitioning=results_partitioning(),
        basename_template=f"part-{digest}-{{i}}.parquet",
        existing_data_behavior="overwrite_or_ignore",
    )
    rows: int = table.num_rows
    return rows


def runs_digest(run_dirs: list[str]) -> str:
    """16 hex digits naming a set of run directories, whatever their order or repeats."""
    text = "\n".join(sorted(set(run_dirs)))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _first_line(exc: BaseException) -> str:
    """The first line of an exception's message (pyarrow's S3 errors run to several)."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
