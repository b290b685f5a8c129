"""Test your own producer under the harness's faults, from pytest.

The pytest plugin (kafka_chaos.pytest_plugin, loaded through the `pytest11` entry point)
gives the fixtures; this package holds what they hand out, one role per module:

- chaos.py: `Chaos`, one test's run (the `kafka_chaos` fixture): its topic on the session's
  cluster, `journal(config)`, `inject(...)`, `heal()` and `judge()`;
- journal.py: `ChaosJournal`, the test's sends and delivery reports in the harness's journal
  (`message()`, `value(msg_id, key)`, `on_delivery`, `wrap(callback)`), and `ChaosMessage`;
- faults.py: `FaultHandle`, one injected fault (`heal()`, `nodes`; a context manager);
- verdict.py: `ChaosVerdict` (`verdict`, `ok`, `loss`, `acked`, `reasons`, `run_dir`,
  `report`) and `Verdict`, judged by the analysis `kafka-chaos report` runs;
- options.py: `ChaosOptions`, the cluster and topic a test asks for (marker and options);
- producer_config.py: the test's producer settings as the experiment's producer section;
- clusters.py: `ClusterPool`, the session's clusters, started once and always removed;
- chaos_cluster.py: `KafkaChaosCluster`, the cluster as a Testcontainers-style module for any
  test suite (builders, `network` for the team's own containers, roles, faults, runs);
- errors.py: `ChaosUsageError` (what the test asked is wrong) and `ChaosError` (the run
  failed).

Names are imported on first use, so loading the plugin costs no Kafka, Docker or Spark import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafka_chaos.testing.chaos import Chaos
    from kafka_chaos.testing.chaos_cluster import KafkaChaosCluster
    from kafka_chaos.testing.clusters import ClusterPool
    from kafka_chaos.testing.errors import ChaosError, ChaosUsageError
    from kafka_chaos.testing.faults import FaultHandle
    from kafka_chaos.testing.journal import ChaosJournal, ChaosMessage
    from kafka_chaos.testing.options import ChaosOptions
    from kafka_chaos.testing.verdict import ChaosVerdict, Verdict

__all__ = [
    "Chaos",
    "ChaosError",
    "ChaosJournal",
    "ChaosMessage",
    "ChaosOptions",
    "ChaosUsageError",
    "ChaosVerdict",
    "ClusterPool",
    "FaultHandle",
    "KafkaChaosCluster",
    "Verdict",
]

_HOMES = {
    "Chaos": "chaos",
    "ChaosError": "errors",
    "ChaosJournal": "journal",
    "ChaosMessage": "journal",
    "ChaosOptions": "options",
    "ChaosUsageError": "errors",
    "ChaosVerdict": "verdict",
    "ClusterPool": "clusters",
    "FaultHandle": "faults",
    "KafkaChaosCluster": "chaos_cluster",
    "Verdict": "verdict",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
