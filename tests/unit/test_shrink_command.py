"""`kafka-chaos shrink`: the cell rebuilt from spec.json is the cell that ran; what counts as
the same failure; what it refuses, in one line with exit 2, before any cluster starts."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from harness.experiment.fields import PARTITION_TARGETS
from harness.experiment.from_run import cell_of_run, steps_of_run
from harness.experiment.load import load_experiment
from harness.experiment.matrix import Cell, expand
from harness.experiment.model import FaultStep
from harness.experiment.plan import producer_settings, schedule_for, topic_settings
from harness.rundir import layout
from harness.rundir.events import EventLog, FaultStart
from harness.rundir.spec import RunSpec
from harness.settings import REPO_ROOT
from kafka_chaos.cli import main
from kafka_chaos.commands import shrink
from kafka_chaos.commands.shrink import Outcome, outcome_of, same_failure

SHIPPED = [
    "experiments/quick.yaml",
    "experiments/nemesis-generic.yaml",
    "experiments/jepsen-2024-late-connections.yaml",
    "experiments/known-bugs/kafka-fsync.yaml",
    "experiments/known-bugs/KAFKA-17582.yaml",
    "experiments/consumer-commit-modes.yaml",
    "experiments/known-bugs/KAFKA-20716.yaml",  # faults after the workload
]


def run_spec(cell: Cell, seed: int) -> RunSpec:
    """spec.json as the runner writes it (harness/run/resolved.py write_spec), for `cell`."""
    spec = cell.spec
    return RunSpec.model_validate({
        "experiment": spec.name,
        "cell": cell.name,
        "repetition": 0,
        "seed": seed,
        "producer": producer_settings(spec),
        "topic": {
            "name": "chaos",
            "partitions": spec.topic.partitions,
            "replication_factor": spec.topic.replication_factor,
            "config": topic_settings(spec),
        },
        "workload": spec.workload.model_dump(),
        "schedule": [
            s.model_dump(by_alias=True, exclude_none=True) for s in schedule_for(cell, seed)
        ],
        "kafka": {**spec.kafka.model_dump(), "mode": spec.kafka.effective_mode()},
        "disjoint": spec.faults.acts_disjoint,
        "after_workload_s": spec.faults.after_workload_s,
        "final_heal_timeout_s": spec.faults.final_heal_timeout_s,
    })  # fmt: skip


def resolved(cell: Cell) -> dict[str, Any]:
    """What a cell runs with, the sections spec.json rebuilds (mode by its effect)."""
    spec = cell.spec
    dump = spec.model_dump(include={"kafka", "topic", "producer", "workload"})
    dump["kafka"]["mode"] = spec.kafka.effective_mode()
    return dump


@pytest.mark.parametrize("path", SHIPPED)
def test_the_cell_rebuilt_from_spec_json_is_the_cell_that_ran(path: str) -> None:
    for cell in expand(load_experiment(REPO_ROOT / path)):
        again = cell_of_run(run_spec(cell, 7))
        assert resolved(again) == resolved(cell), cell.name
        assert schedule_for(again, 7) == schedule_for(cell, 7)
        assert again.spec.seed == 7 and again.spec.repetitions == 1
        # A generated schedule's replay leaves out held nodes as the generated run did.
        assert again.spec.faults.acts_disjoint == cell.spec.faults.acts_disjoint
        faults = again.spec.faults
        assert faults.after_workload_s == cell.spec.faults.after_workload_s
        assert faults.final_heal_timeout_s == cell.spec.faults.final_heal_timeout_s


def test_a_run_from_before_spec_json_held_its_time_after_the_workload_gets_its_schedules() -> None:
    (cell,) = [
        c
        for c in expand(load_experiment(REPO_ROOT / "experiments/known-bugs/KAFKA-20716.yaml"))
        if c.name == "unclean=on"
    ]
    old = run_spec(cell, 7).model_copy(update={"after_workload_s": None})
    again = cell_of_run(old)  # valid: its steps after the workload have room
    ends = [s.end_s or s.at_s or 0.0 for s in schedule_for(cell, 7)]
    duration = cell.spec.workload.duration_s or 0
    assert again.spec.faults.after_workload_s == math.floor(max(ends) - duration) + 1


def judged(
    verdict: str,
    reasons: tuple[str, ...] = (),
    loss: int = 0,
    by_partition: dict[str, int] | None = None,
    **counts: int,
) -> tuple:
    """A judged repetition and its result as judge_run returns them: `loss` acknowledged
    messages lost, `by_partition` of them by partition (none by default), `counts` by class."""
    return (
        SimpleNamespace(
            verdict=verdict,
            reasons=reasons,
            loss=loss,
            known_bugs=reasons if verdict == "KNOWN-BUG" else (),
        ),
        SimpleNamespace(
            counts=counts, loss_by_partition=by_partition or {}, divergence_by_partition={}
        ),
    )


def test_a_known_bug_is_known_by_its_reference_and_a_violation_by_its_classes() -> None:
    bug = outcome_of(*judged("KNOWN-BUG", ("known bug KAFKA-17754 of Kafka 3.8.1 (fixed ...",)))
    assert bug == Outcome("KNOWN-BUG", frozenset({"KAFKA-17754"}))
    violation = outcome_of(*judged("VIOLATION", loss=3, lost=3, duplicated=0, acked=10))
    assert violation == Outcome("VIOLATION", frozenset({"lost", "loss"}))


def test_a_known_bug_beside_an_unknown_finding_is_that_bug_but_not_beside_a_violation() -> None:
    reasons = ("known bug KAFKA-20716 of Kafka 4.3.1 with librdkafka (open upstream ...",)
    beside = SimpleNamespace(verdict="UNKNOWN", reasons=(), loss=0, known_bugs=reasons)
    assert outcome_of(beside, SimpleNamespace(counts={})) == Outcome(
        "KNOWN-BUG", frozenset({"KAFKA-20716"})
    )
    worse = SimpleNamespace(verdict="VIOLATION", reasons=(), loss=2, known_bugs=reasons)
    assert outcome_of(worse, SimpleNamespace(counts={"lost": 2})) == Outcome(
        "VIOLATION", frozenset({"lost", "loss"})
    )
    alone = SimpleNamespace(verdict="UNKNOWN", reasons=(), loss=0, known_bugs=())
    assert outcome_of(alone, SimpleNamespace(counts={})).verdict == "UNKNOWN"


@pytest.mark.parametrize(
    ("replay", "same"),
    [
        (Outcome("VIOLATION", frozenset({"lost"})), True),
        (Outcome("VIOLATION", frozenset({"duplicated"})), False),  # another class
        (Outcome("KNOWN-BUG", frozenset({"lost"})), False),  # another verdict
        (Outcome("PASS", frozenset()), False),
    ],
)
def test_a_replay_reproduces_with_the_same_verdict_and_a_class_in_common(
    replay: Outcome, same: bool
) -> None:
    assert same_failure(Outcome("VIOLATION", frozenset({"lost", "loss"})), replay) is same


def one_line_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    return err


def test_a_folder_without_spec_json_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    said = one_line_exit_2(capsys, ["shrink", str(tmp_path)])
    assert "not a repetition's run directory" in said


def test_a_repetition_judged_pass_is_refused_before_any_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (cell,) = [c for c in expand(load_experiment(REPO_ROOT / SHIPPED[0])) if "cp" in c.name]
    run_spec(cell, 1).write(tmp_path)
    monkeypatch.setattr(shrink, "judge_run", lambda run_dir: judged("PASS"))
    monkeypatch.setattr(shrink, "_image", lambda *a: pytest.fail("no cluster for a PASS"))
    said = one_line_exit_2(capsys, ["shrink", str(tmp_path)])
    assert "judged PASS" in said and "KNOWN-BUG or VIOLATION" in said


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--need", "4", "--repetitions", "3"], "--need 4 must be 1..--repetitions (3)"),
        (["--budget", "2"], "--budget 2 is below --repetitions (3)"),
    ],
)
def test_numbers_that_cannot_work_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], said: str
) -> None:
    assert said in one_line_exit_2(capsys, ["shrink", str(tmp_path), *flags])


@pytest.mark.parametrize("pinned", [True, False])
def test_the_shrunk_file_waits_for_the_state_the_run_met_unless_told_not_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pinned: bool
) -> None:
    """The command pins RUN's schedule to its fault_start roles before any replay (the
    predicate sees the pinned steps), and the file it writes keeps the pins and says so."""
    cell = expand(load_experiment(REPO_ROOT / "experiments" / "nemesis-generic.yaml"))[0]
    spec = run_spec(cell, 3)
    spec.write(tmp_path)
    steps = steps_of_run(spec)
    aimed = next(i for i, s in enumerate(steps) if s.target == "leader" and s.as_ is None)
    log = EventLog(tmp_path / layout.EVENTS)
    for index, step in enumerate(steps):
        if not step.heals:
            roles = [{"partition": step.partition, "leader": 2, "isr": [2], "replicas": [1, 2, 3]}]
            log.write(FaultStart(ts_us=index, step=index, fault=step.fault, target=step.target,
                                 partition=step.partition, partitions=roles))  # fmt: skip
    log.close()
    monkeypatch.setattr(shrink, "judge_run", lambda run_dir: judged("VIOLATION", loss=3, lost=3))
    monkeypatch.setattr(shrink, "_image", lambda *a: object())
    asked: list[tuple[FaultStep, ...]] = []

    def trial(self: object, schedule: tuple[FaultStep, ...]) -> bool:
        asked.append(schedule)  # fails with the aimed step, pinned or not as the flag says
        return any(s.at_s == steps[aimed].at_s and s.fault == steps[aimed].fault for s in schedule)

    monkeypatch.setattr(shrink._Replays, "trial", trial)
    out = tmp_path / ("shrunk.yaml" if pinned else "KAFKA-1211-discovered.yaml")
    flags = [] if pinned else ["--no-pin"]
    assert main(["shrink", str(tmp_path), "--out", str(out), "--budget", "60", *flags]) == 0

    (step,) = yaml.safe_load(out.read_text())["faults"]["schedule"]
    p = step["partition"]
    state = f"isr_size({p}) == 1 and has_leader({p}) or after_s("
    assert (step.get("after") or "").startswith(state) if pinned else step.get("after") is None
    assert ("wait (after:) for the ISR size" in out.read_text()) is pinned
    name = yaml.safe_load(out.read_text())["name"]  # --out's own, or the run's experiment's
    assert name.endswith("-shrunk") if pinned else name == "kafka-1211-discovered"
    whole = max(asked, key=len)
    assert all((s.after is not None) is (pinned and not s.heals and s.target in PARTITION_TARGETS)
               for s in whole)  # fmt: skip


@given(st.one_of(st.none(), st.text(max_size=40)))
def test_a_shrunk_file_is_named_as_asked_in_the_names_an_experiment_may_hold(name) -> None:
    """Oracle: the name asked (None or empty: the experiment's, '-shrunk' added), in lowercase,
    each run of characters other than a-z, 0-9, '_' and '-' made one '-', cut to the names'
    limit; and the file is a valid experiment file."""
    from harness.experiment.from_run import experiment_document
    from harness.experiment.load import parse_experiment
    from harness.limits import MAX_NAME

    spec = run_spec(expand(load_experiment(REPO_ROOT / "experiments/quick.yaml"))[0], 3)
    expected, refused = "", False
    for c in (name or f"{spec.experiment}-shrunk").lower():
        kept = c in "abcdefghijklmnopqrstuvwxyz0123456789_-"
        expected += c if kept else "" if refused else "-"
        refused = not kept
    document = experiment_document(spec, (), name)
    assert document["name"] == expected[:MAX_NAME]
    assert parse_experiment(document, "shrunk.yaml").name == expected[:MAX_NAME]
