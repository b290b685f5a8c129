"""The shipped GitHub workflow (.github/workflows/chaos.yml) run as a CI user meets it: its `run:`
steps in order, job by job, as a non-root user with access to the Docker socket, each job in a
fresh clone of the committed tree; the actions in between done the way the actions do them
(upload-artifact copies symlinks as files: `cp -rL`; actions/cache restores images/).

Kept cheap: a two-cell experiment of 10 s workloads (so the three shard jobs run one cell, one
cell and none), and the virtualenv of each clone made from the project's installed packages
rather than downloaded again (`make venv` then finds it current and does nothing). The image is
the one `make image` built; the shard jobs save it and load it again as the workflow does.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from harness.settings import REPO_ROOT

pytestmark = pytest.mark.chaos

WORKFLOW = REPO_ROOT / ".github" / "workflows" / "chaos.yml"
EXPERIMENT = "tests/integration/experiments/ci-recipe.yaml"
CI_USER = "kchaos-ci"
SOCKET = Path("/var/run/docker.sock")


@dataclass
class Step:
    """What a `run:` step did."""

    name: str
    code: int
    out: str
    err: str


@dataclass
class CiUser:
    """The non-root user the jobs run as, and its home."""

    name: str
    home: Path
    created: bool
    tmp: Path = Path("/tmp")

    def run(self, script: str, cwd: Path, env: dict[str, str]) -> Step:
        """`script` as a workflow `run:` step (bash -eo pipefail) as this user, in `cwd`."""
        base = {
            "HOME": str(self.home),
            "USER": self.name,
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "CI": "true",
            "TMPDIR": str(self.tmp),  # a fresh runner's own temporary folder
        }
        passed = {k: v for k, v in os.environ.items() if k.startswith(("DOCKER_", "TESTCONT"))}
        command = ["env", "-i", *(f"{k}={v}" for k, v in {**base, **passed, **env}.items())]
        command += ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script]
        if os.geteuid() == 0:
            command = ["runuser", "-u", self.name, "--", *command]
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=900)
        return Step(script.splitlines()[0], done.returncode, done.stdout, done.stderr)


@pytest.fixture(scope="module")
def ci_user() -> Iterator[CiUser]:
    """This user when not root; as root, a user made for the test in the socket's group."""
    if not SOCKET.exists():
        pytest.fail(f"no Docker socket at {SOCKET}: run `make engine` first")
    if os.geteuid() != 0:
        yield CiUser(pwd.getpwuid(os.geteuid()).pw_name, Path.home(), created=False)
        return
    created = False
    try:
        pwd.getpwnam(CI_USER)
    except KeyError:
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", CI_USER], check=True)
        created = True
    group = grp.getgrgid(SOCKET.stat().st_gid).gr_name
    if group == "root":
        pytest.fail(f"{SOCKET} belongs to group root: give it a docker group a user can join")
    subprocess.run(["usermod", "--append", "--groups", group, CI_USER], check=True)
    try:
        yield CiUser(CI_USER, Path(pwd.getpwnam(CI_USER).pw_dir), created)
    finally:
        if created:
            subprocess.run(["userdel", "--remove", CI_USER], check=False, capture_output=True)


@pytest.fixture(scope="module")
def workspace(ci_user: CiUser) -> Iterator[Path]:
    """A folder the CI user owns: the jobs' clones, the artifact store and the cache."""
    folder = Path(tempfile.mkdtemp(prefix="kchaos-ci-recipe-", dir="/tmp"))
    (folder / "tmp").mkdir()
    for owned in (folder, folder / "tmp"):
        shutil.chown(owned, ci_user.name)
    ci_user.tmp = folder / "tmp"
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def clone(user: CiUser, workspace: Path, job: str) -> Path:
    """actions/checkout: a fresh clone of the committed tree, and its virtualenv made from the
    project's installed packages (the Python of the test machine's venv may be out of reach of
    the CI user, Debian's python3 of the same minor version is not)."""
    target = workspace / job
    origin = workspace / "origin.git"
    if not origin.exists():  # a bare copy the CI user may read (the checkout belongs to root)
        subprocess.run(["git", "clone", "-q", "--bare", str(REPO_ROOT), str(origin)], check=True)
        subprocess.run(["chown", "-R", user.name, str(origin)], check=True)
    site = sysconfig.get_paths()["purelib"]
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    python = shutil.which(version, path="/usr/local/bin:/usr/bin")
    assert python, f"no {version} on the system PATH for the CI user"
    script = f"""
git clone -q {origin} {target}
cd {target}
{python} -m venv .venv
sp=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
printf '%s\\n' "{target}" "import site; site.addsitedir('{site}')" > "$sp/_kchaos_clone.pth"
printf '#!%s\\nimport sys\\nfrom kafka_chaos.cli import main\\nsys.exit(main())\\n' \\
  "$PWD/.venv/bin/python" > .venv/bin/kafka-chaos
chmod +x .venv/bin/kafka-chaos
touch .venv/.installed
"""
    step = user.run(script, workspace, {})
    assert step.code == 0, step.err
    return target


CONDITIONS = {
    "steps.images.outputs.cache-hit == 'true'": lambda hit: hit,
    "steps.images.outputs.cache-hit != 'true'": lambda hit: not hit,
    "always()": lambda hit: True,
}


def shell_of(step: dict, shard: int | None) -> str:
    """A `run:` step's script with the workflow's expressions it holds filled in."""
    script = step["run"]
    if shard is not None:
        script = script.replace("${{ matrix.shard }}", str(shard))
    assert "${{" not in script, f"an expression this test does not fill in: {script}"
    return script


def runs_step(step: dict, cache_hit: bool) -> bool:
    """Whether a step's `if:` holds (the conditions the workflow uses)."""
    condition = step.get("if")
    if condition is None:
        return True
    assert condition in CONDITIONS, f"a condition this test does not know: {condition}"
    return CONDITIONS[condition](cache_hit)


def run_job(
    user: CiUser, workspace: Path, name: str, job: dict, shard: int | None = None
) -> tuple[Path, list[Step]]:
    """One job: its steps in order in a fresh clone; `uses:` steps done as the actions do."""
    checkout = clone(user, workspace, f"{name}-{shard}" if shard else name)
    env = {**workflow()["env"], "EXPERIMENT": EXPERIMENT}
    cache = workspace / "actions-cache"
    cache_hit = False
    done: list[Step] = []
    for step in job["steps"]:
        uses = step.get("uses", "")
        if not runs_step(step, cache_hit):
            continue
        if uses.startswith("actions/cache"):
            cache_hit = (cache / step["with"]["path"]).exists()
            if cache_hit:  # restored into the workspace
                restored = checkout / step["with"]["path"]
                shutil.copytree(cache / step["with"]["path"], restored, copy_function=os.link)
                subprocess.run(["chown", "-R", user.name, str(restored)], check=True)
        elif uses.startswith("actions/upload-artifact") and "runs" in step["with"]["name"]:
            if (checkout / "runs").is_dir():  # upload-artifact dereferences symlinks
                artifact = workspace / "artifacts" / f"runs-{shard}"
                artifact.parent.mkdir(exist_ok=True)
                shutil.chown(artifact.parent, user.name)  # the CI user's artifact store
                step_done = user.run(f"cp -rL runs {artifact}", checkout, {})
                assert step_done.code == 0, step_done.err
        elif uses.startswith("actions/download-artifact"):
            target = checkout / step["with"]["path"]
            for artifact in sorted((workspace / "artifacts").glob("runs-*")):
                shutil.copytree(artifact, target / artifact.name)
            subprocess.run(["chown", "-R", user.name, str(target)], check=True)
        elif "run" in step:
            result = user.run(shell_of(step, shard), checkout, env)
            done.append(result)
            if result.code != 0:
                break  # a failed step ends the job; the test reads what it said
    if not cache_hit and (checkout / "images").is_dir():  # actions/cache saves after the job
        shutil.copytree(checkout / "images", cache / "images", copy_function=os.link)
    return checkout, done


def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def junit_totals(path: Path) -> dict[str, int]:
    suites = ET.parse(path).getroot()
    return {key: int(suites.get(key, "0")) for key in ("tests", "failures", "errors", "skipped")}


@pytest.fixture(scope="module")
def shard_jobs(ci_user: CiUser, workspace: Path) -> dict[int, tuple[Path, list[Step]]]:
    """The workflow's shard jobs, each run once for the module: its checkout and steps; their
    artifacts land in `workspace / "artifacts"` as upload-artifact leaves them."""
    job = workflow()["jobs"]["shard"]
    return {
        shard: run_job(ci_user, workspace, "shard", job, shard)
        for shard in job["strategy"]["matrix"]["shard"]
    }


@pytest.fixture(scope="module")
def report_job(
    ci_user: CiUser, workspace: Path, shard_jobs: dict[int, tuple[Path, list[Step]]]
) -> tuple[Path, list[Step]]:
    """The workflow's report job over every shard's artifact, run once: checkout and steps."""
    return run_job(ci_user, workspace, "report", workflow()["jobs"]["report"])


def test_the_shipped_workflow_runs_as_a_ci_user_and_merges_its_shards_once(
    workspace: Path,
    shard_jobs: dict[int, tuple[Path, list[Step]]],
    report_job: tuple[Path, list[Step]],
) -> None:
    shards = list(shard_jobs)
    for shard, (checkout, steps) in shard_jobs.items():
        failed = [step for step in steps if step.code != 0]
        assert not failed, f"shard {shard}: {failed[0].name}: {failed[0].err[-3000:]}"
        if shard == 1:  # the cache missed: the images were saved after the run
            assert (workspace / "actions-cache" / "images" / "kafka.tar").is_file()
        else:  # the cache hit: loaded before the bootstrap
            assert any(step.name.startswith("docker load") for step in steps)
        if shard == shards[-1]:  # two cells for three shards: the last one has none
            assert "has no cells" in steps[-1].err and not (checkout / "runs").exists()
    artifacts = sorted(p.name for p in (workspace / "artifacts").iterdir())
    assert artifacts == ["runs-1", "runs-2"]
    # the `latest` symlink arrived as a folder: a second copy of each shard's run
    copies = list((workspace / "artifacts").glob("runs-*/ci-recipe/latest/*/0/spec.json"))
    assert len(copies) == 2 and not any(p.is_symlink() for p in copies)
    sizes = subprocess.run(
        ["du", "-sh", *map(str, (workspace / "artifacts").iterdir())],
        capture_output=True,
        text=True,
        check=True,
    )
    print(f"artifact sizes (du -sh, each with its latest copy):\n{sizes.stdout}")

    checkout, steps = report_job

    report = steps[-1]
    assert report.name.startswith(".venv/bin/kafka-chaos report")
    assert report.code == 0, f"{report.out[-3000:]}\n{report.err[-3000:]}"
    notes = [line for line in report.err.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "2 run directories are copies" in notes[0], report.err
    totals = junit_totals(checkout / "report" / "junit.xml")  # a test case per repetition
    assert (totals["tests"], totals["failures"], totals["errors"]) == (2, 0, 0), totals
    cells = json.loads((checkout / "report" / "report.json").read_text())["cells"]
    assert sorted(len(cell["repetitions"]) for cell in cells) == [1, 1]  # each run once


def test_a_shard_that_died_leaves_its_cells_unknown(
    ci_user: CiUser, workspace: Path, report_job: tuple[Path, list[Step]]
) -> None:
    """The merge of shard 1's artifact alone (shard 2's job died before its upload), in the
    report job's checkout."""
    artifact = workspace / "artifacts" / "runs-1"
    assert artifact.is_dir()
    checkout = report_job[0]
    argv = f".venv/bin/kafka-chaos report {artifact} --out dead --junit dead/junit.xml"
    merged = ci_user.run(argv, checkout, {})
    assert merged.code == 2, merged.err[-3000:]
    totals = junit_totals(checkout / "dead" / "junit.xml")
    assert (totals["tests"], totals["errors"]) == (2, 1)
    junit = (checkout / "dead" / "junit.xml").read_text()
    assert "planned, no run directory: did shard 2/3 fail?" in junit
