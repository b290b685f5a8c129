"""The timed-out commit check: a commit the transaction coordinator refused with
INVALID_TXN_STATE after its transaction outlived its transaction.timeout.ms (the record of
KAFKA-20785).

The coordinator aborts a transaction left open longer than its timeout and bumps the producer
epoch. A commit of it that arrives afterwards is fenced: the documented answer is
PRODUCER_FENCED (always so under transaction version 1, and under version 2 from
apache/kafka#23204), which Kafka's Java client raises as ProducerFencedException, an
ApplicationRecoverableException (KIP-1050): the application makes a new producer and goes on.
INVALID_TXN_STATE is fatal to every client, although the transaction had ended.

A transaction counts when a clause of its journalled error is a commit's (COMMIT_CLAUSE) whose
error is INVALID_TXN_STATE (INVALID_STATE: each client's name for it) and the client held it
open, from begin to end as it journalled them, longer than the cell's
workload.transactions.timeout_ms (spec.json): only then can the coordinator have aborted it on
its own. A commit refused so sooner has other causes (a late
EndTxn of another transaction, KAFKA-17754's kind) and is not this check's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import numpy as np

from analysis.checks.check import RunFacts
from analysis.model.anomalies import AnomalyName
from analysis.model.results import ExampleRow
from harness.rundir.spec import RunSpec
from harness.rundir.transactions import COMMIT_CLAUSE

if TYPE_CHECKING:
    from analysis.checks.history import RunHistory
    from analysis.checks.transactions import Transactions

__all__ = ["TimedOutCommitCheck", "timed_out_commits", "transaction_timeout_ms"]

MAX_EXAMPLES: Final = 20
# A commit clause whose error is the coordinator's INVALID_TXN_STATE (error code 48), as each
# client names it right after the call: librdkafka's and franz-go's code, Java's
# InvalidTxnStateException, aiokafka's InvalidTxnStateError. A commit that failed because a
# send of its transaction did ("commit: errSendFailed: ... INVALID_TXN_STATE") is not one.
INVALID_STATE: Final = re.compile(
    re.escape(COMMIT_CLAUSE) + r"(?:[\w.]+\.)?(?:INVALID_TXN_STATE|InvalidTxnState\w*)\b"
)


def refused_invalid_state(error: str | None) -> bool:
    """Whether a transaction's journalled `error` has a commit clause whose error is
    INVALID_TXN_STATE."""
    return any(INVALID_STATE.match(clause) for clause in (error or "").split("; "))


def timed_out_commits(txns: Transactions, timeout_ms: int) -> list[ExampleRow]:
    """The transactions whose commit was refused with INVALID_TXN_STATE after more than
    `timeout_ms` open, in their order: txn, begin (from_us) and end (to_us)."""
    timed = (txns.began >= 0) & (txns.ended >= 0) & (txns.ended - txns.began > timeout_ms * 1000)
    return [
        {"txn": int(txns.txn[i]), "from_us": int(txns.began[i]), "to_us": int(txns.ended[i])}
        for i in np.flatnonzero(timed).tolist()
        if refused_invalid_state(txns.errors[i])
    ]


def transaction_timeout_ms(spec: RunSpec) -> int | None:
    """The cell's workload.transactions.timeout_ms (None when spec.json does not say it)."""
    transactions = spec.workload.get("transactions")
    value = transactions.get("timeout_ms") if isinstance(transactions, dict) else None
    return int(value) if isinstance(value, int | float) else None


@dataclass(frozen=True)
class TimedOutCommitCheck:
    """Commits refused with INVALID_TXN_STATE after their transaction's timeout."""

    name: str = "timed_out_commits"

    def applies(self, run: RunHistory) -> bool:
        """A complete transactional run whose spec.json gives the transactions' timeout."""
        return run.complete and run.txns is not None and self._timeout(run) is not None

    def facts(self, run: RunHistory) -> RunFacts:
        """The count of such commits and the first of them."""
        timeout = self._timeout(run)
        assert run.txns is not None and timeout is not None, "applies() holds"
        found = timed_out_commits(run.txns, timeout)
        name = AnomalyName.COMMIT_INVALID_STATE
        return RunFacts(counts={name: len(found)}, examples={name: found[:MAX_EXAMPLES]})

    @staticmethod
    def _timeout(run: RunHistory) -> int | None:
        """The run's transaction timeout, from its spec.json (None without a readable one)."""
        return None if run.spec is None else transaction_timeout_ms(run.spec)
