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
