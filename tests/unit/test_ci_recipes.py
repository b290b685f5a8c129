"""The CI recipes as shipped: the GitHub workflow and the GitLab example of docs/ci.md hold what
a stock runner needs (read as YAML, without running them; tests/integration/test_ci_recipe.py
runs the workflow's steps)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "chaos.yml"
CI_DOC = ROOT / "docs" / "ci.md"


def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def gitlab_example() -> dict:
    """The first YAML block of docs/ci.md's GitLab section."""
    section = CI_DOC.read_text().split("## The same in GitLab CI", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block is not None
    return yaml.safe_load(block.group(1))


def scripts(steps: list[dict]) -> list[str]:
    return [step["run"] for step in steps if "run" in step]


def test_the_junit_action_has_the_permission_it_needs() -> None:
    document = workflow()
    assert document["permissions"] == {"contents": "read"}
    report = document["jobs"]["report"]
    assert report["permissions"] == {"contents": "read", "checks": "write"}
    assert any("action-junit-report" in step.get("uses", "") for step in report["steps"])


def test_the_shard_job_bootstraps_its_tools_and_caches_its_images() -> None:
    shard = workflow()["jobs"]["shard"]
    runs = scripts(shard["steps"])
    bootstrap = next(i for i, run in enumerate(runs) if run.startswith("make "))
    assert runs[bootstrap].split()[1:3] == ["tools", "venv"]  # tools first: sudo installs
    assert "docker load -i images/kafka.tar" in runs[bootstrap - 1]
    assert "docker save -o images/kafka.tar" in runs[bootstrap + 2]
    assert "--shard ${{ matrix.shard }}/3 --plain --no-report" in runs[bootstrap + 1]
    cache = next(step for step in shard["steps"] if "actions/cache" in step.get("uses", ""))
    assert cache["with"]["path"] == "images/" and "compose/**" in cache["with"]["key"]
    assert isinstance(shard["timeout-minutes"], int)


def test_the_gitlab_example_works_as_pasted() -> None:
    example = gitlab_example()
    shard, report = example["shard"], example["report"]
    for job in (shard, report, example[".harness"]):
        key = str(job.get("cache", {}).get("key", ""))
        assert "/" not in key and "CI_JOB_NAME" not in key  # "shard 1/3" is refused
    script = shard["script"]
    engine = script.index("make engine")
    load = next(i for i, line in enumerate(script) if "docker load -i images/kafka.tar" in line)
    save = next(i for i, line in enumerate(script) if "docker save -o images/kafka.tar" in line)
    build = next(i for i, line in enumerate(script) if "image" in line.split())
    assert engine < load < build < save
    assert "images/" in shard["cache"]["paths"]
    assert '--shard "$CI_NODE_INDEX/$CI_NODE_TOTAL"' in " ".join(script)
    assert any("openjdk-17-jre-headless" in line for line in report["script"])  # Spark's Java
    assert report["when"] == "always" and report["artifacts"]["reports"]["junit"]
