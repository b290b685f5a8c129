"""A wheel installed into a fresh virtualenv works from a directory outside the checkout.

Built from a clean copy of the working tree (setuptools would otherwise reuse a stale build/),
installed with the lock file as constraints (pip may fetch from PyPI; its cache makes it quick),
then used as a new user would: --version, validate a shipped experiment, find the image.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import confluent_kafka
import pytest

from harness.platform.image import image_tag
from harness.settings import DEFAULT_KAFKA_VERSION, REPO_ROOT
from kafka_chaos import __version__

pytestmark = pytest.mark.chaos

NOT_SOURCE = (".git", ".venv", "runs", "reports", "build", "mutants", "target", "*.egg-info")


def run(argv: list[str], cwd: Path, timeout_s: float = 300) -> subprocess.CompletedProcess:
    """Run `argv` in `cwd`; fail the test with its output when it exits non-zero."""
    result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout_s)
    assert result.returncode == 0, f"{argv} exited {result.returncode}:\n{result.stderr[-3000:]}"
    return result


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The bin/ folder of a fresh virtualenv with the project's wheel installed."""
    tmp = tmp_path_factory.mktemp("install")
    source = tmp / "source"
    shutil.copytree(REPO_ROOT, source, ignore=shutil.ignore_patterns(*NOT_SOURCE, "__pycache__"))
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp), "."], source)
    wheel = next(tmp.glob("kafka_chaos-*.whl"))
    run([sys.executable, "-m", "venv", str(tmp / "venv")], tmp)
    pip = [str(tmp / "venv" / "bin" / "python"), "-m", "pip", "install", "-q"]
    run([*pip, "-c", str(REPO_ROOT / "constraints.txt"), str(wheel)], tmp, timeout_s=600)
    return tmp / "venv" / "bin"


@pytest.fixture
def elsewhere(tmp_path) -> Path:
    """A working directory outside the checkout."""
    assert not tmp_path.is_relative_to(REPO_ROOT)
    return tmp_path


def test_version_names_the_harness_kafka_and_the_client(installed, elsewhere):
    out = run([str(installed / "kafka-chaos"), "--version"], elsewhere).stdout.splitlines()
    assert out == [
        f"kafka-chaos {__version__}",
        f"default Kafka {DEFAULT_KAFKA_VERSION}",
        f"confluent-kafka {confluent_kafka.__version__}",  # the lock pins the same client
        f"librdkafka {confluent_kafka.libversion()[0]}",
    ]


def test_a_shipped_experiment_validates_from_outside_the_checkout(installed, elsewhere):
    out = run([str(installed / "kafka-chaos"), "validate", "experiments/default.yaml"], elsewhere)
    first = out.stdout.splitlines()[0]
    assert "site-packages/harness/shipped/experiments/default.yaml: valid" in first


def test_runs_and_reports_default_to_the_current_directory(installed, elsewhere):
    probe = "from harness.settings import load_settings as s; print(s().runs_dir, s().reports_dir)"
    out = run([str(installed / "python"), "-c", probe], elsewhere).stdout.split()
    assert out == [str(elsewhere / "runs"), str(elsewhere / "reports")]


def test_the_image_recipe_is_found_and_its_image_is_cached(installed, elsewhere):
    """Same recipe bytes, same hash: the installed copy finds the image the checkout built."""
    expected = image_tag(DEFAULT_KAFKA_VERSION, REPO_ROOT / "compose")
    out = run([str(installed / "kafka-chaos"), "image"], elsewhere).stdout
    assert out.startswith(f"{expected} (cached in ")
