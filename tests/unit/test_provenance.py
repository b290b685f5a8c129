"""provenance.json: what the runner records at run time, and how the analysis reads it back."""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path

import confluent_kafka
import pytest

from analysis.report.render import render_report
from harness.experiment.load import load_experiment
from harness.platform.image import BrokerImage
from harness.run.provenance import ProvenanceRecord, _version_text, memory_bytes
from harness.rundir import layout
from harness.rundir.provenance import BrokerImageUsed, ExperimentProvenance, read_provenance
from harness.settings import REPO_ROOT
from tests.unit.report_runs import PROVENANCE, RUNS

EXPERIMENT = load_experiment(REPO_ROOT / "experiments" / "quick.yaml")


def image(version: str) -> BrokerImage:
    """A broker image as ensure_image returns one."""
    return BrokerImage(f"kafka-chaos/kafka:{version}", f"sha256:{version}", version, "cached", 0.1)


def recorded(root: Path) -> dict:
    """provenance.json of `root` as JSON."""
    return json.loads((root / layout.PROVENANCE).read_text())


def test_the_runner_records_what_ran_before_any_cell(tmp_path: Path) -> None:
    command = ("kafka-chaos", "run", "experiments/quick.yaml", "--quiet")
    ProvenanceRecord(tmp_path, EXPERIMENT, command)
    written = recorded(tmp_path)
    assert written["experiment"] == EXPERIMENT.name and written["seed"] == EXPERIMENT.seed
    assert written["command_line"] == list(command)
    assert written["confluent_kafka_version"] == confluent_kafka.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*", written["librdkafka_version"])
    assert written["librdkafka_version"] == confluent_kafka.libversion()[0]
    assert written["cores"] == os.cpu_count() and written["memory_bytes"] == memory_bytes() > 0
    assert len(written["git_revision"] or "0" * 40) == 40
    assert written["images"] == []
    assert not list(tmp_path.glob("*.partial"))


def test_each_image_is_recorded_once_as_cells_reach_it(tmp_path: Path) -> None:
    record = ProvenanceRecord(tmp_path, EXPERIMENT)
    for version in ("4.3.1", "4.3.1", "4.2.0", "4.3.1"):
        record.image_used(image(version))
    assert [i["kafka_version"] for i in recorded(tmp_path)["images"]] == ["4.3.1", "4.2.0"]
    [read] = read_provenance([tmp_path / "cell" / "0"])
    assert read.provenance == record.current and read.problem is None
    assert read.provenance.images[1] == BrokerImageUsed(
        tag="kafka-chaos/kafka:4.2.0", image_id="sha256:4.2.0", kafka_version="4.2.0"
    )


def test_a_version_reads_the_same_from_either_form_the_client_gives() -> None:
    assert _version_text("2.16.1") == _version_text(("2.16.1", 34603263)) == "2.16.1"


@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")  # report.json dumps it as is
def test_a_provenance_that_cannot_be_shown_says_why_under_its_root(tmp_path: Path) -> None:
    broken = PROVENANCE.model_copy(update={"memory_bytes": "eight gigabytes"})
    runs = (ExperimentProvenance("runs/chaos/ts", broken), RUNS[1])
    paths = render_report([], [], {}, runs, tmp_path / "report", "Chaos report")
    why = "the provenance of runs/chaos/ts failed: TypeError: "
    markdown = paths.markdown.read_text()
    section = markdown[markdown.index("Runs under `runs/chaos/ts`:") :]
    table = "Runs under `runs/chaos/ts`:\n\n| | |\n|---|---|\n"
    assert section.startswith(f"{table}| provenance | {why}")
    assert "Runs under `runs/old/ts`:" in section  # the other root, as it was
    page = html.unescape(paths.html.read_text())
    assert "Runs under <code>runs/chaos/ts</code>" in page and why in page
