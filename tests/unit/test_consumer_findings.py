"""The consumer group's findings word for word: each class judged by its commit mode's rule,
the examples a reason quotes, a rewritten log excusing unprocessed messages, and what stays
unjudged when the group never caught up."""

from __future__ import annotations

from typing import Any

from analysis.judge.findings import judge_consumers
from analysis.judge.guarantees import CONSUMER_DELIVERY
from analysis.judge.outcomes import Finding, Verdict
from analysis.model.anomalies import AnomalyName, anomaly
from analysis.model.evidence import RunEvidence
from analysis.model.results import Example
from harness.rundir.config import CellConfig

UNPROCESSED = AnomalyName.CONSUMER_UNPROCESSED
REPROCESSED = AnomalyName.CONSUMER_REPROCESSED


def _counts(unprocessed: int = 0, reprocessed: int = 0, diverged: int = 0) -> dict[str, int]:
    return {
        UNPROCESSED: unprocessed,
        REPROCESSED: reprocessed,
        AnomalyName.OFFSET_DIVERGENT: diverged,
    }


def _end(**fields: Any) -> RunEvidence:
    event = {"type": "consumers", "ts_us": 1, "caught_up": True, **fields}
    return RunEvidence.coerce([event])


def _config(commit: str = "after-process") -> CellConfig:
    return CellConfig.read({"consumers": 2, "consumer_commit": commit})


EXAMPLES = {
    UNPROCESSED: tuple(Example(msg_id=i, partition=0, offset=10 + i) for i in range(6)),
    REPROCESSED: (Example(msg_id=3, partition=1, offset=7, readback_msg_id_at_offset=4),),
}
UNPROCESSED_TEXT = (
    "; e.g. msg_id 0 at p0@10, msg_id 1 at p0@11, msg_id 2 at p0@12, msg_id 3 at p0@13, "
    "msg_id 4 at p0@14, …"
)


def _what(name: AnomalyName, count: int, examples: str = "") -> str:
    entry = anomaly(name)
    return f"consumer group: {count} {entry.label} ({entry.meaning}{examples})"


def test_at_least_once_forbids_skipping_and_allows_processing_again() -> None:
    rule = CONSUMER_DELIVERY["after-process"]
    findings = judge_consumers(_counts(6, 1), EXAMPLES, _config(), _end())
    unprocessed_label = anomaly(UNPROCESSED).label
    assert findings == [
        Finding(
            UNPROCESSED,
            Verdict.VIOLATION,
            f"{unprocessed_label}: {_what(UNPROCESSED, 6, UNPROCESSED_TEXT)}; {rule.citation}",
            EXAMPLES[UNPROCESSED][:5],
        ),
        Finding(
            REPROCESSED,
            Verdict.PASS,
            f"{_what(REPROCESSED, 1, '; e.g. msg_id 3 at p1@7 (read-back holds msg_id 4)')}; "
            f"allowed: {rule.citation}",
            EXAMPLES[REPROCESSED],
        ),
    ]


def test_nothing_to_judge_passes_naming_the_rule() -> None:
    rule = CONSUMER_DELIVERY["after-process"]
    findings = judge_consumers(_counts(), {}, _config(), _end())
    assert findings == [
        Finding(UNPROCESSED, Verdict.PASS, f"{_what(UNPROCESSED, 0)}; forbidden: {rule.citation}"),
        Finding(REPROCESSED, Verdict.PASS, f"{_what(REPROCESSED, 0)}; allowed: {rule.citation}"),
    ]


def test_at_most_once_forbids_processing_again() -> None:
    rule = CONSUMER_DELIVERY["before-process"]
    findings = judge_consumers(_counts(0, 1), EXAMPLES, _config("before-process"), _end())
    assert findings[0] == Finding(
        UNPROCESSED, Verdict.PASS, f"{_what(UNPROCESSED, 0, UNPROCESSED_TEXT)}; allowed: "
        f"{rule.citation}", EXAMPLES[UNPROCESSED][:5]
    )  # fmt: skip
    assert findings[1].verdict == Verdict.VIOLATION
    assert findings[1].anomaly == REPROCESSED
    assert findings[1].examples == EXAMPLES[REPROCESSED]
    assert findings[1].reason.startswith(f"forbidden {anomaly(REPROCESSED).label}: consumer group")


def test_a_rewritten_log_excuses_skipped_messages() -> None:
    rule = CONSUMER_DELIVERY["after-process"]
    findings = judge_consumers(_counts(2, 0, diverged=3), EXAMPLES, _config(), _end())
    assert findings[0] == Finding(
        UNPROCESSED,
        Verdict.PASS,
        f"{_what(UNPROCESSED, 2, UNPROCESSED_TEXT)}; the log was rewritten under the group (3 "
        f"offsets diverged), which moves records past committed offsets: {rule.citation}",
        EXAMPLES[UNPROCESSED][:5],
    )
    # A rewritten log does not excuse processing a record again.
    findings = judge_consumers(
        _counts(0, 1, diverged=3), EXAMPLES, _config("before-process"), _end()
    )
    assert findings[1].verdict == Verdict.VIOLATION


def test_a_group_that_never_caught_up_leaves_skipping_unjudged() -> None:
    behind = _end(caught_up=False, committed={"0": 4}, end_offsets={"0": 9})
    detail = (
        "the consumer group did not catch up within its time (committed {'0': 4}, end offsets "
        "{'0': 9}): messages past its committed offsets were never judged"
    )
    findings = judge_consumers(_counts(), {}, _config(), behind)
    assert findings[2] == Finding(UNPROCESSED, Verdict.UNKNOWN, detail)
    findings = judge_consumers(_counts(1), {}, _config(), behind)
    assert findings[2] == Finding(UNPROCESSED, Verdict.PASS, detail)
    assert findings[0].verdict == Verdict.VIOLATION
    assert len(judge_consumers(_counts(), {}, _config("before-process"), behind)) == 2


def test_a_group_without_its_end_or_rule_or_journal_is_unknown() -> None:
    assert judge_consumers(_counts(), {}, CellConfig.read({}), _end()) == []
    assert judge_consumers(_counts(), {}, _config(), RunEvidence.coerce([])) == [
        Finding(None, Verdict.UNKNOWN, "no consumers event: where the group's commits ended is "
                "unknown")
    ]  # fmt: skip
    assert judge_consumers(_counts(), {}, _config("sometimes"), _end()) == [
        Finding(None, Verdict.UNKNOWN, "unknown consumer commit mode 'sometimes'")
    ]
    torn = _end(journal_errors=["member 0: torn tail", "member 1: gone"])
    assert judge_consumers(_counts(), {}, _config(), torn) == [
        Finding(
            None,
            Verdict.UNKNOWN,
            "a consumer's journal is incomplete: member 0: torn tail; member 1: gone",
        )
    ]


# ---------------------------------------------------------------------------------------------
# The consumer classes over the messages the read-back holds, on crafted run directories


def test_a_lost_message_the_group_never_processed_is_lost_not_skipped(tmp_path: Any) -> None:
    from tests.unit.reconcile_runs import in_order, write_run
    from tests.unit.test_consumer_check import facts, group_end, journal

    acked, readback = in_order(6)
    del readback[2]  # message 3, at offset 2, is not in the read-back: lost
    run_dir = write_run(tmp_path, "c", acked, readback, events=[group_end({0: 6})])
    journal(run_dir, 0, 0, [(1, 0, 0), (2, 0, 1), (4, 0, 3), (5, 0, 4), (6, 0, 5)])
    counts = facts(run_dir)
    assert counts["lost"] == 1
    assert counts["consumer_unprocessed"] == 0
    assert counts["consumer_reprocessed"] == 0
