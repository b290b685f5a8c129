"""Judging lost offset commits (`commit_lost`, analysis.checks.commits).

Kafka documents an acknowledged offset commit as replicated: “The broker sends a successful
offset commit response to the consumer only after all the replicas of the offsets topic receive
the offsets” (docs/kafka-reliability.md, "Consumer-side delivery"). A lost commit is then
judged as a lost acknowledged write is, by the cell's loss rule: a violation where loss is
forbidden, allowed where it is allowed (an unclean election or a power loss may take the
offsets topic's tail too), unknown where the rule hangs on the ISR the run sampled (the
experiment topic's, not `__consumer_offsets`'s) or says nothing. Where it is forbidden, a
known-bug row that explains `commit_lost` on this release turns it into KNOWN-BUG when a fault
hit a broker while the group committed.
"""

from __future__ import annotations

from typing import Final

from analysis.judge.guarantees import ALLOWED, FORBIDDEN, Guarantee
from analysis.judge.known_bugs import first_shown
from analysis.judge.outcomes import Examples, Finding, Verdict
from analysis.model.anomalies import AnomalyName, Counts, anomaly
from analysis.model.evidence import RunEvidence
from analysis.model.results import Example
from harness.rundir.config import CellConfig

__all__ = ["COMMIT_CITATION", "COMMIT_EVIDENCE", "judge_commits"]

COMMIT_CITATION: Final = (
    "Kafka's documentation (Consumer Offset Tracking): “The broker sends a successful offset "
    "commit response to the consumer only after all the replicas of the offsets topic receive "
    "the offsets”"
)


def broker_fault(events: RunEvidence) -> str:
    """The run's first fault on brokers (a leadership change of `__consumer_offsets` needs
    one), in words; '' when no fault hit a broker."""
    for start in events.fault_starts:
        if start.nodes:
            return f"{start.fault} of {start.target} hit broker(s) {start.nodes}"
    return ""


# The evidence each known-bug row explaining `commit_lost` needs from the run, in words ('' when
# the run does not show it): the test of the known-bug table holds every such row to an entry.
COMMIT_EVIDENCE: Final = {"KAFKA-20634": broker_fault}


def _after(example: Example) -> str:
    """How long after its acknowledgement a lost commit's position was read back, in s."""
    return f"{((example.seen_us or 0) - (example.at_us or 0)) / 1e6:.1f} s"


def judge_commits(
    counts: Counts,
    examples: Examples,
    config: CellConfig,
    guarantee: Guarantee,
    events: RunEvidence,
) -> list[Finding]:
    """The lost commits of a run with a consumer group, judged as the module says; nothing
    when there are none."""
    name = AnomalyName.COMMIT_LOST
    count = counts.get(name, 0)
    if not config.consumers or not count:
        return []
    quoted = tuple(examples.get(name) or ())[:3]
    shown = "; ".join(
        f"p{e.partition}: commit of offset {e.offset} acknowledged, group "
        + ("holds" if e.seen_us is None else f"read {_after(e)} later at")
        + f" {e.committed}"
        for e in quoted
    )
    what = f"consumer group: {count} {anomaly(name).label} ({shown})"
    if guarantee.loss == ALLOWED:
        return [Finding(name, Verdict.PASS, f"{what}; allowed where loss is: {COMMIT_CITATION}")]
    if guarantee.loss != FORBIDDEN:
        detail = f"{what}; not documented under loss rule {guarantee.loss}: {COMMIT_CITATION}"
        return [Finding(name, Verdict.UNKNOWN, detail, quoted)]
    version, client = config.kafka_version, config.client
    found = first_shown(name, version, client, lambda bug: COMMIT_EVIDENCE[bug.reference](events))
    if found is None:
        return [Finding(name, Verdict.VIOLATION, f"{what}: {COMMIT_CITATION}", quoted)]
    bug, evidence = found
    detail = f"{bug.reason(version, client or 'librdkafka')}; {what}; {evidence}"
    return [Finding(name, Verdict.KNOWN_BUG, detail, quoted)]
