"""Defaults for a checkout and for an installed wheel; `--version`; shipped experiment names."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import settings as settings_module
from harness.settings import REPO_ROOT, SHIPPED_DIR, Settings, output_path, shipped_path
from kafka_chaos import __version__
from kafka_chaos.cli import main


def test_a_checkout_keeps_its_own_folders(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert shipped_path("compose") == REPO_ROOT / "compose"
    assert output_path("runs") == REPO_ROOT / "runs"


def test_installed_from_a_wheel_outputs_go_below_the_current_directory(tmp_path, monkeypatch):
    site = tmp_path / "site-packages"  # what REPO_ROOT is for a wheel: no pyproject, no compose/
    site.mkdir()
    monkeypatch.chdir(tmp_path)
    assert output_path("runs", root=site) == tmp_path / "runs"
    assert output_path("reports", root=site) == tmp_path / "reports"
    assert shipped_path("compose", root=site) == SHIPPED_DIR / "compose"


def test_kchaos_overrides_still_win(tmp_path, monkeypatch):
    monkeypatch.setenv("KCHAOS_RUNS_DIR", str(tmp_path / "r"))
    monkeypatch.setenv("KCHAOS_COMPOSE_DIR", str(tmp_path / "c"))
    loaded = Settings()
    assert (loaded.runs_dir, loaded.compose_dir) == (tmp_path / "r", tmp_path / "c")


@pytest.mark.parametrize("given", ["experiments/quick.yaml", "quick.yaml", "quick"])
def test_a_shipped_experiment_is_found_by_name_from_any_directory(tmp_path, monkeypatch, given):
    monkeypatch.chdir(tmp_path)
    assert Settings().experiment_path(Path(given)) == REPO_ROOT / "experiments" / "quick.yaml"


def test_a_file_of_the_users_own_wins_over_a_shipped_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "experiments").mkdir()
    (tmp_path / "experiments" / "quick.yaml").write_text("name: mine\n")
    given = Path("experiments/quick.yaml")
    assert Settings().experiment_path(given) == given


def test_an_unknown_name_is_left_for_the_loader_to_report(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for given in ("nope.yaml", "elsewhere/quick.yaml", str(tmp_path / "quick.yaml")):
        assert Settings().experiment_path(Path(given)) == Path(given)


def test_version_names_harness_kafka_client_and_librdkafka(capsys):
    import confluent_kafka

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        f"kafka-chaos {__version__}",
        f"default Kafka {settings_module.DEFAULT_KAFKA_VERSION}",
        f"confluent-kafka {confluent_kafka.__version__}",
        f"librdkafka {confluent_kafka.libversion()[0]}",
    ]
