"""What the message check reads of one run and what it learns: the one shape of every check
(analysis.checks.check), and the size up to which a run is checked whole."""

from __future__ import annotations

from analysis.checks.check import RunFacts, RunInput

__all__ = ["CHUNK_ROWS", "RunFacts", "RunInput"]

# Acked rows up to which a run is checked whole in one Spark task: a task holds about this many
# rows and their records, some hundreds of bytes each in numpy, so well under 2 GB; larger runs
# are checked as DataFrame operations, which spill to disk (analysis.spark.messages).
CHUNK_ROWS = 2_000_000
