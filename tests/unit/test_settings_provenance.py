"""Which settings came from which file: `--producer-config`, `--topic-config` and `--set` are
recorded in provenance.json as typed SettingFrom records (the field set, its value, the file and
key or `--set`), read back by the analysis and shown in report.html, report.md and report.json.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import pytest

from analysis.report.provenance import provenance_views, settings_lines
from analysis.report.render import render_report
from harness.experiment import properties
from harness.experiment.load import load_experiment
from harness.run import runner
from harness.run.provenance import ProvenanceRecord
from harness.rundir.provenance import ExperimentProvenance, SettingFrom, read_provenance
from harness.settings import REPO_ROOT
from kafka_chaos import cli
from kafka_chaos.commands import common
from kafka_chaos.commands import run as run_command
from tests.unit.report_runs import PROVENANCE

QUICK = REPO_ROOT / "experiments" / "quick.yaml"
PRODUCER = "acks=all\nenable.idempotence=true\nbootstrap.servers=x:9092\ncompression.type=lz4\n"


def _files(tmp_path: Path) -> tuple[Path, Path]:
    producer, topic = tmp_path / "producer.properties", tmp_path / "topic.properties"
    producer.write_text(PRODUCER)
    topic.write_text("min.insync.replicas: 2\n")
    return producer, topic


def _recorded(tmp_path: Path, capsys: Any) -> list[SettingFrom]:
    producer, topic = _files(tmp_path)
    args = cli.build_parser().parse_args(
        [
            "run",
            str(QUICK),
            "--producer-config",
            str(producer),
            "--topic-config",
            str(topic),
            "--set",
            "workload.rate=500",
        ]
    )
    recorded = [s.recorded() for s in common.user_settings(args, say=False)]
    assert capsys.readouterr().err == ""  # the left-out keys were said once, when loaded
    return recorded


def test_each_setting_is_recorded_with_its_file_and_key(tmp_path: Path, capsys: Any) -> None:
    producer, topic = tmp_path / "producer.properties", tmp_path / "topic.properties"
    assert _recorded(tmp_path, capsys) == [
        SettingFrom(field="producer.acks", value='"all"', source=str(producer), key="acks"),
        SettingFrom(
            field="producer.enable_idempotence",
            value="true",
            source=str(producer),
            key="enable.idempotence",
        ),
        SettingFrom(
            field="producer.config.compression.type",
            value='"lz4"',
            source=str(producer),
            key="compression.type",
        ),
        SettingFrom(
            field="topic.min_insync_replicas",
            value="2",
            source=str(topic),
            key="min.insync.replicas",
        ),
        SettingFrom(field="workload.rate", value="500", source="--set"),
    ]


def test_problems_still_name_the_file_and_key_or_the_set() -> None:
    from_file = properties.producer_settings({"acks": "all"}, "p.properties")[0]
    assert from_file.origin == "p.properties: acks"
    assert properties.Setting("workload.rate", 500, "--set").origin == "--set workload.rate"


def test_provenance_json_keeps_the_settings_typed(tmp_path: Path, capsys: Any) -> None:
    settings = _recorded(tmp_path, capsys)
    (tmp_path / "run").mkdir()
    record = ProvenanceRecord(tmp_path / "run", load_experiment(QUICK), settings=settings)
    written = json.loads((tmp_path / "run" / "provenance.json").read_text())
    assert written["settings"][0] == {
        "field": "producer.acks",
        "value": '"all"',
        "source": str(tmp_path / "producer.properties"),
        "key": "acks",
    }
    [read] = read_provenance([tmp_path / "run" / "cell" / "0"])
    assert read.provenance == record.current
    assert read.provenance is not None and read.provenance.settings == tuple(settings)


def test_run_hands_the_settings_to_the_runner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """`kafka-chaos run --producer-config ... --no-report` up to the runner, no Docker."""
    handed: list[Any] = []

    def fake_runner(experiment, cells, root, image_for, progress, settings=(), **plan):
        handed.append(settings)
        assert plan == {"shard": None, "selection": cells}  # plan.json's whole selection
        return []

    monkeypatch.setattr("harness.platform.engine.ensure_engine", lambda: None)
    monkeypatch.setattr(run_command, "_images_for", lambda args, settings, cells: {})
    monkeypatch.setattr(run_command, "_prepare_faults", lambda args, settings, cells: None)
    monkeypatch.setattr(run_command, "_build_clients", lambda settings, cells: None)
    monkeypatch.setattr(runner, "run_experiment", fake_runner)
    monkeypatch.setattr(common, "log_to", lambda path: None)
    monkeypatch.setattr(run_command, "log_to", lambda path: None)
    producer = tmp_path / "producer.properties"
    producer.write_text("linger.ms=5\nbootstrap.servers=x:9092\ncompression.type=lz4\n")
    argv = ["run", str(QUICK), "--producer-config", str(producer), "--set", "seed=7"]
    code = cli.main([*argv, "--runs-dir", str(tmp_path / "runs"), "--no-report", "--plain"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert err.count("left out, the harness sets them: bootstrap.servers") == 1
    [settings] = handed
    assert [(s.field, s.source, s.key) for s in settings] == [
        ("producer.linger_ms", str(producer), "linger.ms"),
        ("producer.config.compression.type", str(producer), "compression.type"),
        ("seed", "--set", None),
    ]


def test_the_report_says_which_settings_came_from_which_file(
    crafted: Any, tmp_path: Path, capsys: Any
) -> None:
    settings = _recorded(tmp_path, capsys)
    producer, topic = tmp_path / "producer.properties", tmp_path / "topic.properties"
    lines = settings_lines(settings)
    assert lines == (
        (
            f"settings from {producer}",
            'acks → producer.acks = "all", enable.idempotence → producer.enable_idempotence = '
            'true, compression.type → producer.config.compression.type = "lz4"',
        ),
        (f"settings from {topic}", "min.insync.replicas → topic.min_insync_replicas = 2"),
        ("settings from --set", "workload.rate = 500"),
    )
    runs = (
        ExperimentProvenance(
            "runs/chaos/ts", PROVENANCE.model_copy(update={"settings": tuple(settings)})
        ),
    )
    [view] = provenance_views(runs)
    assert view.lines[-3:] == lines
    cells, results, events = crafted
    paths = render_report(cells, results, events, runs, tmp_path / "report", "Chaos report")
    page = html.unescape(paths.html.read_text())
    for label, text in lines:
        assert f'<th class="name">{label}</th><td class="name"><code>{text}</code>' in page
    markdown = paths.markdown.read_text()
    assert "| settings from --set | workload.rate = 500 |" in markdown
    assert f"| settings from {topic} | {lines[1][1]} |" in markdown
    shown = json.loads(paths.json.read_text())["provenance"][0]
    assert shown["recorded"]["settings"][-1] == {
        "field": "workload.rate",
        "value": "500",
        "source": "--set",
        "key": None,
    }
    assert shown["shown"]["settings from --set"] == "workload.rate = 500"


def test_a_run_without_such_settings_shows_no_such_line() -> None:
    [view] = provenance_views((ExperimentProvenance("runs/chaos/ts", PROVENANCE),))
    assert not any(label.startswith("settings from") for label, _ in view.lines)
