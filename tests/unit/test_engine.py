"""Engine discovery: a working engine is left alone; without one and without root, a clear error."""

from __future__ import annotations

import pytest

from harness.platform import engine


def test_a_working_engine_is_never_touched(monkeypatch):
    monkeypatch.setattr(engine, "engine_answers", lambda: True)
    monkeypatch.setattr(engine, "_install_docker_io", lambda: pytest.fail("installed"))
    monkeypatch.setattr(engine, "_start_dockerd", lambda: pytest.fail("started"))
    assert engine.ensure_engine() == "running"


def test_without_engine_and_without_root_the_error_names_the_fix(monkeypatch):
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr(engine, "engine_answers", lambda: False)
    monkeypatch.setattr(engine.os, "geteuid", lambda: 1000)
    with pytest.raises(engine.EngineUnavailable, match="start Docker"):
        engine.ensure_engine()


def test_a_dead_docker_host_is_reported_not_replaced(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:1")
    monkeypatch.setattr(engine, "engine_answers", lambda: False)
    monkeypatch.setattr(engine, "_start_dockerd", lambda: pytest.fail("started"))
    with pytest.raises(engine.EngineUnavailable, match="DOCKER_HOST"):
        engine.ensure_engine()


def test_as_root_without_engine_dockerd_is_started_and_awaited(monkeypatch):
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    answers = iter([False, False, True])
    started = []
    monkeypatch.setattr(engine, "engine_answers", lambda: next(answers))
    monkeypatch.setattr(engine.os, "geteuid", lambda: 0)
    monkeypatch.setattr(engine, "_is_debian_like", lambda: True)
    monkeypatch.setattr(engine.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(engine, "_start_dockerd", lambda: started.append(True))
    monkeypatch.setattr(engine.time, "sleep", lambda s: None)
    assert engine.ensure_engine() == "started"
    assert started == [True]


def test_main_exits_non_zero_with_the_message(monkeypatch, capsys):
    def unavailable():
        raise engine.EngineUnavailable("no engine. Fix: start Docker")

    monkeypatch.setattr(engine, "ensure_engine", unavailable)
    assert engine.main() == 1
    assert "Fix: start Docker" in capsys.readouterr().err
