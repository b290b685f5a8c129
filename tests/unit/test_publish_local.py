"""Publishing to a file system by URI without a store or Spark: a report folder copied whole to
a file:// destination, and results datasets appended to a lake there (a report's own files
replaced when its runs are reported again, never another report's)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from analysis.crossrun.dataset import RESULTS_SCHEMA, results_partitioning, write_dataset
from analysis.report.publish import (
    Destination,
    DestinationError,
    append_results,
    destination,
    is_uri,
    publish_folder,
    runs_digest,
)
from tests.unit.report_runs import AP, CP, judge_all, result
from tests.unit.results_json import typed

FIX = (
    "Fix: give a local folder, or a URI pyarrow opens (s3://bucket/prefix, "
    "s3a://bucket/prefix, gs://bucket/prefix, hdfs://namenode:port/path with libhdfs "
    "installed, file:///path)"
)


def test_a_folder_is_copied_whole_and_its_uris_listed_in_order(tmp_path: Path) -> None:
    local = tmp_path / "report"
    (local / "charts" / "deep").mkdir(parents=True)
    (local / "report.md").write_text("# md")
    (local / "charts" / "deep" / "a.svg").write_text("<svg/>")
    (local / "b.json").write_text("{}")
    target = destination((tmp_path / "out").as_uri() + "/")
    assert target.child("x.md") == (tmp_path / "out").as_uri() + "/x.md"
    written = publish_folder(local, target)
    base = (tmp_path / "out").as_uri()
    assert written == [f"{base}/b.json", f"{base}/charts/deep/a.svg", f"{base}/report.md"]
    assert (tmp_path / "out" / "charts" / "deep" / "a.svg").read_text() == "<svg/>"
    assert (tmp_path / "out" / "report.md").read_text() == "# md"
    assert publish_folder(tmp_path / "empty-does-not-exist", target) == []


def test_the_digest_is_sha256_of_the_sorted_distinct_run_dirs() -> None:
    expected = hashlib.sha256(b"a/0\nb/1").hexdigest()[:16]
    assert runs_digest(["b/1", "a/0", "b/1"]) == expected
    assert runs_digest([]) == hashlib.sha256(b"").hexdigest()[:16]


def _dataset(tmp_path: Path, name: str, cells_reps: list[tuple[str, int]]) -> Path:
    raws = [result(cell, AP if cell.startswith("ap") else CP, rep) for cell, rep in cells_reps]
    results = [typed(r) for r in raws]
    return write_dataset(results, judge_all(raws, {}), tmp_path / name)


def _lake(path: Path) -> list[tuple[str, int]]:
    table = ds.dataset(
        path, schema=RESULTS_SCHEMA, partitioning=results_partitioning(), format="parquet"
    ).to_table()
    return sorted(zip(table["cell"].to_pylist(), table["repetition"].to_pylist(), strict=True))


def test_reports_append_to_one_lake_each_replacing_only_its_own_files(tmp_path: Path) -> None:
    lake = destination((tmp_path / "lake").as_uri())
    first = _dataset(tmp_path, "r1", [("ap", 0), ("ap", 1)])
    assert append_results(first, lake) == 2
    assert append_results(first, lake) == 2  # the same runs again: their own files replaced
    assert _lake(tmp_path / "lake") == [("ap", 0), ("ap", 1)]
    second = _dataset(tmp_path, "r2", [("cp", 0)])
    assert append_results(second, lake) == 1
    assert _lake(tmp_path / "lake") == [("ap", 0), ("ap", 1), ("cp", 0)]
    names = sorted(p.name for p in (tmp_path / "lake").rglob("*.parquet"))
    digests = {
        runs_digest(["runs/chaos/ts/ap/0", "runs/chaos/ts/ap/1"]),
        runs_digest(["runs/chaos/ts/cp/0"]),
    }
    assert names == sorted(f"part-{d}-0.parquet" for d in digests)
    empty = tmp_path / "r3" / "results"  # a dataset of no rows: an empty folder
    empty.mkdir(parents=True)
    assert append_results(empty, lake) == 0
    assert _lake(tmp_path / "lake") == [("ap", 0), ("ap", 1), ("cp", 0)]


def test_a_destination_error_names_the_uri_its_first_line_and_the_fix(tmp_path: Path) -> None:
    from analysis.report import publish

    (tmp_path / "f").write_text("x")
    with pytest.raises(DestinationError) as caught:
        destination((tmp_path / "f").as_uri() + "/")
    assert str(caught.value) == f"{(tmp_path / 'f').as_uri()}/ is a file, not a folder. {FIX}"
    with pytest.raises(DestinationError) as caught:
        destination("nope://x/y")
    text = str(caught.value)
    assert text.startswith("cannot open nope://x/y: ") and text.endswith(f". {FIX}")
    assert "\n" not in text
    assert publish._first_line(ValueError("  first\nsecond ")) == "first"
    assert publish._first_line(OSError()) == "OSError"
    assert publish._first_line(OSError("   ")) == "OSError"
    local = destination(str(tmp_path / "rel" / ".." / "lake"))
    assert (local.uri, local.path) == (str(tmp_path / "rel" / ".." / "lake"),
                                       (tmp_path / "lake").as_posix())  # fmt: skip
    uri = destination((tmp_path / "lake").as_uri() + "//")
    assert uri.path == (tmp_path / "lake").as_posix()
    assert publish.is_uri("s3a://b") and publish.is_uri("git+ssh://h/p")
    assert not publish.is_uri("/a://b") and not publish.is_uri("rel/path")
    assert not publish.is_uri("ü://x") and not publish.is_uri("://x")


def test_the_lake_is_partitioned_by_experiment_and_version(tmp_path: Path) -> None:
    lake = destination((tmp_path / "lake").as_uri())
    assert append_results(_dataset(tmp_path, "r1", [("ap", 0), ("cp", 0)]), lake) == 2
    folders = sorted(
        p.relative_to(tmp_path / "lake").as_posix() for p in (tmp_path / "lake").rglob("*.parquet")
    )
    digest = runs_digest(["runs/chaos/ts/ap/0", "runs/chaos/ts/cp/0"])
    assert folders == [f"experiment=chaos/kafka_version=3.9.0/part-{digest}-0.parquet"]
    table = ds.dataset(
        tmp_path / "lake", schema=RESULTS_SCHEMA, partitioning=results_partitioning()
    ).to_table()
    assert set(table["experiment"].to_pylist()) == {"chaos"}
    assert set(table["kafka_version"].to_pylist()) == {"3.9.0"}


def test_the_lake_gets_the_results_schema_whatever_else_the_dataset_holds(
    tmp_path: Path,
) -> None:
    # A dataset whose files carry a column the lake does not know: the lake's files keep
    # RESULTS_SCHEMA's columns (the partition columns are its folders), and only those.
    written = ds.dataset(
        _dataset(tmp_path, "r1", [("ap", 0), ("cp", 0)]),
        schema=RESULTS_SCHEMA,
        partitioning=results_partitioning(),
    ).to_table()
    extra = written.append_column("extra", pa.array(["x"] * written.num_rows))
    ds.write_dataset(extra, tmp_path / "wider", format="parquet",
                     partitioning=results_partitioning())  # fmt: skip
    assert append_results(tmp_path / "wider", destination((tmp_path / "lake").as_uri())) == 2
    (part,) = (tmp_path / "lake").rglob("*.parquet")
    stored = [n for n in RESULTS_SCHEMA.names if n not in ("experiment", "kafka_version")]
    assert pq.read_schema(part).names == stored
    assert _lake(tmp_path / "lake") == [("ap", 0), ("cp", 0)]


def test_a_store_whose_paths_are_not_local_gets_the_files(tmp_path: Path) -> None:
    import pyarrow.fs as pafs

    from analysis.report.publish import Destination

    store = tmp_path / "store"
    store.mkdir()
    filesystem = pafs.SubTreeFileSystem(store.as_posix(), pafs.LocalFileSystem())
    target = Destination("s3://bucket/out", filesystem, "bucket/out")
    local = tmp_path / "report"
    (local / "sub").mkdir(parents=True)
    (local / "sub" / "a.txt").write_text("a")
    assert publish_folder(local, target) == ["s3://bucket/out/sub/a.txt"]
    assert (store / "bucket" / "out" / "sub" / "a.txt").read_text() == "a"
    lake = Destination("s3://bucket/lake", filesystem, "bucket/lake")
    assert append_results(_dataset(tmp_path, "r1", [("ap", 0)]), lake) == 1
    assert _lake(store / "bucket" / "lake") == [("ap", 0)]


# A folder name as a URI or a store path spells it: letters, the mutation-prone X, a dot.
_name = st.text(alphabet="aXx.9", min_size=1, max_size=4)


@pytest.mark.property
@example(["bucket", "X"], 0, "report.html")
@given(st.lists(_name, min_size=1, max_size=4), st.integers(0, 3), _name)
def test_a_child_is_the_folder_uri_one_slash_and_the_name(
    folders: list[str], slashes: int, child: str
) -> None:
    uri = "s3://" + "/".join(folders) + "/" * slashes
    target = Destination(uri, pafs.LocalFileSystem(), "unused")
    assert target.child(child) == f"s3://{'/'.join(folders)}/{child}"


@pytest.mark.property
@example(["a", "b"], 1)
@example(["laX"], 0)
@given(st.lists(_name.filter(lambda n: n.strip(".")), min_size=1, max_size=4), st.integers(0, 3))
def test_a_store_folder_is_its_path_without_trailing_slashes(
    folders: list[str], slashes: int
) -> None:
    # mock:// (pyarrow's in-memory store) keeps a trailing slash in the path it gives, as S3
    # does: the destination's path is the folder's, whatever ends its name.
    found = destination("mock:///" + "/".join(folders) + "/" * slashes)
    assert isinstance(found.filesystem, pafs._MockFileSystem)
    assert found.path == "/".join(folders)


@pytest.mark.property
@example("+://x")  # a scheme of no letter or digit
@example("s3://b/k://x")  # "://" again in the path
@given(st.text(alphabet="aZ9+-.:/ü ", max_size=12))
def test_a_uri_is_a_scheme_of_ascii_letters_digits_and_plus_then_colon_slash_slash(
    text: str,
) -> None:
    oracle = re.match(r"[A-Za-z0-9+]*[A-Za-z0-9][A-Za-z0-9+]*://", text) is not None
    assert is_uri(text) == oracle


def test_a_local_folder_ending_in_x_keeps_its_name(tmp_path: Path) -> None:
    assert destination((tmp_path / "laX").as_uri()).path == (tmp_path / "laX").as_posix()
    assert destination((tmp_path / "laX").as_uri() + "/").path == (tmp_path / "laX").as_posix()


def _arrow_error(call: Callable[[], object]) -> str:
    """The first line of what pyarrow raises for `call` (the reason a destination quotes)."""
    with pytest.raises((ValueError, OSError)) as caught:
        call()
    return str(caught.value).strip().splitlines()[0]


def test_an_unopenable_or_unreachable_store_is_refused_with_pyarrows_reason(
    tmp_path: Path,
) -> None:
    reason = _arrow_error(lambda: pafs.FileSystem.from_uri("nope://x/y"))
    with pytest.raises(DestinationError) as caught:
        destination("nope://x/y")
    assert str(caught.value) == f"cannot open nope://x/y: {reason}. {FIX}"
    # A name longer than the file system allows: opened, but stat() fails (ENAMETOOLONG).
    long = tmp_path / ("n" * 300)
    reason = _arrow_error(lambda: pafs.LocalFileSystem().get_file_info(long.as_posix()))
    assert "too long" in reason
    with pytest.raises(DestinationError) as caught:
        destination(long.as_uri())
    assert str(caught.value) == f"cannot reach {long.as_uri()}: {reason}. {FIX}"


def test_a_relative_local_folder_whose_name_holds_a_colon_is_copied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pyarrow reads "kc:report/x" as a URI of the scheme "kc": the source must be absolute.
    monkeypatch.chdir(tmp_path)
    local = Path("kc:report")
    local.mkdir()
    (local / "report.md").write_text("# md")
    target = destination((tmp_path / "out").as_uri())
    assert publish_folder(local, target) == [(tmp_path / "out").as_uri() + "/report.md"]
    assert (tmp_path / "out" / "report.md").read_text() == "# md"
