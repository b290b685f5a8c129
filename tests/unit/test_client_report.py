"""The report names each repetition's client and the durability settings it ran with."""

from __future__ import annotations

from analysis.report.cells import client_text
from harness.workload.producer.by_client import librdkafka_config


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

    from analysis.report.json_report import _clients_json

    event = {"type": "client_config", "client": "java 4.3.1", "idempotent": None,
             "config": {"acks": "-1", "enable.idempotence": "true"}}  # fmt: skip
    (tmp_path / "events.jsonl").write_text(json.dumps(event) + "\n")
    assert _clients_json(str(tmp_path))["client"] == {
        "client": "java 4.3.1",
        "config": {"acks": "-1", "enable.idempotence": "true"},
        "idempotent": None,
    }
    (tmp_path / "events.jsonl").write_text(json.dumps({"type": "phase", "phase": "x"}) + "\n")
    assert _clients_json(str(tmp_path)) == {"client": None, "members": None}
    assert _clients_json(str(tmp_path / "gone")) == {"client": None, "members": None}


def test_report_json_gives_no_clients_for_a_run_whose_events_cannot_be_read(monkeypatch):
    """An I/O error on events.jsonl (not root: its mode; a failing disk) is no client, not a
    report that fails."""
    from analysis.report import json_report

    def unreadable(run_dir):
        raise OSError(5, "Input/output error", run_dir)

    monkeypatch.setattr(json_report.RunEvidence, "read", unreadable)
    assert json_report._clients_json("runs/x") == {"client": None, "members": None}


def test_the_groups_members_show_their_read_and_commit_settings():
    from analysis.report.cells import members_text

    event = {"type": "consumers", "client": "java 3.8.0", "config": {
        "enable.auto.commit": "false", "isolation.level": "read_committed", "x": "y",
        "session.timeout.ms": "6000", "max.poll.interval.ms": "300000"}}  # fmt: skip
    assert members_text([event]) == (
        "the group's members (java 3.8.0) ran with isolation.level=read_committed, "
        "enable.auto.commit=false, session.timeout.ms=6000, max.poll.interval.ms=300000"
    )
    # a run of an older harness (no settings), or without a group: no line
    assert members_text([{"type": "consumers", "client": "librdkafka"}]) is None
    assert members_text([{"type": "phase", "phase": "x"}]) is None


def test_librdkafka_members_report_the_settings_the_harness_gives(tmp_path):
    import json

    from analysis.report.json_report import _clients_json
    from harness.rundir.records import CommitMode
    from harness.workload.consumer_group.group import ConsumerGroup

    group = ConsumerGroup.__new__(ConsumerGroup)  # only what _members_config reads
    group.java, group.run_dir, group.commit = None, tmp_path, CommitMode.AFTER_PROCESS
    group.bootstrap, group.topic, group.group_id, group.processing_s = "b:1", "t", "g", 0.0
    group.session_timeout_ms = 6000
    group._level = 20
    config = group._members_config()
    assert config["isolation.level"] == "read_committed"
    assert config["enable.auto.commit"] == "false"
    assert "bootstrap.servers" not in config and "log_level" not in config
    event = {"type": "consumers", "client": "librdkafka", "config": config}
    (tmp_path / "events.jsonl").write_text(json.dumps(event) + "\n")
    assert _clients_json(str(tmp_path)) == {
        "client": None,
        "members": {"client": "librdkafka", "config": config},
    }
