"""The report names each repetition's client and the durability settings it ran with."""

from __future__ import annotations

from analysis.report.cells import client_text
from harness.workload.clients import librdkafka_config


def test_a_java_client_shows_its_resolved_settings_durability_first():
    events = [{
        "type": "client_config", "client": "java 3.8.0", "idempotent": True,
        "config": {"linger.ms": "5", "acks": "-1", "enable.idempotence": "true", "x": "y"},
    }]  # fmt: skip
    text = client_text(events)
    assert (
        text
        == "java 3.8.0 ran with acks=-1, enable.idempotence=true, linger.ms=5 (idempotent: True)"
    )


def test_no_event_no_line():
    assert client_text([{"type": "phase", "phase": "workload-start"}]) is None


def test_librdkafka_shows_what_it_was_given_and_its_retry_default():
    event = librdkafka_config({"acks": "all", "enable.idempotence": False}, idempotent=False)
    text = client_text([event.model_dump()])
    assert text is not None and text.startswith("librdkafka ")
    assert "acks=all, enable.idempotence=false, retries=2147483647" in text


def test_report_json_gives_each_repetition_its_client_and_settings(tmp_path):
    import json

    from analysis.report.json_report import _client_json

    event = {"type": "client_config", "client": "java 4.3.1", "idempotent": None,
             "config": {"acks": "-1", "enable.idempotence": "true"}}  # fmt: skip
    (tmp_path / "events.jsonl").write_text(json.dumps(event) + "\n")
    assert _client_json(str(tmp_path)) == {
        "client": "java 4.3.1",
        "config": {"acks": "-1", "enable.idempotence": "true"},
        "idempotent": None,
    }
    (tmp_path / "events.jsonl").write_text(json.dumps({"type": "phase", "phase": "x"}) + "\n")
    assert _client_json(str(tmp_path)) is None
    assert _client_json(str(tmp_path / "gone")) is None
