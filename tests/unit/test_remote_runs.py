"""Run directories read from a URI: which run directories a pattern selects (a hypothesis
property against Python's own glob on the same tree), what is copied and what is not, and
`kafka-chaos report s3a://...` end to end against moto's S3 server with real Spark."""

from __future__ import annotations

import glob
import io
import os
import tempfile
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from analysis.report.publish import DestinationError
from analysis.report.remote_runs import local_mirror, select_run_dirs, stage_runs
from harness.rundir import layout
from kafka_chaos.cli import main
from tests.examples import examples
from tests.unit.reconcile_runs import in_order, write_run

UNKNOWN_EXIT = 2
NAMES = ("a", "b", "ab", ".h", "c1")
name = st.sampled_from(NAMES)
pattern_name = st.sampled_from([*NAMES, "*", "?", "a*", "[ab]", "[!a]*", ".*", "**", "*1"])


def _glob_oracle(root: Path, pattern: list[str]) -> set[str]:
    """The run directories local `kafka-chaos report` finds: every folder holding spec.json at
    or under a match of glob.glob(recursive=True)."""
    found = set()
    for match in glob.glob(os.path.join(root, *pattern), recursive=True):
        if Path(match).is_dir():
            for spec in [Path(match) / layout.SPEC, *Path(match).rglob(layout.SPEC)]:
                if spec.is_file():
                    found.add(spec.parent.as_posix())
    return found


@pytest.mark.property
@settings(max_examples=examples(1.5), deadline=None)
@given(
    st.lists(st.lists(name, min_size=0, max_size=4), min_size=1, max_size=6),
    st.lists(pattern_name, min_size=1, max_size=4),
)
def test_a_pattern_selects_the_run_directories_a_local_glob_selects(
    run_dirs: list[list[str]], pattern: list[str]
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        for parts in run_dirs:
            (root.joinpath(*parts)).mkdir(parents=True, exist_ok=True)
            (root.joinpath(*parts) / layout.SPEC).write_text("{}")
        listing = pafs.LocalFileSystem().get_file_info(
            pafs.FileSelector(root.as_posix(), recursive=True)
        )
        files = {info.path: info for info in listing if info.type == pafs.FileType.File}
        selected = select_run_dirs("/".join([root.as_posix(), *pattern]), files)
        assert set(selected) == _glob_oracle(root, pattern)
        assert selected == sorted(selected)


# A URI pattern's names: folder names a URI can spell (a trailing X, a colon that makes
# "k://" inside the path), globs, and "" (a doubled slash).
URI_NAMES = ("a", "b", "X", "aX", "k:", ".h", "b ")
uri_pattern_name = st.sampled_from([*URI_NAMES, "", "*", "?", "*X", "[ab]*", "**"])


@pytest.mark.property
@settings(max_examples=examples(0.5), deadline=None)
@example([["a"], ["b", "k:", "a"]], ["*", "k:", "", "a"])  # "://" after a glob
@example([["k:", "a", "b"], ["a"]], ["k:", "", "a", "*"])  # "://" in the fixed folder
@example([["X", "a"], ["a"]], ["X", "*"])  # the fixed folder ends in X
@example([["a", "X"], ["a", "b"]], ["*", "X"])  # the pattern ends in X
@example([["a", "b "], ["a", "b"]], ["*", "b "])  # the pattern ends in a space
@example([["a", "b"]], ["a", "", "*", ""])  # doubled and trailing slashes
@given(
    st.lists(st.lists(st.sampled_from(URI_NAMES), max_size=3), min_size=1, max_size=5),
    st.lists(uri_pattern_name, min_size=1, max_size=4),
)
def test_a_uri_pattern_stages_the_run_directories_a_local_glob_selects(
    run_dirs: list[list[str]], pattern: list[str]
) -> None:
    fixed = next((i for i, n in enumerate(pattern) if set(n) & set("*?[")), len(pattern))
    assume(not any(" " in name for name in pattern[:fixed]))  # a URI spells no space
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder) / "s" / "t" / "base"  # experiment roots above base hold no files
        for parts in run_dirs:
            base.joinpath(*parts).mkdir(parents=True, exist_ok=True)
            (base.joinpath(*parts) / layout.SPEC).write_text("/".join(parts))
        cache = Path(folder) / "cache"
        expected = sorted(_glob_oracle(base, pattern))
        uri = "/".join([base.as_uri(), *pattern])
        if not expected:
            with pytest.raises(DestinationError, match="no run directory under"):
                stage_runs([uri], cache)
            return
        staged = stage_runs([uri], cache)
        assert staged == [str(local_mirror(cache, "file://", d)) for d in expected]
        for run_dir, copy in zip(expected, staged, strict=True):
            assert (Path(copy) / layout.SPEC).read_text() == (
                Path(run_dir) / layout.SPEC
            ).read_text()


def _journal_of(run_dir: Path) -> None:
    """The journal files a recorder leaves beside acked.parquet."""
    for part in layout.JOURNAL.meta, layout.JOURNAL.sends, layout.JOURNAL.acks:
        (run_dir / part).write_text("journal")


def test_staging_copies_runs_and_roots_but_not_finalized_journals(tmp_path: Path) -> None:
    store = tmp_path / "store"
    done = write_run(store, "cp", *in_order(3))
    _journal_of(done)
    crashed = write_run(store, "ap", *in_order(2))
    _journal_of(crashed)
    (crashed / layout.ACKED).unlink()  # a harness that died before finalize: keep the journal
    root = layout.experiment_run_root(done)
    (root / layout.PROVENANCE).write_text("{}")
    (root / layout.HARNESS_LOG).write_text("log")
    cache = tmp_path / "cache"
    uri = (store / "runs" / "exp").as_uri() + "/*"
    staged = stage_runs([uri, "kept/as/is"], cache)
    mirror = [local_mirror(cache, "file://", p.as_posix()) for p in (crashed, done)]
    assert staged == [str(m) for m in mirror] + ["kept/as/is"]
    copied_done, copied_crashed = mirror[1], mirror[0]
    assert (copied_done / layout.ACKED).read_bytes() == (done / layout.ACKED).read_bytes()
    assert (copied_done / layout.JOURNAL.meta).is_file()
    assert not (copied_done / layout.JOURNAL.sends).exists()
    assert not (copied_done / layout.JOURNAL.acks).exists()
    assert (copied_crashed / layout.JOURNAL.acks).read_text() == "journal"
    assert (layout.experiment_run_root(copied_done) / layout.PROVENANCE).read_text() == "{}"
    assert not list(cache.rglob("*.partial"))
    # The same runs staged again copy nothing: the copies keep the store's size and mtime.
    before = {p: p.stat().st_ino for p in cache.rglob("*") if p.is_file()}
    stage_runs([uri], cache)
    assert {p: p.stat().st_ino for p in cache.rglob("*") if p.is_file()} == before


def test_a_uri_with_no_run_directory_names_it_and_the_fix(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    uri = (tmp_path / "empty").as_uri() + "/*"
    with pytest.raises(DestinationError, match=r"no run directory under .*empty/\*.*Fix:"):
        stage_runs([uri], tmp_path / "cache")


def test_report_reads_runs_from_s3a_as_it_reads_them_locally(
    spark,
    s3_server: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    local = tmp_path / "local"
    for repetition in (0, 1):
        write_run(local, "cp", *in_order(3), repetition=repetition)
    write_run(local, "ap", *in_order(5))
    s3 = pafs.S3FileSystem(endpoint_override=os.environ["AWS_ENDPOINT_URL"])
    pafs.copy_files(
        (local / "runs").as_posix(),
        f"{s3_server}/nightly/runs",
        source_filesystem=pafs.LocalFileSystem(),
        destination_filesystem=s3,
    )
    monkeypatch.setenv("KCHAOS_CACHE_DIR", str(tmp_path / "cache"))
    # Crafted runs carry no fault events: UNKNOWN, exit 2, whichever way they are read.
    assert main(["report", str(local / "runs"), "--out", str(tmp_path / "a")]) == UNKNOWN_EXIT
    from_disk = capsys.readouterr().out
    uri = f"s3a://{s3_server}/nightly/runs/exp/*"
    assert main(["report", uri, "--out", str(tmp_path / "b")]) == UNKNOWN_EXIT
    from_store = capsys.readouterr().out
    assert _table(from_store) == _table(from_disk) and "cp" in _table(from_disk)
    copies = tmp_path / "cache" / "runs" / "s3" / s3_server / "nightly" / "runs"
    assert sorted(p.parent.name for p in copies.rglob(layout.SPEC)) == ["0", "0", "1"]
    missing = f"s3a://{s3_server}/nothing/*"
    assert main(["report", missing, "--out", str(tmp_path / "c")]) == UNKNOWN_EXIT
    assert f"no run directory under {missing}" in capsys.readouterr().err
    assert not (tmp_path / "c").exists()


def _table(printed: str) -> str:
    """The verdict table of a report's output (the lines before the report's paths)."""
    return printed.split("HTML report:")[0]


def test_the_mirror_of_a_store_is_named_by_scheme_s3_for_hadoops_names(tmp_path: Path) -> None:
    cache = tmp_path / "c"
    assert local_mirror(cache, "s3a://b/x", "b/runs/1") == cache / "runs" / "s3" / "b/runs/1"
    assert local_mirror(cache, "S3N://b", "/b/r") == cache / "runs" / "s3" / "b" / "r"
    assert local_mirror(cache, "GS://b", "//b/r") == cache / "runs" / "gs" / "b" / "r"
    assert local_mirror(cache, "file:///x://y", "/x") == cache / "runs" / "file" / "x"
    assert local_mirror(cache, "s3://b", "b") == cache / "runs" / "s3" / "b"


def test_a_pattern_with_a_glob_selects_only_the_runs_it_matches(tmp_path: Path) -> None:
    store = tmp_path / "store"
    cp = write_run(store, "cp", *in_order(2))
    ap = write_run(store, "ap", *in_order(2))
    exp = (store / "runs" / "exp").as_uri()
    cache = tmp_path / "cache"
    assert stage_runs([f"{exp}/*/c*"], cache) == [
        str(local_mirror(cache, "file://", cp.as_posix()))
    ]
    assert stage_runs([f"{exp}/*/a*/"], cache) == [
        str(local_mirror(cache, "file://", ap.as_posix()))
    ]
    assert stage_runs([f"{exp}/"], cache) == [
        str(local_mirror(cache, "file://", p.as_posix())) for p in (ap, cp)
    ]


def test_a_copy_is_made_again_when_the_store_changed_and_keeps_its_time(tmp_path: Path) -> None:
    store = tmp_path / "store"
    run = write_run(store, "cp", *in_order(2))
    spec = run / layout.SPEC
    os.utime(spec, (1_700_000_000, 1_700_000_000))
    uri = (store / "runs" / "exp").as_uri()
    cache = tmp_path / "cache"
    (copy,) = map(Path, stage_runs([uri], cache))
    copied_spec = copy / layout.SPEC
    assert copied_spec.stat().st_mtime == 1_700_000_000  # the store's time, not the copy's
    same_size = spec.read_text().replace("p", "q", 1)
    assert len(same_size) == len(spec.read_text()) and same_size != spec.read_text()
    spec.write_text(same_size)
    os.utime(spec, (1_700_000_060, 1_700_000_060))
    stage_runs([uri], cache)
    assert copied_spec.read_text() == same_size  # same size, another time: copied again
    assert copied_spec.stat().st_mtime == 1_700_000_060
    spec.write_text(same_size + " ")
    os.utime(spec, (1_700_000_060, 1_700_000_060))  # same time, another size: copied again
    stage_runs([uri], cache)
    assert copied_spec.read_text() == same_size + " "


def test_a_doubled_slash_in_a_uri_still_copies_the_runs_it_selects(tmp_path: Path) -> None:
    # The listing spells paths with the doubled slash (a local or HDFS folder, an S3 key); the
    # run directory must be named as the listing names it, or none of its files is copied.
    store = tmp_path / "store"
    run = write_run(store, "cp", *in_order(2))
    (run / "extra.txt").write_text("kept")
    runs = (store / "runs").as_uri()
    for n, pattern in enumerate([f"{runs}//exp", f"{runs}//exp/*", f"{runs}/exp//*//cp/"]):
        cache = tmp_path / f"cache{n}"
        (staged,) = stage_runs([pattern], cache)
        assert staged == str(local_mirror(cache, "file://", run.as_posix())), pattern
        copied = {p.name: p.read_bytes() for p in Path(staged).iterdir()}
        assert copied == {p.name: p.read_bytes() for p in run.iterdir()}, pattern
    files = {"a//b/c/spec.json": None, "a//b/c/x.json": None}
    assert select_run_dirs("a/b/*", files) == ["a//b/c"]
    assert select_run_dirs("/", {"/spec.json": None, "/x/spec.json": None}) == ["/", "/x"]


def test_a_store_whose_paths_are_not_local_is_copied_through_its_file_system(
    tmp_path: Path,
) -> None:
    from analysis.report import remote_runs
    from analysis.report.publish import Destination

    store = tmp_path / "store"
    write_run(store, "cp", *in_order(2))
    # Paths relative to the store's root, as on S3: only the store's file system resolves them.
    filesystem = pafs.SubTreeFileSystem(store.as_posix(), pafs.LocalFileSystem())
    source = Destination("s3a://bucket/runs", filesystem, "runs")
    listing = remote_runs._list(source)
    (run_dir,) = select_run_dirs("runs/exp/*", listing.files)
    copy = remote_runs._copy_run(source, run_dir, listing, tmp_path / "cache")
    assert copy == tmp_path / "cache" / "runs" / "s3" / run_dir
    assert (copy / layout.SPEC).read_bytes() == (store / run_dir / layout.SPEC).read_bytes()
    missing = Destination("s3a://bucket/none", filesystem, "none")
    assert remote_runs._list(missing).files == {}


def test_a_store_that_cannot_be_listed_names_it() -> None:
    from analysis.report import remote_runs
    from analysis.report.publish import Destination

    class Unlistable:
        def get_file_info(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
            raise OSError("denied\nsecond line")

    source = Destination("s3://b/p", Unlistable(), "b/p")  # type: ignore[arg-type]
    with pytest.raises(DestinationError) as caught:
        remote_runs._list(source)
    assert str(caught.value) == "cannot list s3://b/p: denied"


def test_hidden_folders_are_matched_only_by_a_name_starting_with_a_dot(tmp_path: Path) -> None:
    runs = ("a/r", ".h/r", "a/.h/r", "b/c/r", "ab/r", ".h/x/r")
    for run in runs:
        (tmp_path / run).mkdir(parents=True)
        (tmp_path / run / layout.SPEC).write_text("{}")
    files = {(tmp_path / run / layout.SPEC).as_posix(): None for run in runs}
    root = tmp_path.as_posix()
    expected = {
        "*": ["a/.h/r", "a/r", "ab/r", "b/c/r"],
        ".*": [".h/r", ".h/x/r"],
        "**/r": ["a/r", "ab/r", "b/c/r"],
        "a/.h": ["a/.h/r"],
        "?": ["a/.h/r", "a/r", "b/c/r"],
        "[ab]/r": ["a/r"],
        "a/r/deeper": [],
        "x*": [],
    }
    for pattern, found in expected.items():
        selected = select_run_dirs(f"{root}/{pattern}", files)
        assert selected == [f"{root}/{run}" for run in found], pattern
        assert set(selected) == _glob_oracle(tmp_path, pattern.split("/")), pattern
    assert select_run_dirs("root", {"root/spec.json": None, "root/x.json": None}) == ["root"]


def test_a_mirror_path_keeps_its_names_and_a_file_without_a_time_is_copied_once(
    tmp_path: Path,
) -> None:
    from analysis.report import remote_runs
    from analysis.report.publish import Destination

    cache = tmp_path / "c"
    assert local_mirror(cache, "s3://b", "/XY/r") == cache / "runs" / "s3" / "XY" / "r"
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "f").write_text("12345")
    filesystem = pafs.LocalFileSystem()
    source = Destination("file:///s", filesystem, (tmp_path / "s").as_posix())
    info = pafs.FileInfo((tmp_path / "s" / "f").as_posix(), pafs.FileType.File, size=5)
    assert info.mtime is None  # a store that reports no modification time
    target = tmp_path / "copy" / "f"
    remote_runs._copy_file(source, info, target)
    assert target.read_text() == "12345"
    target.write_text("54321")  # same size and no time to compare: not copied again
    remote_runs._copy_file(source, info, target)
    assert target.read_text() == "54321"
    target.write_text("1")
    remote_runs._copy_file(source, info, target)
    assert target.read_text() == "12345"


def test_local_patterns_pass_through_around_the_uris(tmp_path: Path) -> None:
    store = tmp_path / "store"
    run = write_run(store, "cp", *in_order(2))
    uri = (store / "runs" / "exp").as_uri()
    cache = tmp_path / "cache"
    mirrored = str(local_mirror(cache, "file://", run.as_posix()))
    assert stage_runs(["a/*", uri, "b", uri + "/*"], cache) == ["a/*", mirrored, "b", mirrored]
    (tmp_path / "empty").mkdir()
    empty = (tmp_path / "empty").as_uri()
    with pytest.raises(DestinationError) as caught:
        stage_runs([empty + "/x*"], cache)
    assert str(caught.value) == (
        f"no run directory under {empty}/x* (a run directory holds spec.json and acked.parquet "
        "or a journal). Fix: name the folder the runs were copied to, e.g. "
        "s3a://bucket/runs/<experiment>/<timestamp>, or a parent of it"
    )


class _CutShort(pafs.FileSystemHandler):
    """A local store whose reads fail after their first bytes: a download cut short."""

    def __init__(self) -> None:
        self.local = pafs.LocalFileSystem()

    def get_type_name(self) -> str:
        return "cut-short"

    def normalize_path(self, path: str) -> str:
        return path

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        return self.local.get_file_info(paths)

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        return self.local.get_file_info(selector)

    def open_input_stream(self, path: str) -> pa.NativeFile:
        class Failing(io.BytesIO):
            def read(self, size: int | None = -1) -> bytes:
                if self.tell():
                    raise OSError("connection reset")
                return super().read(2)

        return pa.PythonFile(Failing(Path(path).read_bytes()), mode="r")

    open_input_file = open_input_stream

    def _unused(self, *args: object) -> None:
        raise NotImplementedError

    copy_file = create_dir = delete_dir = delete_dir_contents = delete_file = _unused
    delete_root_dir_contents = move = open_append_stream = open_output_stream = _unused


def test_a_copy_cut_short_is_left_as_a_partial_file_and_completed_next_time(
    tmp_path: Path,
) -> None:
    from analysis.report import remote_runs
    from analysis.report.publish import Destination

    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "f").write_text("12345")
    info = pafs.LocalFileSystem().get_file_info((tmp_path / "s" / "f").as_posix())
    target = tmp_path / "copy" / "f"
    cut = Destination("s3://b/s", pafs.PyFileSystem(_CutShort()), (tmp_path / "s").as_posix())
    with pytest.raises(OSError, match="connection reset"):
        remote_runs._copy_file(cut, info, target)
    # Never a whole-looking copy: what arrived is in `f.partial`, beside no `f`.
    assert sorted(p.name for p in target.parent.iterdir()) == ["f.partial"]
    whole = replace(cut, filesystem=pafs.LocalFileSystem())
    remote_runs._copy_file(whole, info, target)
    assert [p.name for p in target.parent.iterdir()] == ["f"]
    assert target.read_text() == "12345"


def test_a_relative_cache_named_like_a_scheme_is_a_local_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "store"
    run = write_run(store, "cp", *in_order(2))
    monkeypatch.chdir(tmp_path)  # KCHAOS_CACHE_DIR=kc:cache: pyarrow takes "kc:" for a scheme
    (staged,) = stage_runs([(store / "runs" / "exp").as_uri()], Path("kc:cache"))
    assert staged == str(local_mirror(Path("kc:cache"), "file://", run.as_posix()))
    assert (tmp_path / staged / layout.SPEC).read_bytes() == (run / layout.SPEC).read_bytes()
