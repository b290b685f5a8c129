"""The message check's DataFrame implementation (analysis.spark.messages) behind the one check
interface, so a large run is folded with the same registry of checks as any other."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import SparkSession

from analysis.checks.check import RunFacts
from analysis.checks.history import RunHistory
from analysis.checks.messages.check import MessageCheck
from analysis.spark.messages import check_in_spark

__all__ = ["DataFrameMessages"]


@dataclass(frozen=True)
class DataFrameMessages:
    """The message check (its name and applicability), answered as DataFrame operations."""

    spark: SparkSession
    name: str = MessageCheck.name

    def applies(self, run: RunHistory) -> bool:
        """Where the message check applies: every run."""
        return MessageCheck().applies(run)

    def facts(self, run: RunHistory) -> RunFacts:
        """The message facts of the run, computed in Spark from its files."""
        return check_in_spark(self.spark, run.run)
