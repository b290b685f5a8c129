"""The message check: reconcile one run's acked.parquet against its readback.parquet, in one
process (analysis.checks.messages.check; the run's other checks are folded beside it by
analysis.checks.run).

A run is the unit of reconciliation (every question is asked within a run), so
analysis.spark.reconcile hands each run to a Spark task and this module answers all of them
with Arrow and numpy: sorts,
binary searches and segment reductions over columns, no per-row Python. The anomaly classes are
those of analysis.model.anomalies, decided as docs/kafka-reliability.md says:

- a *message* is a msg_id sent or read (all records without a msg_id are one message);
- a *record* is one (partition, offset) of the read-back: one record read twice is one record;
- a message's acked location is its acked row's (partition, offset); its holder is the record
  now at that location.

The sensitivity probe is the same reconciliation again, with a seeded set of healthy records
hidden from the read-back: every hidden record must come back as a missing message.
"""

from __future__ import annotations

from typing import Any

from analysis.checks.check import RunFacts, RunInput

__all__ = ["RunFacts", "RunInput", "check_run"]


def __getattr__(name: str) -> Any:
    """`check_run`, the fold of every check (analysis.checks.run), for the callers of the
    message check's former home; imported on first use, as the fold imports this package."""
    if name == "check_run":
        from analysis.checks.run import check_run

        return check_run
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
