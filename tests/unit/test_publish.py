"""A report published to a URI and a results dataset shared by many reports: the URI rules
(pure), then `kafka-chaos report --out s3a://... --results-to s3a://...` end to end against a
local S3-compatible server (moto's, from PyPI) with real Spark."""

from __future__ import annotations

import json
import shlex
import subprocess
import tempfile
from pathlib import Path

import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from analysis.crossrun.dataset import RESULTS_SCHEMA, results_partitioning
from analysis.report.publish import DestinationError, destination, is_uri, runs_digest
from kafka_chaos.cli import main
from tests.unit.reconcile_runs import in_order, write_run

UNKNOWN_EXIT = 2
segment = st.text(st.characters(codec="ascii", categories=("L", "N")), min_size=1, max_size=8)


@pytest.mark.property
@given(
    st.sampled_from(["s3", "s3a", "gs", "hdfs", "file", "abfs+x"]), st.lists(segment, max_size=4)
)
def test_a_scheme_makes_a_uri_and_a_path_never_does(scheme: str, parts: list[str]) -> None:
    path = "/".join(parts)
    assert is_uri(f"{scheme}://{path}")
    assert not is_uri(path) and not is_uri("/" + path) and not is_uri("./" + path)


@pytest.mark.property
@given(st.lists(segment, max_size=6), st.randoms())
def test_the_runs_digest_names_a_set(runs: list[str], rng) -> None:
    shuffled = runs * 2
    rng.shuffle(shuffled)
    assert runs_digest(shuffled) == runs_digest(runs)
    if set(runs) != set(runs[1:]):
        assert runs_digest(runs[1:]) != runs_digest(runs)


def test_a_local_path_is_a_local_folder(tmp_path: Path) -> None:
    found = destination(str(tmp_path / "lake"))
    assert isinstance(found.filesystem, pafs.LocalFileSystem)
    assert found.path == (tmp_path / "lake").as_posix()


def test_an_unknown_scheme_names_the_uri_and_the_fix() -> None:
    with pytest.raises(DestinationError, match=r"cannot open nope://x/y: .*Fix: give"):
        destination("nope://x/y")


def test_a_file_is_not_a_folder(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(DestinationError, match="is a file, not a folder"):
        destination((tmp_path / "f").as_uri())


def _lake_rows(bucket: str) -> list[dict]:
    s3, path = pafs.FileSystem.from_uri(f"s3://{bucket}/results")
    lake = ds.dataset(
        path, filesystem=s3, schema=RESULTS_SCHEMA, partitioning=results_partitioning()
    )
    return sorted(lake.to_table().to_pylist(), key=lambda row: (row["cell"], row["repetition"]))


def test_report_to_s3a_and_a_shared_lake(
    spark: SparkSession,
    s3_server: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    staging = tmp_path / "tmp"  # the report's staging folders go here, and must be gone after
    staging.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(staging))
    write_run(tmp_path, "cp", *in_order(3), repetition=0)
    write_run(tmp_path, "cp", *in_order(3), repetition=1)
    runs = str(tmp_path / "runs" / "exp" / "*" / "cp")
    out, lake = f"s3a://{s3_server}/reports/nightly", f"s3a://{s3_server}/results"
    # Crafted runs carry no fault events, so their verdict is UNKNOWN: exit 2 whatever the
    # publishing did; what was published is checked below.
    assert main(["report", runs, "--out", out, "--results-to", lake]) == UNKNOWN_EXIT
    printed = capsys.readouterr().out
    assert f"{out}/report.html" in printed and f"{lake} (rows added)" in printed
    s3, _ = pafs.FileSystem.from_uri(f"s3://{s3_server}")
    names = {
        info.path
        for info in s3.get_file_info(pafs.FileSelector(f"{s3_server}/reports", recursive=True))
    }
    assert f"{s3_server}/reports/nightly/report.html" in names
    assert f"{s3_server}/reports/nightly/junit.xml" in names
    assert [(r["cell"], r["repetition"], r["acked"]) for r in _lake_rows(s3_server)] == [
        ("cp", 0, 3),
        ("cp", 1, 3),
    ]
    # Another report adds its runs; the first report's runs reported again replace theirs.
    write_run(tmp_path, "ap", *in_order(4))
    assert (
        main(
            [
                "report",
                str(tmp_path / "runs" / "exp" / "*" / "ap"),
                "--results-to",
                lake,
                "--out",
                str(tmp_path / "r2"),
            ]
        )
        == UNKNOWN_EXIT
    )
    assert (
        main(["report", runs, "--results-to", lake, "--out", str(tmp_path / "r3")]) == UNKNOWN_EXIT
    )
    rows = _lake_rows(s3_server)
    expected = [("ap", 0, 4), ("cp", 0, 3), ("cp", 1, 3)]
    assert [(r["cell"], r["repetition"], r["acked"]) for r in rows] == expected
    assert not list(staging.iterdir())
    # A Spark of the data team's own reads the lake through S3A, set up as spark-s3a prints.
    capsys.readouterr()  # what the reports printed
    assert main(["spark-s3a"]) == 0
    arguments = shlex.split(capsys.readouterr().out)
    assert arguments[0] == "--jars" and "hadoop-aws-" in arguments[1]
    assert _spark_submit_reads(arguments, lake, tmp_path) == [list(row) for row in expected]


READ_LAKE = """
import json, sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
rows = spark.read.parquet(sys.argv[1]).select("cell", "repetition", "acked").collect()
print("ROWS " + json.dumps(sorted([list(row) for row in rows])))
spark.stop()
"""


def _spark_submit_reads(arguments: list[str], lake: str, folder: Path) -> list[list]:
    """The lake's (cell, repetition, acked) rows as pyspark's spark-submit reads them with
    `arguments` in a JVM of its own."""
    import pyspark

    submit = Path(pyspark.__file__).resolve().parent / "bin" / "spark-submit"
    script = folder / "read_lake.py"
    script.write_text(READ_LAKE)
    done = subprocess.run(
        [str(submit), "--master", "local[1]", "--conf", "spark.ui.enabled=false", *arguments,
         str(script), lake],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    found = [line for line in done.stdout.splitlines() if line.startswith("ROWS ")]
    assert done.returncode == 0 and found, done.stderr[-3000:]
    return json.loads(found[0].removeprefix("ROWS "))


def test_an_unreachable_store_fails_before_spark_with_the_fix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_run(tmp_path, "cp", *in_order(3))
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # the discard port: refused
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    code = main(["report", str(tmp_path / "runs"), "--out", "s3a://nobucket/r"])
    err = capsys.readouterr().err
    assert code == 2
    assert "cannot reach s3a://nobucket/r" in err and "Fix:" in err


def test_run_refuses_an_unopenable_results_store_before_any_cluster(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.platform import engine

    def no_engine() -> None:
        raise AssertionError("the engine was touched")

    monkeypatch.setattr(engine, "ensure_engine", no_engine)
    code = main(["run", "experiments/quick.yaml", "--results-to", "nope://x/y"])
    assert code == 2
    assert "cannot open nope://x/y" in capsys.readouterr().err
