"""The worst runs end to end on real brokers: everything acknowledged gone, nothing ever
acknowledged, a workload that ends early, and a client error nobody scripted. Each ends with
a judged repetition and a written report; only the workload that gave up is a harness error,
and its verdict names it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from confluent_kafka import KafkaException

from analysis.judge.outcomes import Verdict
from analysis.pipeline import Analysis, analyse
from harness.experiment.load import parse_experiment
from harness.experiment.matrix import expand
from harness.platform.image import ensure_image
from harness.run import runner
from harness.run.progress import PlainProgress
from harness.rundir.events import load_events
from tests.integration.support import labelled_leftovers, run_cli, wait_until

pytestmark = pytest.mark.chaos

HERE = Path(__file__).parent
CP = {"acks": "all", "enable_idempotence": True, "message_timeout_ms": 10000}
CP_TOPIC = {"partitions": 3, "replication_factor": 3, "min_insync_replicas": 2}


def run_in_process(tmp_path: Path, data: dict[str, Any]) -> tuple[Path, Analysis]:
    """Run a one-cell experiment in this process (so a test can reach into the runner), then
    analyse it; (the repetition's run directory, the analysis). Asserts the run left no
    container or network of its own behind (this process may own others: a shared cluster)."""
    experiment = parse_experiment(data, "<test>")
    (cell,) = expand(experiment)
    image = ensure_image(experiment.kafka.version)
    root = tmp_path / experiment.name
    before = labelled_leftovers(os.getpid())
    runner.run_experiment(experiment, [cell], root, lambda _cell: image, PlainProgress())
    assert labelled_leftovers(os.getpid(), before) == []
    analysis = analyse([str(root)], root / "report", master="local[2]")
    (run_dir,) = [p.parent for p in root.rglob("spec.json") if p.parent.name == "0"]
    return run_dir, analysis


def test_a_topic_recreated_before_the_read_back_lost_everything_a_violation_under_cp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    read_back = runner.read_back_and_keep

    def recreate_then_read_back(ctx, plan, run_dir, events, phase):
        """Delete the topic and create it anew (an operator's mistake), then read back."""
        cluster = ctx.cluster
        admin = cluster.admin()
        admin.delete_topics([runner.TOPIC], operation_timeout=30)[runner.TOPIC].result(30)
        settings = json.loads((run_dir / "spec.json").read_text())["topic"]["config"]

        def created() -> bool:
            try:
                cluster.create_topic(runner.TOPIC, 3, 3, settings, timeout_s=30)
            except KafkaException:  # still marked for deletion
                return False
            return True

        wait_until(created, 60, "the topic created anew")
        return read_back(ctx, plan, run_dir, events, phase)

    monkeypatch.setattr(runner, "read_back_and_keep", recreate_then_read_back)
    run_dir, analysis = run_in_process(
        tmp_path,
        {"name": "recreated", "topic": CP_TOPIC, "producer": CP,
         "workload": {"rate": 200, "duration_s": 6}},
    )  # fmt: skip
    result = json.loads((run_dir / "results.json").read_text())
    assert result["status"] == "complete", result
    acked = result["counts"]["acked"]
    assert acked > 500
    assert result["counts"]["read"] == 0
    assert result["loss"] == acked  # every acknowledged message, each counted once
    assert result["sensitivity"] == {"removed": 0, "found": 0, "passed": None}
    (cell,) = analysis.cells
    assert cell.verdict == Verdict.VIOLATION, cell.reasons
    assert analysis.exit_code == 1
    assert analysis.failures == ()
    assert "VIOLATION" in analysis.html.read_text()
    report = json.loads(analysis.json.read_text())
    assert report["cells"][0]["verdict"] == "VIOLATION"


def test_no_acknowledgement_ever_arrives_gives_a_verdict_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    senders = runner._senders

    def unreachable(plan, bootstrap, events):
        """The producer pointed at a loopback port nothing listens on: no broker answers."""
        return senders(plan, "127.0.0.1:9", events)

    monkeypatch.setattr(runner, "_senders", unreachable)
    run_dir, analysis = run_in_process(
        tmp_path,
        {"name": "unreachable", "topic": CP_TOPIC,
         "producer": {**CP, "message_timeout_ms": 3000, "request_timeout_ms": 1000},
         "workload": {"rate": 50, "duration_s": 4}},
    )  # fmt: skip
    result = json.loads((run_dir / "results.json").read_text())
    assert result["status"] == "complete", result
    counts = result["counts"]
    assert counts["sent"] >= 150 and counts["acked"] == 0
    assert counts["failed"] + counts["indeterminate"] == counts["sent"]
    assert [e for e in load_events(run_dir) if e["type"] == "harness_error"] == []
    (cell,) = analysis.cells
    (repetition,) = cell.repetitions
    assert repetition.verdict == Verdict.UNKNOWN
    assert repetition.reasons[0].startswith("no message was acknowledged (sent ")
    assert cell.verdict == Verdict.UNKNOWN and analysis.exit_code == 2  # never a violation
    assert "no message was acknowledged" in analysis.html.read_text()
    assert analysis.failures == ()


class GivesUp:
    """The run's real senders, whose run() raises once the workload is sent: an error nobody
    can continue from, after acknowledgements were journalled."""

    ERROR = "RuntimeError: the client gave up (the test's)"

    def __init__(self, senders: Any):
        self.senders = senders

    @property
    def stats(self) -> Any:
        """The real senders' stats."""
        return self.senders.stats

    def start(self) -> None:
        """Start the real senders."""
        self.senders.start()

    def run(self, stop: Any) -> Any:
        """Send the whole workload, then give up."""
        self.senders.run(stop)
        raise RuntimeError("the client gave up (the test's)")

    def close(self, events: Any) -> Exception | None:
        """Close the real senders (their journal and tally)."""
        return self.senders.close(events)


def test_a_workload_that_ends_early_is_healed_read_back_and_judged_with_its_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    senders = runner._senders
    monkeypatch.setattr(runner, "_senders", lambda *args: GivesUp(senders(*args)))
    run_dir, analysis = run_in_process(
        tmp_path,
        {"name": "gives-up", "topic": CP_TOPIC,
         # The paused broker leads a partition too: its sends time out in seconds, not 30.
         "producer": {"acks": "1", "message_timeout_ms": 3000, "request_timeout_ms": 1000},
         "workload": {"rate": 200, "duration_s": 4},
         # Its heal step waits past the workload: the pause is still on when the workload
         # gives up, and only the heal after the error ends it.
         "faults": {"schedule": [
             {"at_s": 1, "fault": "pause", "target": "follower", "partition": 0, "as": "paused"},
             {"fault": "heal", "target": "@paused", "after": "after_s(60)"}]}},
    )  # fmt: skip
    events = load_events(run_dir)
    ended = next(i for i, e in enumerate(events) if e.get("phase") == "workload-end")
    assert any(e["type"] == "fault_end" and e["fault_id"] == 1 for e in events[ended:])
    (readback,) = [e for e in events if e["type"] == "readback"]
    assert readback["complete"] is True
    assert [e["error"] for e in events if e["type"] == "harness_error"] == [GivesUp.ERROR]
    result = json.loads((run_dir / "results.json").read_text())
    assert result["status"] == "complete", result  # read back, so reconciled
    counts = result["counts"]
    assert counts["acked"] > 500 and result["loss"] == 0
    (summary,) = json.loads((run_dir.parent.parent / "repetitions.json").read_text())
    assert (summary["sent"], summary["ok"], summary["error"]) == (
        counts["sent"], counts["acked"], GivesUp.ERROR
    )  # fmt: skip
    (cell,) = analysis.cells
    (repetition,) = cell.repetitions
    assert (repetition.acked, repetition.loss) == (counts["acked"], 0)  # the acks were judged
    assert repetition.verdict == Verdict.UNKNOWN  # a run that stopped early proves nothing
    assert f"harness error: {GivesUp.ERROR}" in repetition.reasons
    assert analysis.failures == ()


def test_stale_followers_back_first_on_zookeeper_3_9_1_is_judged(tmp_path: Path) -> None:
    """Both followers of partition 0 killed, then its leader, then the stale followers back
    (issue 25): librdkafka's produce() refuses sends with _UNKNOWN_TOPIC while they answer
    without the topic, which used to end the repetition unread. Now the refused sends are
    journalled as failed, the workload goes on, and the repetition is judged."""
    done = run_cli(
        "run", str(HERE / "experiments" / "stale-zookeeper.yaml"), "--runs-dir", str(tmp_path),
        "--quiet", "--master", "local[2]",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr  # loss is allowed: no violation
    (run_dir,) = [p.parent for p in tmp_path.rglob("results.json")]
    events = load_events(run_dir)
    assert [e for e in events if e["type"] in ("harness_error", "fault_error")] == []
    result = json.loads((run_dir / "results.json").read_text())
    assert result["status"] == "complete", result
    counts = result["counts"]
    assert counts["acked"] > 0
    acked = pq.read_table(run_dir / "acked.parquet", columns=["status", "error"]).to_pylist()
    refused = [r for r in acked if r["error"] == "_UNKNOWN_TOPIC"]
    assert refused, (
        "no send was refused with _UNKNOWN_TOPIC: the restarted followers answered with the "
        "topic before the producer asked (the scenario's timing no longer opens the window)"
    )
    assert {r["status"] for r in refused} == {"failed"}
    # Every refusal is in the recorder's tally and the journal alike, status by status.
    (tally,) = [e for e in events if e["type"] == "recorder_tally"]
    for status in ("ok", "failed", "indeterminate"):
        assert tally["reports"][status] == result["contract"][f"reported_{status}"]
    # The harness's own line reports what was really sent (it said "sent 0, ok 0").
    (summary,) = json.loads((run_dir.parent.parent / "repetitions.json").read_text())
    assert (summary["sent"], summary["ok"], summary["error"]) == (
        counts["sent"], counts["acked"], None
    )  # fmt: skip
    report = json.loads((run_dir.parent.parent / "report" / "report.json").read_text())
    (cell,) = report["cells"]
    assert cell["verdict"] in ("PASS", "EXPECTED-LOSS"), cell
    assert labelled_leftovers(done.pid) == []
