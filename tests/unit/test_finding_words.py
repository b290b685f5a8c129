"""The findings' words, spelled out on hand-made counts (no run directory, no partition facts)."""

from __future__ import annotations

from typing import Any

import pytest

from analysis.judge import findings
from analysis.judge.outcomes import Verdict
from analysis.model.anomalies import anomaly
from analysis.model.evidence import RunEvidence
from harness.rundir.config import CellConfig

# ---------------------------------------------------------------------------------------------
# The findings' words, spelled out on hand-made counts (no run directory, no partition facts)


def _judge_words() -> Any:
    from analysis.judge import findings
    from analysis.judge.guarantees import ALLOWED, FORBIDDEN, Guarantee
    from analysis.model.anomalies import COUNT_NAMES
    from analysis.model.evidence import RunEvidence
    from analysis.model.results import Example

    zero = dict.fromkeys(COUNT_NAMES, 0) | {"acked": 100}
    strict = Guarantee(FORBIDDEN, FORBIDDEN, "guaranteed", "CIT", "DUP", "ORD")
    loose = Guarantee(ALLOWED, ALLOWED, "not-guaranteed", "cit", "dup", "ord")
    context = findings.LossContext(RunEvidence.coerce([]), 0.0, {})
    return findings, zero, strict, loose, context, Example


def test_loss_is_described_class_by_class_with_its_first_examples() -> None:
    findings, zero, strict, loose, context, example = _judge_words()
    from analysis.judge.outcomes import Finding

    assert findings.judge_loss(zero, {}, strict, context) == Finding(
        "loss", Verdict.PASS, "no acknowledged message lost: 0 of 100 acked missing (loss "
        "forbidden: CIT)"
    )  # fmt: skip
    lost = tuple(example(msg_id=i, partition=1, offset=i) for i in range(7))
    unseen = (example(msg_id=50, partition=None, offset=None, readback_msg_id_at_offset=None),)
    examples = {"lost": lost, "unseen": unseen}
    counts = zero | {"lost": 7, "unseen": 1}
    what = (
        f"8 of 100 acked missing (7 {anomaly('lost').label}: {anomaly('lost').meaning}; e.g. "
        "msg_id 0 at p1@0, msg_id 1 at p1@1, msg_id 2 at p1@2, msg_id 3 at p1@3, msg_id 4 at "
        f"p1@4, …; 1 {anomaly('unseen').label}: {anomaly('unseen').meaning}; e.g. msg_id 50)"
    )
    quoted = (*lost[:5], *unseen)
    assert findings.judge_loss(counts, examples, strict, context) == Finding(
        "loss", Verdict.VIOLATION, f"loss: {what}; CIT", quoted
    )
    assert findings.judge_loss(counts, examples, loose, context) == Finding(
        "loss", Verdict.EXPECTED_LOSS, f"{what}; loss allowed: cit", quoted
    )
    from analysis.judge.guarantees import UNDOCUMENTED

    unknown = loose.__class__(UNDOCUMENTED, UNDOCUMENTED, UNDOCUMENTED, "cit", "dup", "ord")
    assert findings.judge_loss(counts, examples, unknown, context) == Finding(
        "loss", Verdict.UNKNOWN, f"{what}; loss not documented: cit", quoted
    )
    odd = loose.__class__("sometimes", "allowed", "x", "c", "d", "o")
    with pytest.raises(ValueError, match="unknown loss rule 'sometimes'"):
        findings.judge_loss(counts, examples, odd, context)


def test_divergence_duplicates_order_and_legal_anomalies_in_words() -> None:
    findings, zero, strict, loose, context, example = _judge_words()
    from analysis.judge.outcomes import Finding

    assert findings.judge_divergence(zero, {}, strict, context) == []
    diverged = (example(msg_id=9, partition=0, offset=3, readback_msg_id_at_offset=11),)
    counts = zero | {"offset_divergent": 1}
    rewrite = (
        f"1 {anomaly('offset_divergent').label}: {anomaly('offset_divergent').meaning}; e.g. "
        "msg_id 9 at p0@3 (read-back holds msg_id 11)"
    )
    what = f"1 acknowledged offsets rewritten ({rewrite})"
    examples = {"offset_divergent": diverged}
    assert findings.judge_divergence(counts, examples, strict, context) == [
        Finding("offset_divergent", Verdict.VIOLATION,
                f"acknowledged offset rewritten: {what}; CIT", diverged)
    ]  # fmt: skip
    assert findings.judge_divergence(counts, examples, loose, context) == [
        Finding("offset_divergent", Verdict.PASS, f"{what}; allowed where loss is: cit", diverged)
    ]
    dup = (example(msg_id=4, partition=2, offset=8),)
    counts = zero | {"duplicated": 2, "duplicated_unacked": 3}
    examples = {"duplicated": dup}
    meaning = anomaly("duplicated").meaning
    unacked = anomaly("duplicated_unacked")
    note = (
        f"3 {unacked.label} ({unacked.meaning}): the idempotence guarantee covers acknowledged "
        "messages only"
    )
    assert findings.judge_duplicates(counts, examples, strict) == [
        Finding("duplicated", Verdict.VIOLATION,
                f"duplicates: 2 duplicated ({meaning}; e.g. msg_id 4 at p2@8); DUP", dup),
        Finding("duplicated_unacked", Verdict.PASS, note),
    ]  # fmt: skip
    assert findings.judge_duplicates(counts, examples, loose)[0] == Finding(
        "duplicated", Verdict.PASS, f"2 duplicated ({meaning}; e.g. msg_id 4 at p2@8); allowed: "
        "dup", dup
    )  # fmt: skip
    assert findings.judge_duplicates(zero, {}, strict) == []
    reordered = (example(msg_id=6, partition=1, offset=2),)
    counts = zero | {"reordered": 1}
    what = "1 reordered (read order differs from send order per key; e.g. msg_id 6 at p1@2)"
    assert findings.judge_order(counts, {"reordered": reordered}, strict) == [
        Finding("reordered", Verdict.VIOLATION, f"reordering: {what}; ORD", reordered)
    ]
    assert findings.judge_order(counts, {"reordered": reordered}, loose) == [
        Finding("reordered", Verdict.PASS, f"{what}; allowed: ord", reordered)
    ]
    assert findings.judge_order(zero, {}, strict) == []
    from analysis.judge.guarantees import UNDOCUMENTED

    unknown = loose.__class__(UNDOCUMENTED, UNDOCUMENTED, UNDOCUMENTED, "cit", "dup", "ord")
    assert findings.judge_order(counts, {"reordered": reordered}, unknown) == [
        Finding("reordered", Verdict.UNKNOWN, f"{what}; not documented: ord", reordered)
    ]
    rewritten = zero | {"offset_divergent": 1}
    [undocumented] = findings.judge_divergence(rewritten, {"offset_divergent": diverged}, unknown,
                                               context)  # fmt: skip
    assert undocumented == Finding(
        "offset_divergent", Verdict.UNKNOWN,
        f"1 acknowledged offsets rewritten ({rewrite}); not documented: cit", diverged,
    )  # fmt: skip
    twice = (example(msg_id=5, partition=0, offset=1),)
    counts = zero | {"duplicated": 2, "duplicated_unacked": 1}
    both = {"duplicated": dup, "duplicated_unacked": twice}
    noted = (
        f"1 {unacked.label} ({unacked.meaning}; e.g. msg_id 5 at p0@1): the idempotence "
        "guarantee covers acknowledged messages only"
    )
    undocumented_dup = f"2 duplicated ({meaning}; e.g. msg_id 4 at p2@8); not documented: dup"
    assert findings.judge_duplicates(counts, both, unknown) == [
        Finding("duplicated", Verdict.UNKNOWN, undocumented_dup, dup),
        Finding("duplicated_unacked", Verdict.PASS, noted, twice),
    ]
    legal = zero | {"moved": 2, "phantom": 1, "expired": 0}
    assert findings.legal_anomaly_notes(legal) == [
        Finding("moved", Verdict.PASS, f"2 {anomaly('moved').label}: {anomaly('moved').meaning}"),
        Finding(
            "phantom", Verdict.PASS, f"1 {anomaly('phantom').label}: {anomaly('phantom').meaning}"
        ),
    ]


def test_the_isr_exception_reads_the_samples_before_the_last_fault() -> None:
    findings, zero, *_ = _judge_words()
    from analysis.judge.guarantees import FORBIDDEN_UNLESS_ISR_SHRANK, Guarantee

    rule = Guarantee(FORBIDDEN_UNLESS_ISR_SHRANK, "allowed", "x", "CIT", "d", "o")
    counts = zero | {"lost": 1}

    def judged(events: list[dict[str, Any]], partitions: dict[str, int]) -> Any:
        evidence = findings.LossContext(
            RunEvidence.coerce(events), 1_000_000.0, {"loss": partitions}
        )
        return findings.judge_loss(counts, {}, rule, evidence)

    def sample(ts_us: int, isr: list[int], partition: int = 0) -> dict[str, Any]:
        return {"type": "sample", "ts_us": ts_us,
                "partitions": [{"partition": partition, "leader": isr[0], "isr": isr}]}  # fmt: skip

    # No fault at all: every sample counts, two of them at the same moment.
    shrunk = [sample(3_500_000, [1, 2]), sample(3_500_000, [2], 1), sample(9_000_000, [1])]
    allowed = judged(shrunk, {"1": 1})
    assert allowed.verdict == Verdict.EXPECTED_LOSS
    assert allowed.detail.endswith(
        "; allowed because the ISR had shrunk to the leader before the fault (p1 ISR [2] at "
        "t=2.5 s): CIT"
    )
    # Without partition facts any partition's shrunk ISR will do.
    assert "(p1 ISR [2] at t=2.5 s)" in judged(shrunk, {}).detail
    # t is in seconds of 10^6 µs: 2 250 001 µs after t=0 rounds up.
    assert "(p0 ISR [1] at t=2.3 s)" in judged([sample(3_250_001, [1])], {}).detail
    fault = {"type": "fault_start", "ts_us": 3_000_000, "fault_id": 1, "fault": "kill",
             "nodes": [1], "detail": {}}  # fmt: skip
    violation = judged([*shrunk, fault], {"1": 1, "0": 2})
    assert violation.verdict == Verdict.VIOLATION
    assert violation.detail.endswith(
        "no leader/ISR sample before the last fault shows an ISR of one replica for partition "
        "0, partition 1, so the exception does not apply: CIT"
    )
    unknown = judged([fault], {})
    assert "for an unknown partition, so the exception" in unknown.detail


def test_the_classes_a_check_decides() -> None:
    from analysis.model.anomalies import ANOMALIES, classes_of

    for check in {a.check for a in ANOMALIES}:
        assert classes_of(check) == tuple(a.name for a in ANOMALIES if a.check == check)
    assert "lost" in classes_of(next(a.check for a in ANOMALIES if a.name == "lost"))
    assert "lost" not in classes_of(next(a.check for a in ANOMALIES if a.name == "stuck"))


def test_each_partitions_judgement_is_joined_into_one_reason() -> None:
    from analysis.judge.guarantees import guarantee_for
    from analysis.judge.history import FaultHit, PartitionHistory
    from analysis.model.anomalies import COUNT_NAMES

    config = CellConfig.read(
        {"acks": "1", "min_insync_replicas": 1, "unclean_leader_election": False,
         "enable_idempotence": False, "max_in_flight": 5, "replication_factor": 3,
         "partitions": 2, "fault_class": "leader-kill", "kafka_version": "3.9.0"}
    )  # fmt: skip
    counts = dict.fromkeys(COUNT_NAMES, 0) | {"acked": 100, "lost": 2}
    hit = FaultHit(1, "kill", "kill", "leader", (1,), 2_000_000)
    hit_both = {p: PartitionHistory(p, (hit,), (), ()) for p in (0, 1)}

    def judged(histories: dict[int, PartitionHistory]) -> Any:
        context = findings.LossContext(
            RunEvidence.coerce([]), 0.0, {"loss": {"0": 1, "1": 1}}, config, "r", histories
        )
        return findings.judge_loss(counts, {}, guarantee_for(config), context)

    allowed = judged(hit_both)
    assert allowed.verdict == Verdict.EXPECTED_LOSS
    head, _, partitions = allowed.detail.partition("; allowed by mechanism: ")
    assert head.startswith("2 of 100 acked missing (2 ")
    first, second = partitions.split("; p1: ")
    assert first.startswith("p0: acks=1 truncation: fault 1 (kill) hit node 1, leader of p0, at")
    assert second.startswith("acks=1 truncation: fault 1 (kill) hit node 1, leader of p1, at")
    # One partition's replicas silently corrupted: Kafka documents no outcome, so the loss is
    # unknown, each partition's judgement named.
    corrupt = FaultHit(2, "corrupt", "corruption", "leader", (1,), 2_000_000)
    corruption = guarantee_for(config.model_copy(update={"fault_class": "leader-corruption"}))
    undocumented = judged({0: PartitionHistory(0, (corrupt,), (), ()), 1: hit_both[1]})
    assert undocumented.verdict == Verdict.UNKNOWN
    head, _, partitions = undocumented.detail.partition("; not documented: ")
    assert head == allowed.detail.partition("; allowed by mechanism: ")[0]
    first, second = partitions.split("; p1: ")
    assert first == f"p0: p0 (leader-corruption): {corruption.citation}"
    assert second.startswith("acks=1 truncation: fault 1 (kill) hit node 1, leader of p1, at")
    unexplained = judged({})  # no fault hit either partition: nothing allows the loss
    assert unexplained.verdict == Verdict.VIOLATION
    p0, p1 = unexplained.detail.split("; p1 (none: no fault hit its replicas): ")
    assert p0.startswith("loss: 2 of 100 acked missing (")
    assert p0.endswith("; p0 (none: no fault hit its replicas): " + p1)


def test_partitions_without_roles_or_with_an_unknown_one_are_judged_by_words() -> None:
    from analysis.judge.guarantees import guarantee_for
    from analysis.judge.history import FaultHit, PartitionHistory
    from analysis.model.anomalies import COUNT_NAMES

    def config(version: str) -> CellConfig:
        return CellConfig.read(
            {"acks": "all", "min_insync_replicas": 2, "unclean_leader_election": False,
             "enable_idempotence": True, "max_in_flight": 5, "replication_factor": 3,
             "partitions": 2, "fault_class": "leader-kill", "kafka_version": version}
        )  # fmt: skip

    counts = dict.fromkeys(COUNT_NAMES, 0) | {"acked": 100, "lost": 2, "offset_divergent": 1}
    hit = FaultHit(1, "kill", "kill", "leader", (1,), 2_000_000)
    histories = {0: PartitionHistory(0, (hit,), (), ())}
    cell = config("3.9.0")

    def context(partitions: dict[str, int], cfg: CellConfig) -> findings.LossContext:
        return findings.LossContext(
            RunEvidence.coerce([]), 0.0, {"loss": partitions, "offset_divergent": partitions},
            cfg, "r", histories,
        )  # fmt: skip

    # A message whose partition is unknown: the cell's fault class decides, not the partitions.
    by_class = findings.judge_loss(
        counts, {}, guarantee_for(cell), context({"0": 1, "unknown": 1}, cell)
    )
    assert by_class == findings.judge_loss(counts, {}, guarantee_for(cell), context({}, cell))
    # Rewritten offsets in a partition no fault touched: nothing explains the rewriting.
    [rewritten] = findings.judge_divergence(
        counts, {}, guarantee_for(cell), context({"1": 1}, cell)
    )
    assert rewritten.verdict == Verdict.VIOLATION
    assert rewritten.detail.startswith("acknowledged offset rewritten: 1 acknowledged offsets")
    assert "no documented mechanism explains this rewriting of acknowledged offsets" in (
        rewritten.detail
    )
    # The same on a release with known bugs of failovers (KAFKA-6361, before 2.0): a partition
    # without a history shows none of their evidence.
    old = config("1.1.1")
    lost = findings.judge_loss(counts, {}, guarantee_for(old), context({"1": 2}, old))
    assert lost.verdict == Verdict.VIOLATION
    assert "p1 (none: no fault hit its replicas): no documented mechanism explains this loss" in (
        lost.detail
    )
    # Partitions are judged in number order: p2 before p10.
    ordered = findings.judge_loss(counts, {}, guarantee_for(cell), context({"10": 1, "2": 1}, cell))
    assert ordered.detail.index("p2 (none") < ordered.detail.index("p10 (none")


@pytest.mark.parametrize(
    ("offset", "words"),
    [(12, "msg_id 7 at p0@12"), (None, "msg_id 7 at p0"), (0, "msg_id 7 at p0@0")],
)
def test_an_example_without_an_offset_names_its_partition_alone(
    offset: int | None, words: str
) -> None:
    """acks=0 sends come back with no offset: the reason says the partition, never '@None'."""
    from analysis.model.results import Example

    assert findings._example_one(Example(msg_id=7, partition=0, offset=offset)) == words
