"""The message check: what each producer was told against what its read-back holds, one run in
one process (see the package docstring). Its DataFrame implementation
(analysis.spark.messages) answers the same facts behind the same interface."""

from __future__ import annotations

from dataclasses import dataclass

from analysis.checks.check import RunFacts
from analysis.checks.consumers import MAX_EXAMPLES
from analysis.checks.history import RunHistory
from analysis.checks.messages import classes
from analysis.checks.messages.examples import by_partition, examples_of, identity_facts, missing_of
from analysis.checks.messages.probe import run_probe
from analysis.checks.messages.timeline import add_anomaly_seconds, anomaly_seconds
from analysis.model.anomalies import AnomalyName, CountName

__all__ = ["MessageCheck", "message_facts"]


@dataclass(frozen=True)
class MessageCheck:
    """Every run's first check: the sends always, the message classes when it read back."""

    name: str = "messages"

    def applies(self, run: RunHistory) -> bool:
        """Every run: an incomplete one still has its send timeline."""
        return True

    def facts(self, run: RunHistory) -> RunFacts:
        """The message facts of the run (message_facts)."""
        return message_facts(run)


def message_facts(run: RunHistory) -> RunFacts:
    """The send timeline, counts and contract facts; with a complete read-back, every message
    class, the reordered and contradicted records, examples, the loss and divergence by
    partition, the missing messages and the sensitivity probe."""
    seconds, sent, contract = run.sends
    counts, contract = dict(sent), dict(contract)
    if not run.complete:
        return RunFacts(seconds, counts, contract)
    reads, messages, found = run.reads, run.messages, run.found
    loss = classes.loss_mask(found)
    reordered = classes.reordered(reads)
    counts |= {CountName.READ: reads.n} | {
        name: classes.weight(name, mask, messages) for name, mask in found.items()
    }
    counts[AnomalyName.REORDERED] = len(reordered["offset"])
    counts[AnomalyName.INCONSISTENT_OFFSETS] = len(reads.contradicted())
    contract |= identity_facts(messages)
    add_anomaly_seconds(seconds, anomaly_seconds(found, messages))
    examples = examples_of(found, messages, reads, reordered)
    examples[AnomalyName.INCONSISTENT_OFFSETS] = reads.contradiction_rows(MAX_EXAMPLES)
    return RunFacts(
        seconds=seconds,
        counts=counts,
        contract=contract,
        loss_by_partition=by_partition(loss, messages.partition),
        divergence_by_partition=by_partition(
            found[AnomalyName.OFFSET_DIVERGENT], messages.partition
        ),
        examples=examples,
        missing=missing_of(loss, messages),
        sensitivity=run_probe(run.index, run.run, messages, loss, run.progress),
    )
