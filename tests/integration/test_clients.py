"""workload.client end to end through the CLI: the Java recorder beside librdkafka under the same
leader SIGKILL, Kafka's own VerifiableProducer as a command, and clients that break the
protocol or die, which must get UNKNOWN with the reason (never a crash, never a silent PASS)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import confluent_kafka
import pyarrow.parquet as pq
import pytest
import yaml

from tests.integration.support import only_dir, run_cli, run_experiment

pytestmark = pytest.mark.chaos
TOOLS_VERSION = "3.8.0"
CONFLUENT_VERIFIABLE = (
    Path(confluent_kafka.__file__).parent / "kafkatest" / "verifiable_producer.py"
)


def cells_of(root: Path) -> dict[str, dict]:
    """report.json's cells by name."""
    report = json.loads((root / "report" / "report.json").read_text())
    return {cell["cell"]: cell for cell in report["cells"]}


def results_of(root: Path, cell: str) -> dict:
    [path] = (root / cell).rglob("results.json")
    return json.loads(path.read_text())


def events_of(root: Path, cell: str) -> list[dict]:
    [path] = (root / cell).rglob("events.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def run_file(tmp_path: Path, experiment: dict) -> Path:
    """Run `experiment` (written as YAML) through the CLI; its run root (any exit code)."""
    path = tmp_path / f"{experiment['name']}.yaml"
    path.write_text(yaml.safe_dump(experiment, sort_keys=False))
    runs = tmp_path / "runs"
    done = run_cli("run", str(path), "--runs-dir", str(runs), "--quiet", "--master", "local[2]")
    assert "Traceback" not in done.stderr, done.stderr
    return only_dir(runs / experiment["name"])


def test_java_and_librdkafka_agree_on_pass_under_leader_kill(tmp_path: Path):
    root, _ = run_experiment("clients", tmp_path)
    cells = cells_of(root)
    assert set(cells) == {"client=librdkafka", "client=java-3.8.0", "client=java-4.3.1-x2"}
    for name, cell in cells.items():
        assert cell["verdict"] == "PASS", (name, cell)
        result = results_of(root, name)
        assert result["counts"]["acked"] >= 5000 and result["loss"] == 0, result["counts"]
    java_events = events_of(root, "client=java-3.8.0")
    [config] = [e for e in java_events if e["type"] == "client_config"]
    assert config["client"] == "java 3.8.0" and config["idempotent"] is True
    assert config["config"]["acks"] == "-1"
    [spec] = (root / "client=java-3.8.0").rglob("spec.json")
    assert json.loads(spec.read_text())["config"]["client"] == "java 3.8.0"
    # two Java producer processes: one summed tally, each producer's ids and keys its own
    [tally] = [e for e in events_of(root, "client=java-4.3.1-x2") if e["type"] == "recorder_tally"]
    assert [p["reports"]["ok"] > 2000 for p in tally["producers"]] == [True, True]
    [acked] = (root / "client=java-4.3.1-x2").rglob("acked.parquet")
    table = pq.read_table(acked, columns=["producer", "key"]).to_pylist()
    assert {row["key"].split("-")[0] for row in table} == {"p0", "p1"}
    assert {row["producer"] for row in table} == {0, 1}


def _command(name: str, argv: list[str], **extra) -> dict:
    return {"workload.client": {"kind": "command", "name": name, "argv": argv, **extra}}


def test_commands_kafka_verifiable_producer_passes_broken_clients_are_unknown(tmp_path: Path):
    kafka_producer = [
        "java", "-cp", f"{{kafka_tools_classpath:{TOOLS_VERSION}}}",
        "org.apache.kafka.tools.VerifiableProducer",
        "--bootstrap-server", "{bootstrap}", "--topic", "{topic}",
        "--max-messages", "{count}", "--throughput", "{rate}",
        "--repeating-keys", "{keys}", "--producer.config", "{producer_config}",
    ]  # fmt: skip
    confluent_producer = [
        sys.executable, str(CONFLUENT_VERIFIABLE),
        "--topic", "{topic}", "--broker-list", "{bootstrap}", "--max-messages", "{count}",
    ]  # fmt: skip
    garbage = [sys.executable, "-c", "print('{not json'); print('[1, 2]')"]
    experiment = {
        "name": "commands",
        "workload": {"rate": 200, "duration_s": 12},
        "topic": {"min_insync_replicas": 2},
        "producer": {"acks": "all"},
        "faults": {"schedule": [{"at_s": 3, "fault": "kill", "target": "leader", "duration_s": 5}]},
        "matrix": {
            "client": {
                "kafka": _command("kafka-verifiable-producer", kafka_producer),
                "confluent": _command("confluent-verifiable-producer", confluent_producer),
                "garbage": _command("garbage", garbage),
            }
        },
    }
    root = run_file(tmp_path, experiment)
    cells = cells_of(root)
    kafka = cells["client=kafka"]
    assert kafka["verdict"] == "PASS", kafka
    result = results_of(root, "client=kafka")
    counts = result["counts"]
    # 2,400 sends; VerifiableProducer forces retries=0, so those during the leader's failover
    # fail (1,497 and 2,169 acked in two runs): the bar is that most got through.
    assert counts["acked"] >= 1200 and result["loss"] == 0, counts
    assert counts["phantom"] == 0, counts  # every record read back names a message sent
    # confluent-kafka-python's shipped verifiable producer is Python 2 code (dict.iteritems):
    # it dies at start, and the run says so.
    confluent = cells["client=confluent"]
    assert confluent["verdict"] == "UNKNOWN", confluent
    assert "iteritems" in json.dumps(confluent), confluent
    broken = cells["client=garbage"]
    assert broken["verdict"] == "UNKNOWN", broken
    assert "broke the verifiable-client protocol in 2 of 2 lines" in json.dumps(broken), broken
