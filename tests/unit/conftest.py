"""Fixtures shared by the unit tests."""

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from analysis.reconcile import spark_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local[2] SparkSession (UI off, 4 shuffle partitions) for the whole test session."""
    session = spark_session("local[2]", app_name="kafka-chaos-unit-tests")
    yield session
    session.stop()
