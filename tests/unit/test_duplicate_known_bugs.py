"""Known bugs that explain duplicated acknowledged messages (librdkafka#4953): KNOWN-BUG only
for the client family the row names, only where the run shows its evidence, never where
duplicates are allowed anyway."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from analysis.judge.duplicates import DUPLICATE_EVIDENCE
from analysis.judge.findings import judge_duplicates
from analysis.judge.guarantees import guarantee_for
from analysis.judge.known_bugs import KNOWN_BUGS, bugs_explaining, client_kind
from analysis.judge.outcomes import Verdict
from analysis.judge.verdicts import judge_repetition
from analysis.model.anomalies import AnomalyName, CountName
from analysis.model.evidence import RunEvidence
from harness.rundir.config import CellConfig
from tests.unit.results_json import typed
from tests.unit.test_mechanisms import start, us
from tests.unit.verdict_runs import AP, CP, healthy_events, result

LIBRDKAFKA = {**CP, "fault_class": "leader-partition", "kafka_version": "4.3.1"}
JAVA = {**LIBRDKAFKA, "client": "java 4.3.1"}


def phases(workload_from_s: float = 0.0, workload_to_s: float = 44.0) -> list[dict[str, Any]]:
    return [
        {"type": "phase", "ts_us": us(workload_from_s), "phase": "workload-start"},
        {"type": "phase", "ts_us": us(workload_to_s), "phase": "workload-end"},
    ]


def cut(t_s: float) -> dict[str, Any]:
    return start(t_s, [1], fault="partition", target="leader", class_kind="partition")


def duplicates(config: dict[str, Any], events: list[dict[str, Any]], **counts: int):
    """The findings of judge_duplicates for a run with `counts` and `events`."""
    cell = CellConfig.read(config)
    return judge_duplicates(
        Counter(counts), {}, guarantee_for(cell), cell, RunEvidence.coerce(events)
    )


def test_the_row_turns_librdkafka_duplicates_under_a_cut_into_its_known_bug() -> None:
    counts = {AnomalyName.DUPLICATED: 240, CountName.INDETERMINATE: 160}
    (finding,) = duplicates(LIBRDKAFKA, [*phases(), cut(4.0)], **counts)
    assert finding.verdict == Verdict.KNOWN_BUG
    assert finding.detail.startswith("known bug librdkafka#4953 of Kafka 4.3.1 with librdkafka")
    assert "open upstream" in finding.detail
    assert "240 duplicated" in finding.detail and "160 sends ended indeterminate" in finding.detail


def test_the_java_client_keeps_its_duplicates_a_violation() -> None:
    counts = {AnomalyName.DUPLICATED: 240, CountName.INDETERMINATE: 160}
    (finding,) = duplicates(JAVA, [*phases(), cut(4.0)], **counts)
    assert finding.verdict == Verdict.VIOLATION
    assert "librdkafka#4953" not in finding.detail


def test_without_the_evidence_the_duplicates_stay_a_violation() -> None:
    settled = {AnomalyName.DUPLICATED: 3}  # every send answered: no epoch bump to blame
    (no_unsettled,) = duplicates(LIBRDKAFKA, [*phases(), cut(4.0)], **settled)
    unsettled = {AnomalyName.DUPLICATED: 3, CountName.FAILED: 2}
    (no_fault,) = duplicates(LIBRDKAFKA, phases(), **unsettled)
    (fault_after,) = duplicates(LIBRDKAFKA, [*phases(0, 44), cut(50.0)], **unsettled)
    assert no_unsettled.verdict == no_fault.verdict == fault_after.verdict == Verdict.VIOLATION


def test_non_idempotent_runs_keep_their_allowed_duplicates() -> None:
    counts = {AnomalyName.DUPLICATED: 240, CountName.INDETERMINATE: 160}
    config = {**AP, "fault_class": "leader-partition", "kafka_version": "4.3.1"}
    (finding,) = duplicates(config, [*phases(), cut(4.0)], **counts)
    assert finding.verdict == Verdict.PASS and "known bug" not in finding.detail


def test_the_repetition_verdict_is_known_bug_for_librdkafka_and_violation_for_java() -> None:
    def verdict(config: dict[str, Any]) -> Verdict:
        res = result(config, duplicated=5, failed=2)
        return judge_repetition(typed(res), [*healthy_events(res), *phases(), cut(4.0)]).verdict

    assert verdict(LIBRDKAFKA) == Verdict.KNOWN_BUG
    assert verdict(JAVA) == Verdict.VIOLATION


@given(st.sampled_from([None, "librdkafka", "java 4.3.1", "java 2.4.0", "command verifiable"]))
def test_only_the_named_client_family_is_affected(client: str | None) -> None:
    (bug,) = bugs_explaining(AnomalyName.DUPLICATED)
    # Oracle: a librdkafka producer (None is the harness's own librdkafka) on any release.
    expected = client in (None, "librdkafka")
    assert bug.affects("4.3.1", client) == expected == bug.affects("2.8.0", client)
    assert client_kind(client) == (client or "librdkafka").split(" ")[0]


def test_every_duplicates_row_has_its_evidence() -> None:
    rows = {b.reference for b in KNOWN_BUGS if b.explains == AnomalyName.DUPLICATED}
    assert rows and set(DUPLICATE_EVIDENCE) == rows
