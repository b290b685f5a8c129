"""Fixtures shared by the unit tests."""

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow.fs as pafs
import pytest
from pyspark.sql import SparkSession

from analysis.spark.reconcile import spark_session
from tests.unit.reconcile_runs import results, runs_root  # noqa: F401  (fixtures, by name)
from tests.unit.report_runs import crafted, rendered  # noqa: F401  (fixtures, by name)

# What mutmut recorded of each test's duration in its first, clean pass (in mutants/, the
# directory a mutant's tests run in).
MUTMUT_STATS = Path("mutmut-stats.json")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses the Spark session `spark`, so that a run can leave them out
    (`-m "not spark"`: make mutation, whose mutants must each run in seconds). Under a mutant,
    run the fastest tests first."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
    mutant = os.environ.get("MUTANT_UNDER_TEST", "")
    if "__mutmut_" in mutant and MUTMUT_STATS.is_file():
        seconds = json.loads(MUTMUT_STATS.read_text("utf-8"))["duration_by_test"]
        fastest_first(items, seconds, golden_first=mutant.startswith("analysis.report."))


# The golden reports (test_report_golden.py) see every change to what a report shows.
GOLDEN_TESTS = "tests/unit/test_report_golden.py::"


def fastest_first(
    items: list[pytest.Item], seconds: dict[str, float], golden_first: bool = False
) -> None:
    """Order `items` by the seconds each took in the clean pass, fastest first (unknown last);
    with `golden_first`, the golden reports before them.

    mutmut runs a mutant's tests with -x in the order it lists them, which is a set's: a
    mutant that the 0.01 s test kills waited for the 5 s tests listed before it. Most mutants
    are killed, so most mutants now end at their fastest killing test. A mutant of the report's
    rendering is nearly always killed by a golden report and by few other tests: it would
    first wait for every faster test of the report."""

    def key(item: pytest.Item) -> tuple[bool, float]:
        late = not (golden_first and item.nodeid.startswith(GOLDEN_TESTS))
        return late, seconds.get(item.nodeid, float("inf"))

    items.sort(key=key)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local[2] SparkSession (UI off, 4 shuffle partitions) for the whole test session."""
    session = spark_session("local[2]", app_name="kafka-chaos-unit-tests")
    yield session
    session.stop()


@pytest.fixture
def s3_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A moto S3 server on 127.0.0.1 with a bucket 'lake'; the AWS variables point at it."""
    from moto import server  # a dev dependency: missing, the test fails rather than skips

    moto = server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    for name, value in {
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": f"http://{host}:{port}",
    }.items():
        monkeypatch.setenv(name, value)
    s3 = pafs.S3FileSystem(
        endpoint_override=os.environ["AWS_ENDPOINT_URL"], allow_bucket_creation=True
    )
    s3.create_dir("lake")
    yield "lake"
    moto.stop()
