"""Verdicts by partition and mechanism: the roles each faulted node had for each partition,
the mechanism that explains a loss (with its evidence), and known bugs by version; on crafted
events and broker-log lines, no Docker, no Spark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from analysis.judge import verdicts
from analysis.judge.broker_logs import log_evidence
from analysis.judge.history import FaultHit, partition_fault_class, partition_histories
from analysis.judge.outcomes import Verdict
from analysis.judge.verdicts import DEFAULT_FAIL_ON, exit_code
from harness.rundir import layout
from tests.unit.results_json import typed
from tests.unit.verdict_runs import (
    AP,
    CP,
    MIN1,
    T0_US,
    healthy_events,
    judge_repetition,
    result,
)

# Three partitions on brokers 1-3: node 3 follows p0 and leads p2.
ROLES = [
    {"partition": 0, "leader": 1, "isr": [1, 2, 3], "replicas": [1, 2, 3]},
    {"partition": 1, "leader": 2, "isr": [2, 3, 1], "replicas": [2, 3, 1]},
    {"partition": 2, "leader": 3, "isr": [3, 1, 2], "replicas": [3, 1, 2]},
]


def us(t_s: float) -> int:
    return T0_US + int(t_s * 1e6)


def start(
    t_s: float, nodes: list[int], fault: str = "pause", fault_id: int = 1, **extra: Any
) -> dict[str, Any]:
    """A fault_start with the roles snapshot the nemesis records."""
    return {
        "type": "fault_start",
        "ts_us": us(t_s),
        "fault_id": fault_id,
        "fault": fault,
        "class_kind": extra.pop("class_kind", fault),
        "whole_cluster": False,
        "target": "follower",
        "nodes": nodes,
        "partitions": extra.pop("partitions", ROLES),
        **extra,
    }


def sample(t_s: float, states: list[tuple[int, int | None, list[int]]]) -> dict[str, Any]:
    return {
        "type": "sample",
        "ts_us": us(t_s),
        "partitions": [{"partition": p, "leader": leader, "isr": isr} for p, leader, isr in states],
    }


def judged(config: dict[str, Any], events: list[dict[str, Any]], **loss_by_partition: int):
    """The repetition verdict of a run that lost `loss_by_partition` (p0=5 → partition 0)."""
    losses = {name.removeprefix("p"): count for name, count in loss_by_partition.items()}
    res = result(config, lost=sum(losses.values()), loss_by_partition=losses)
    return judge_repetition(res, events)


def judged_with_logs(
    tmp_path: Path,
    logs: dict[str, str],
    config: dict[str, Any],
    events: list[dict[str, Any]],
    **loss_by_partition: int,
):
    """Like `judged`, for a run directory in tmp_path whose broker-logs/ holds `logs`."""
    folder = tmp_path / layout.BROKER_LOGS
    folder.mkdir()
    for name, text in logs.items():
        (folder / name).write_text(text)
    losses = {name.removeprefix("p"): count for name, count in loss_by_partition.items()}
    res = result(config, lost=sum(losses.values()), loss_by_partition=losses)
    res["run_dir"] = str(tmp_path)
    return judge_repetition(res, events)


# --- roles by partition ----------------------------------------------------------------------


def test_a_follower_pause_that_led_another_partition_explains_its_acks1_loss():
    """The issue's case: "the follower of p0" also led p2, which lost in the acks=1 way."""
    rep = judged({**AP, "fault_class": "follower-pause"}, [start(10, [3])], p2=2204)
    assert rep.verdict == Verdict.EXPECTED_LOSS
    (reason,) = [r for r in rep.reasons if "2204 of" in r]
    assert "p2: acks=1 truncation: fault 1 (pause) hit node 3, leader of p2, at t=10.0 s" in reason


def test_a_loss_where_the_node_only_followed_is_a_violation_naming_the_roles():
    rep = judged({**AP, "fault_class": "follower-pause"}, [start(10, [3])], p0=7)
    assert rep.verdict == Verdict.VIOLATION
    (violation,) = rep.violations
    assert "p0 (follower-pause: fault 1 (pause) on follower [3] at t=10.0 s)" in violation
    assert "no documented mechanism explains this loss" in violation


def test_a_loss_during_a_reassignment_names_the_reassignment_as_the_mechanism():
    moved = start(10, [1], fault="reassign", target="leader")
    rep = judged({**AP, "fault_class": "leader-reassign"}, [moved], p0=40)
    assert rep.verdict == Verdict.EXPECTED_LOSS
    (reason,) = [r for r in rep.reasons if "40 of" in r]
    assert (
        "p0: acks=1 truncation during a reassignment (fault 1 (reassign) moving p0's replicas "
        "off node(s) [1] at t=10.0 s): fault 1 (reassign) hit node 1, leader of p0" in reason
    )
    rep = judged({**CP, "fault_class": "leader-reassign"}, [moved], p0=40)
    assert rep.verdict == Verdict.VIOLATION
    (violation,) = rep.violations
    assert "no documented mechanism explains this loss during a reassignment (fault 1" in violation
    # Without a reassignment, nothing is said of one.
    rep = judged({**AP, "fault_class": "leader-pause"}, [start(10, [1])], p0=40)
    assert not any("reassignment" in r for r in rep.reasons)


def test_a_partition_no_fault_touched_cannot_lose():
    rep = judged({**AP, "fault_class": "node-pause"}, [start(10, [3], partitions=ROLES[:1])], p1=3)
    assert rep.verdict == Verdict.VIOLATION
    assert "no fault hit its replicas" in rep.violations[0]


def test_the_isr_shrink_is_quoted_from_the_leader_log(tmp_path):
    line = "INFO [Partition chaos-0 broker=1] Shrinking ISR from 1,2,3 to 1. Leader: (hw: 9)\n"
    events = [sample(5, [(0, 1, [1])]), start(10, [1], fault="kill")]
    config = {**MIN1, "fault_class": "leader-kill"}
    rep = judged_with_logs(tmp_path, {"kafka-1.log": line}, config, events, p0=4)
    assert rep.verdict == Verdict.EXPECTED_LOSS
    assert any(
        "log: kafka-1: INFO [Partition chaos-0 broker=1] Shrinking ISR" in r for r in rep.reasons
    )


def test_acks_all_min_insync_1_needs_the_isr_alone_before_the_leader_fault():
    alone = [sample(5, [(0, 1, [1])]), start(10, [1], fault="kill")]
    rep = judged({**MIN1, "fault_class": "leader-kill"}, alone, p0=40)
    assert rep.verdict == Verdict.EXPECTED_LOSS
    assert any(
        "acknowledged by the leader alone: p0's ISR was [1] at t=5.0 s" in r for r in rep.reasons
    )
    full = [sample(5, [(0, 1, [1, 2, 3])]), start(10, [1], fault="kill")]
    assert judged({**MIN1, "fault_class": "leader-kill"}, full, p0=40).verdict == Verdict.VIOLATION


def test_the_leader_alone_must_be_the_leader_the_fault_hit():
    """Followers killed (one led p1), the ISR down to node 2, then node 2 killed."""
    events = [
        start(5, [1, 3], fault="kill"),
        sample(12, [(0, 2, [2]), (1, 2, [2])]),
        start(20, [2], fault="kill", fault_id=2, partitions=[
            {**ROLES[0], "leader": 2, "isr": [2]}, {**ROLES[1], "leader": 2, "isr": [2]}
        ]),
    ]  # fmt: skip
    rep = judged({**MIN1, "fault_class": "mixed"}, events, p0=30, p1=20)
    assert rep.verdict == Verdict.EXPECTED_LOSS, rep.reasons
    assert any("then fault 2 (kill) hit that leader at t=20.0 s" in r for r in rep.reasons)
    alone_elsewhere = [events[0], sample(12, [(0, 3, [3])]), events[2]]
    assert judged({**MIN1}, alone_elsewhere, p0=30).verdict == Verdict.VIOLATION


def test_an_unclean_election_is_named_with_the_node_and_the_isr_it_skipped():
    events = [
        start(5, [2, 3], fault="kill"),
        start(20, [1], fault="kill", fault_id=2, partitions=[{**ROLES[0], "isr": [1]}]),
        sample(19, [(0, 1, [1])]),
        sample(30, [(0, 2, [2])]),
    ]
    config = {**MIN1, "unclean_leader_election": True, "fault_class": "mixed"}
    rep = judged(config, events, p0=900)
    assert rep.verdict == Verdict.EXPECTED_LOSS
    assert any(
        "unclean election: node 2 became leader of p0 at t=30.0 s though the last ISR seen was [1]"
        in r
        for r in rep.reasons
    )


def test_an_unclean_election_no_sample_saw_is_quoted_from_the_controller_log(tmp_path):
    line = (
        "[2026] INFO [QuorumController id=101] UNCLEAN partition change for chaos-0 with topic "
        "ID x: isr: [] -> [1], leader: -1 -> 1\n"
    )
    config = {**MIN1, "unclean_leader_election": True, "fault_class": "mixed"}
    events = [start(5, [2, 3], fault="kill"), start(20, [1], fault="kill")]
    rep = judged_with_logs(tmp_path, {"controller-101.log": line}, config, events, p0=900)
    assert rep.verdict == Verdict.EXPECTED_LOSS
    assert any(
        "unclean election of p0, logged as controller-101: [2026] INFO [QuorumController id=101]"
        " UNCLEAN partition change for chaos-0" in r
        for r in rep.reasons
    )


def test_runs_without_roles_keep_the_cell_class():
    old = {k: v for k, v in start(10, [3]).items() if k != "partitions"}
    rep = judged({**AP, "fault_class": "follower-pause"}, [old], p2=5)
    assert rep.verdict == Verdict.VIOLATION  # the cell's class: follower pause, none expected
    assert "no documented mechanism" not in rep.violations[0]


# --- known bugs ---------------------------------------------------------------------------------


def hw_truncation_events() -> list[dict[str, Any]]:
    return [
        sample(5, [(0, 1, [1, 2, 3])]),
        start(8, [1], fault="kill", target="leader"),
        sample(15, [(0, 3, [3, 2])]),
    ]


def test_a_forbidden_loss_on_0_10_is_the_known_hw_truncation_bug_with_its_log_line(tmp_path):
    logs = {
        "kafka-1.log": "[2026] INFO Truncating log chaos-0 to offset 0.\n",
        "kafka-3.log": "[2026] INFO Truncating log chaos-10 to offset 9. (kafka.log.Log)\n"
        "[2026] INFO Truncating log chaos-0 to offset 4521. (kafka.log.Log)\n",
    }
    config = {**CP, "enable_idempotence": False, "kafka_version": "0.10.2.2"}
    rep = judged_with_logs(tmp_path, logs, config, hw_truncation_events(), p0=12)
    assert rep.verdict == Verdict.KNOWN_BUG and rep.violations == ()
    (reason,) = [r for r in rep.reasons if "KAFKA-1211" in r]
    assert "of Kafka 0.10.2.2 (fixed in 0.11.0)" in reason
    assert "leader moved p0 1→3 at t=15.0 s" in reason
    assert "log: kafka-3: [2026] INFO Truncating log chaos-0 to offset 4521." in reason


@pytest.mark.parametrize("version", ["0.11.0.3", "3.9.1", "4.3.1", None])
def test_the_same_loss_after_the_fix_is_a_violation(version: str | None):
    config = {**CP, "enable_idempotence": False, "kafka_version": version}
    rep = judged(config, hw_truncation_events(), p0=12)
    assert rep.verdict == Verdict.VIOLATION


def test_two_fast_failovers_on_1_1_are_kafka_6361():
    events = [*hw_truncation_events(), sample(20, [(0, 2, [2])])]
    config = {**CP, "enable_idempotence": False, "kafka_version": "1.1.1"}
    rep = judged(config, events, p0=3)
    assert rep.verdict == Verdict.KNOWN_BUG
    assert any("KAFKA-6361" in r and "then p0 3→2 at t=20.0 s" in r for r in rep.reasons)


def end(t_s: float, fault_id: int) -> dict[str, Any]:
    return {"type": "fault_end", "ts_us": us(t_s), "fault_id": fault_id}


def test_log_evidence_names_the_partition_exactly(tmp_path):
    logs = tmp_path / layout.BROKER_LOGS
    logs.mkdir()
    (logs / "kafka-1.log").write_text("Truncating log chaos-12 to offset 3\n")
    assert log_evidence(str(tmp_path), "chaos", 1, ["Truncating"]) == ""
    assert log_evidence(str(tmp_path), "chaos", 12, ["Truncating"]).startswith("kafka-1: ")
    assert log_evidence(str(tmp_path / "nowhere"), "chaos", 1, ["Truncating"]) == ""


def test_known_bug_folds_between_unknown_and_expected_loss_and_exits_0_unless_asked():
    config = {**CP, "enable_idempotence": False, "kafka_version": "0.10.2.2"}
    lossy = result(config, rep=0, lost=5, loss_by_partition={"0": 5})
    clean = result(config, rep=1)
    events = {lossy["run_dir"]: hw_truncation_events(), clean["run_dir"]: []}
    events = {k: [*v, *healthy_events(lossy)] for k, v in events.items()}
    cell = verdicts.judge_cell([typed(lossy), typed(clean)], events)
    assert cell.verdict == Verdict.KNOWN_BUG
    assert cell.reasons[0].startswith("a known bug of this release showed in 1 of 2")
    assert (
        exit_code([cell]) == 0
        and exit_code([cell], fail_on=DEFAULT_FAIL_ON | {Verdict.KNOWN_BUG}) == 1
    )


# --- fault classes from roles ---------------------------------------------------------------


def hit(role: str, kind: str = "kill") -> FaultHit:
    return FaultHit(1, kind, kind, role, (1,), T0_US)


@pytest.mark.parametrize(
    ("hits", "expected"),
    [
        ([], "none"),
        ([hit("leader")], "leader-kill"),
        ([hit("follower"), hit("follower", "pause")], "follower-kill"),
        ([hit("follower"), hit("leader")], "mixed"),
        ([hit("leader"), hit("all", "power-loss")], "all-power-loss"),
        ([hit("leader"), hit("leader")], "leader-kill"),
        ([hit("leader"), FaultHit(2, "kill", "kill", "leader", (2,), T0_US)], "mixed"),
    ],
)
def test_partition_fault_class(hits: list[FaultHit], expected: str):
    assert partition_fault_class(hits) == expected


def test_histories_give_each_partition_the_role_its_replicas_had():
    histories = partition_histories([start(10, [3]), sample(11, [(2, 1, [1, 2])])])
    assert histories is not None
    assert [h.role for h in histories[0].hits] == ["follower"]
    assert [h.role for h in histories[2].hits] == ["leader"]
    assert histories[2].samples[0].isr == (1, 2)


def test_a_whole_cluster_fault_hits_every_partition_as_all():
    event = start(3, [1, 2, 3], fault="power-loss", whole_cluster=True)
    histories = partition_histories([event])
    assert histories is not None
    assert {h.fault_class for p in histories.values() for h in p.hits} == {"all-power-loss"}


def test_a_fault_targeting_all_brokers_hits_every_partition_as_all_in_older_runs_too():
    """A run of before the nemesis marked target-all faults whole_cluster: a power loss of
    every broker was judged a leader's power loss, and its allowed loss a violation."""
    event = start(3, [1, 2, 3], fault="lose-unsynced", class_kind="power-loss", target="all")
    histories = partition_histories([event])
    assert histories is not None
    assert {h.fault_class for p in histories.values() for h in p.hits} == {"all-power-loss"}
    config = {**CP, "fault_class": "all-power-loss"}
    rep = judged(config, [event], p0=300, p1=20)
    assert rep.verdict == Verdict.EXPECTED_LOSS, rep.reasons


def test_no_history_without_the_roles_snapshot():
    event = {k: v for k, v in start(3, [1]).items() if k != "partitions"}
    assert partition_histories([event]) is None


def test_a_known_bug_cell_renders_everywhere_with_its_jira(tmp_path):
    from xml.etree import ElementTree as ET

    from analysis.judge.outcomes import VERDICT_MEANING
    from analysis.report.junit import write_junit
    from analysis.report.render import render_report

    config = {**CP, "enable_idempotence": False, "kafka_version": "0.10.2.2"}
    lossy = result(config, lost=5, loss_by_partition={"0": 5})
    events = {lossy["run_dir"]: [*hw_truncation_events(), *healthy_events(lossy)]}
    cells = verdicts.judge_all([typed(lossy)], events)
    paths = render_report(cells, [typed(lossy)], events, (), tmp_path, "Old Kafka")
    word, meaning = Verdict.KNOWN_BUG.value, VERDICT_MEANING[Verdict.KNOWN_BUG]
    html, md = paths.html.read_text(), paths.markdown.read_text()
    assert f'class="badge v-known-bug">{word}</span>' in html and meaning in html
    assert "KAFKA-1211" in html and "KAFKA-1211" in md and f"**{word}** |" in md
    assert "show a known bug of their Kafka release or client" in html
    junit = ET.parse(write_junit(cells, events, tmp_path / "junit.xml")).getroot()
    assert not list(junit.iter("failure")) and "verdict: KNOWN-BUG" in ET.tostring(
        junit, encoding="unicode"
    )
