"""Settings read once from the environment: one object, so no module reads os.environ itself.

Two ways to be installed decide the defaults. From a checkout (`pip install -e .`, or run in
place) the image recipe, experiments, runs and reports live in the checkout, as always. From a
wheel, the recipe and experiments are the copies shipped inside the package (setup.py puts
them there) and runs and reports go below the current directory, never into site-packages.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

# The folder above harness/: the checkout, or site-packages when installed from a wheel.
REPO_ROOT = Path(__file__).resolve().parents[1]
# Where a wheel keeps its copies of compose/ and experiments/ (see setup.py).
SHIPPED_DIR = Path(__file__).resolve().parent / "shipped"
DEFAULT_KAFKA_VERSION = "4.3.1"


def source_tree(root: Path = REPO_ROOT) -> Path | None:
    """The checkout this code runs from, or None when it runs from an installed wheel."""
    is_checkout = (root / "pyproject.toml").is_file() and (root / "compose").is_dir()
    return root if is_checkout else None


def shipped_path(name: str, root: Path = REPO_ROOT) -> Path:
    """The checkout's `name` folder (compose, experiments), else the wheel's shipped copy."""
    tree = source_tree(root)
    return tree / name if tree is not None else SHIPPED_DIR / name


def output_path(name: str, root: Path = REPO_ROOT) -> Path:
    """Where the `name` output folder (runs, reports) goes: the checkout's, else the cwd's."""
    tree = source_tree(root)
    return (tree if tree is not None else Path.cwd()) / name


def _env_path(name: str, default: Path) -> Path:
    value = os.environ.get(name)
    return Path(value) if value else default


def _env(name: str, default: str) -> str:
    return os.environ.get(name) or default


def _cache_home() -> Path:
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "kafka-chaos"


@dataclass(frozen=True)
class Settings:
    """Where things live and which defaults apply; every field has a KCHAOS_* override."""

    compose_dir: Path = field(
        default_factory=lambda: _env_path("KCHAOS_COMPOSE_DIR", shipped_path("compose"))
    )
    experiments_dir: Path = field(
        default_factory=lambda: _env_path("KCHAOS_EXPERIMENTS_DIR", shipped_path("experiments"))
    )
    runs_dir: Path = field(
        default_factory=lambda: _env_path("KCHAOS_RUNS_DIR", output_path("runs"))
    )
    reports_dir: Path = field(
        default_factory=lambda: _env_path("KCHAOS_REPORTS_DIR", output_path("reports"))
    )
    # Downloaded tools (the Compose binary); never inside the checkout or site-packages.
    cache_dir: Path = field(default_factory=lambda: _env_path("KCHAOS_CACHE_DIR", _cache_home()))
    kafka_version: str = field(
        default_factory=lambda: _env("KCHAOS_KAFKA_VERSION", DEFAULT_KAFKA_VERSION)
    )
    image: str | None = field(default_factory=lambda: os.environ.get("KCHAOS_IMAGE") or None)
    spark_master: str = field(default_factory=lambda: _env("KCHAOS_SPARK_MASTER", "local[*]"))
    label: str = "io.kafka-chaos.cluster"

    def experiment_path(self, given: Path) -> Path:
        """`given` if it exists or is absolute; else the shipped experiment of that name.

        So `kafka-chaos validate experiments/default.yaml` (or just `default`) works from any
        directory once installed from a wheel, and a file of the user's own always wins.
        """
        if given.exists() or given.is_absolute():
            return given
        return self.shipped_experiment(given.as_posix()) or given

    def shipped_experiment(self, name: str) -> Path | None:
        """The shipped experiment file `name` names as `kafka-chaos list experiments` does
        (`quick`, `known-bugs/bit-flip`; `.yaml` and a leading `experiments/` optional), else
        None."""
        relative = Path(name.removeprefix("experiments/"))
        if relative.suffix not in (".yaml", ".yml"):
            relative = relative.with_name(f"{relative.name}.yaml")
        candidate = self.experiments_dir / relative
        inside = candidate.resolve().is_relative_to(self.experiments_dir.resolve())
        return candidate if inside and candidate.is_file() else None

    def built_once(self, entry: str, product: str, build: Callable[[Path], object]) -> Path:
        """`product` of the cache folder `entry` (below cache_dir), built on the first call:
        `build` fills a fresh folder, moved into place once finished (a concurrent build that
        got there first wins); a lookup after."""
        folder = self.cache_dir / entry
        if not (folder / product).is_file():
            folder.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=folder.parent, prefix=".build-") as tmp:
                fresh = Path(tmp) / "entry"
                fresh.mkdir()
                build(fresh)
                try:
                    os.rename(fresh, folder)
                except OSError:
                    if not (folder / product).is_file():
                        raise
        return folder / product


def load_settings() -> Settings:
    """The settings in force for this process."""
    return Settings()
