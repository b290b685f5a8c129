"""Settings read once from the environment: one object, so no module reads os.environ itself."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_KAFKA_VERSION = "4.3.1"


def _env_path(name: str, default: Path) -> Path:
    value = os.environ.get(name)
    return Path(value) if value else default


def _env(name: str, default: str) -> str:
    return os.environ.get(name) or default


@dataclass(frozen=True)
class Settings:
    """Where things live and which defaults apply; every field has a KCHAOS_* override."""

    compose_dir: Path = field(
        default_factory=lambda: _env_path("KCHAOS_COMPOSE_DIR", REPO_ROOT / "compose")
    )
    runs_dir: Path = field(default_factory=lambda: _env_path("KCHAOS_RUNS_DIR", REPO_ROOT / "runs"))
    reports_dir: Path = field(
        default_factory=lambda: _env_path("KCHAOS_REPORTS_DIR", REPO_ROOT / "reports")
    )
    kafka_version: str = field(
        default_factory=lambda: _env("KCHAOS_KAFKA_VERSION", DEFAULT_KAFKA_VERSION)
    )
    image: str | None = field(default_factory=lambda: os.environ.get("KCHAOS_IMAGE") or None)
    spark_master: str = field(default_factory=lambda: _env("KCHAOS_SPARK_MASTER", "local[*]"))
    label: str = "io.kafka-chaos.cluster"


def load_settings() -> Settings:
    """The settings in force for this process."""
    return Settings()
