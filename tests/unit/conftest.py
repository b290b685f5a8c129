"""Fixtures shared by the unit tests."""

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from analysis.engine.reconcile import spark_session
from tests.unit.reconcile_runs import results, runs_root  # noqa: F401  (fixtures, by name)
from tests.unit.report_runs import crafted, rendered  # noqa: F401  (fixtures, by name)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses the Spark session `spark`, so that a run can leave them out
    (`-m "not spark"`: make mutation, whose mutants must each run in seconds)."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local[2] SparkSession (UI off, 4 shuffle partitions) for the whole test session."""
    session = spark_session("local[2]", app_name="kafka-chaos-unit-tests")
    yield session
    session.stop()
