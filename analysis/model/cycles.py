"""What the cycle check (analysis.checks.cycles) found: cyclic components of committed
transactions, each with one witness cycle, typed; and the reads a workload may give it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analysis.model.anomalies import AnomalyName
from analysis.model.results import ExampleRows

__all__ = ["CycleFacts", "CyclicComponent", "TxnReads"]


@dataclass(frozen=True)
class TxnReads:
    """What transactions read: transaction `txn[i]` read message `msg_id[i]` (a
    consume-transform-produce workload's, `workload.transactions.reads`); the cycle check
    keeps the reads of committed transactions of messages committed transactions wrote."""

    txn: np.ndarray
    msg_id: np.ndarray


@dataclass(frozen=True)
class CyclicComponent:
    """A strongly connected component of committed transactions (their numbers, ascending) and
    one cycle through it in words: "T12 -ww p0@345-> T13 -ww p1@120-> T12"."""

    txns: tuple[int, ...]
    cycle: str

    def row(self) -> dict[str, object]:
        """Its example row (the registry's CYCLE_WITNESS fields)."""
        return {"txn": self.txns[0], "transactions": len(self.txns), "cycle": self.cycle}


@dataclass(frozen=True)
class CycleFacts:
    """The cyclic components of write order alone (G0) and of write order and reads (G1c)."""

    g0: tuple[CyclicComponent, ...] = ()
    g1c: tuple[CyclicComponent, ...] = ()

    @property
    def counts(self) -> dict[str, int]:
        """The registry's Check.CYCLES classes: transactions in cyclic components."""
        return {
            AnomalyName.G0: sum(len(c.txns) for c in self.g0),
            AnomalyName.G1C: sum(len(c.txns) for c in self.g1c),
        }

    def examples(self, limit: int) -> ExampleRows:
        """Up to `limit` components of each class, lowest transaction first."""
        return {
            AnomalyName.G0: [c.row() for c in sorted(self.g0, key=lambda c: c.txns)[:limit]],
            AnomalyName.G1C: [c.row() for c in sorted(self.g1c, key=lambda c: c.txns)[:limit]],
        }
