"""The sensitivity probe: the same reconciliation with a seeded set of healthy records hidden
from the read-back; every hidden record must come back as a missing message."""

from __future__ import annotations

import numpy as np

from analysis.checks.messages import classes
from analysis.checks.messages.columns import CODE, NULL
from analysis.checks.messages.facts import RunInput
from analysis.checks.messages.index import Index, Messages, Progress, messages_of
from analysis.model.results import Sensitivity
from harness.rundir.records import Status

SENSITIVITY_SEED = 20261122


SENSITIVITY_ONE_IN = 997  # besides each partition's tail, about one healthy record in 997


def run_probe(
    index: Index, run: RunInput, messages: Messages, loss: np.ndarray, progress: Progress
) -> Sensitivity:
    """Reconcile the run again with a seeded set of healthy acknowledged records (every
    partition's last one, plus a hashed sample) hidden from its read-back. It passes when every
    hidden record's message is reported missing and nothing else is beyond the run's own loss.

    The run's own `progress` serves: the loss classes split the missing messages whatever the
    read-back proves (tests/unit/test_message_rules.py), so hiding needs no progress of its own."""
    hidden_messages = _records_to_hide(index, messages)
    hidden = np.zeros(index.reads.n, dtype=bool)
    hidden[messages.first_read[hidden_messages]] = True
    probe = messages_of(index, hidden)
    probe_loss = classes.loss_mask(classes.classify(probe, progress, run.log_start))
    removed = len(hidden_messages)
    found = int(np.count_nonzero(probe_loss[hidden_messages]))
    # Never negative: hiding adds no read.
    extra = int(np.count_nonzero(probe_loss)) - int(np.count_nonzero(loss)) - found
    return Sensitivity.of(removed, found, clean=extra == 0)


def _records_to_hide(index: Index, m: Messages) -> np.ndarray:
    """The messages whose one record to hide: healthy (acknowledged, read exactly once, at the
    acked offset when there is one), the last such record of each partition, and a hashed
    sample."""
    healthy = np.flatnonzero(
        (m.status == CODE[Status.OK]) & (m.reads == 1) & ((m.offset == NULL) | m.holds_self)
    )
    record = m.first_read[healthy]
    partition, offset = index.reads.partition[record], index.reads.offset[record]
    # The tail: every record at the highest offset of its partition (a read-back contradicting
    # itself there holds more than one).
    order = np.lexsort((offset, partition))
    tails = np.zeros(len(healthy), dtype=bool)
    if len(order):
        p, o = partition[order], offset[order]
        group = np.cumsum(np.r_[True, p[1:] != p[:-1]]) - 1
        last = np.flatnonzero(np.r_[p[1:] != p[:-1], True])
        tails[order] = o == o[last][group]
    sampled = _seeded_hash(m.msg_id[healthy]) % SENSITIVITY_ONE_IN == 0
    hidden: np.ndarray = healthy[tails | sampled]
    return hidden


def _seeded_hash(values: np.ndarray) -> np.ndarray:
    """A well-mixed 64-bit hash of each value and SENSITIVITY_SEED (splitmix64's finaliser)."""
    with np.errstate(over="ignore"):
        x = values.astype(np.uint64) + np.uint64(SENSITIVITY_SEED) * np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))
