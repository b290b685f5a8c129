"""The broker image: found locally, built from the Apache Kafka release jars, or a prebuilt one.

Any release from 0.10.2.2 on builds on the same JRE 17 base; what differs per release (the
Scala build, the logging binding, extra jars, ZooKeeper, KRaft) comes from versions.recipe().
The locally built tag encodes the Kafka version and a hash of the recipe in compose/ and of
those choices, so a second build with the same inputs is a lookup that takes well under a
second.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors

from harness.platform.engine import apt_install
from harness.platform.versions import Logging, Recipe, recipe, version_refusal
from harness.rundir.release import KafkaVersion, VersionError
from harness.settings import Settings, load_settings

# The files the image build copies into its context (beside the resolved jars).
CONTEXT_FILES = (
    "Dockerfile",
    "kafka-entrypoint.sh",
    "make-cds.sh",
    "log4j2.properties",
    "log4j.properties",
)
BASE_RECIPE_FILES = ("base-packages.txt",)
# What the image's tag hashes: its context, the jars' recipe and the base image's packages.
RECIPE_FILES = (*CONTEXT_FILES, "pom.xml", *BASE_RECIPE_FILES)
IMAGE_REPO = "kafka-chaos/kafka"
BASE_REPO = "kafka-chaos/jre"

Log = Callable[[str], None]


class ImageError(RuntimeError):
    """The broker image can be neither found nor built; the message says why and the fix."""


@dataclass(frozen=True)
class BrokerImage:
    """An image the cluster can run, and how it was obtained."""

    tag: str
    image_id: str
    kafka_version: str
    source: str  # "cached" | "built" | "prebuilt"
    seconds: float


def recipe_hash(compose_dir: Path, files: tuple[str, ...], extra: str = "") -> str:
    """Hex sha256 over the named recipe files' names and bytes, plus `extra` (e.g. a version)."""
    digest = hashlib.sha256(extra.encode())
    for name in files:
        digest.update(name.encode() + b"\0")
        digest.update((compose_dir / name).read_bytes())
    return digest.hexdigest()


def image_tag(kafka_version: str, compose_dir: Path) -> str:
    """The tag of the locally built broker image for this version and recipe."""
    choices = release_recipe(kafka_version).cache_key()
    return f"{IMAGE_REPO}:{kafka_version}-{recipe_hash(compose_dir, RECIPE_FILES, choices)[:12]}"


def release_recipe(kafka_version: str) -> Recipe:
    """The recipe of `kafka_version`; ImageError naming the fix if the harness cannot build it."""
    try:
        version = KafkaVersion.parse(kafka_version)
    except VersionError as exc:
        raise ImageError(str(exc)) from exc
    refusal = version_refusal(version)
    if refusal:
        raise ImageError(refusal)
    return recipe(version)


def maven_arguments(choices: Recipe) -> list[str]:
    """The pom.xml properties that select this release's artifact, logging and extra jars."""
    args = [f"-Dkafka.version={choices.version}", f"-Dkafka.artifact={choices.artifact}"]
    if choices.logging is Logging.LOG4J2_ADDED:
        args.append("-Dkchaos.log4j2")
    elif choices.logging is Logging.LOG4J1_ADDED:
        args.append("-Dkchaos.log4j1")
    if choices.jaxb:
        args.append("-Dkchaos.jaxb")
    return args


def cds_steps(choices: Recipe) -> str:
    """make-cds.sh's steps for this release: the KRaft archives first, where it has KRaft."""
    steps = (["kraft"] if choices.kraft else []) + (["zookeeper"] if choices.zookeeper else [])
    return " ".join(steps)


def base_tag(compose_dir: Path) -> str:
    """The tag of the JRE base image for this package list."""
    return f"{BASE_REPO}:bookworm-{recipe_hash(compose_dir, BASE_RECIPE_FILES)[:12]}"


def _local_image(client: docker.DockerClient, ref: str) -> str | None:
    try:
        return client.images.get(ref).id
    except docker.errors.ImageNotFound:
        return None


def _base_packages(compose_dir: Path) -> list[str]:
    lines = (compose_dir / "base-packages.txt").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def _ensure_mmdebstrap(log: Log) -> bool:
    """True when mmdebstrap is usable, installing Debian's package as root if it is missing."""
    if shutil.which("mmdebstrap"):
        return True
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return False
    log("installing mmdebstrap (Debian package) to build the JRE base image")
    apt_install("mmdebstrap")
    return shutil.which("mmdebstrap") is not None


def ensure_base(client: docker.DockerClient, settings: Settings, log: Log) -> str:
    """Tag of the JRE base image: found, made with mmdebstrap + docker import, or built."""
    tag = base_tag(settings.compose_dir)
    if _local_image(client, tag):
        return tag
    packages = _base_packages(settings.compose_dir)
    if _ensure_mmdebstrap(log):
        log(f"building base {tag} with mmdebstrap ({', '.join(packages)})")
        with tempfile.TemporaryDirectory(prefix="kchaos-base-") as tmp:
            rootfs = Path(tmp) / "rootfs.tar"
            subprocess.run(
                [
                    "mmdebstrap",
                    "--quiet",
                    "--variant=apt",
                    f"--include={','.join(packages)}",
                    "bookworm",
                    str(rootfs),
                ],
                check=True,
            )
            subprocess.run(
                ["docker", "import", str(rootfs), tag], check=True, stdout=subprocess.DEVNULL
            )
        return tag
    log(f"building base {tag} from Dockerfile.base (needs a registry)")
    _docker_build(settings.compose_dir, settings.compose_dir / "Dockerfile.base", tag, {})
    return tag


def resolve_jars(kafka_version: str, dest: Path, compose_dir: Path) -> None:
    """Copy the Kafka release jars and their dependencies from Maven Central into `dest`."""
    choices = release_recipe(kafka_version)
    if shutil.which("mvn") is None:
        raise ImageError("Maven (mvn) is not installed. Fix: apt-get install maven, then rerun.")
    dest.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        [
            "mvn",
            "-q",
            "-B",
            "-f",
            str(compose_dir / "pom.xml"),
            *maven_arguments(choices),
            f"-DoutputDirectory={dest}",
            "-DincludeScope=runtime",
            "dependency:copy-dependencies",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-5:])
        raise ImageError(
            f"Maven could not resolve Apache Kafka {kafka_version}:\n{tail}\n"
            "Fix: pick a released version (e.g. --kafka-version 4.3.1) and check that Maven "
            "Central is reachable."
        )


def _docker_build(context: Path, dockerfile: Path, tag: str, build_args: dict[str, str]) -> None:
    argv = ["docker", "build", "-q", "-f", str(dockerfile), "-t", tag]
    for key, value in build_args.items():
        argv += ["--build-arg", f"{key}={value}"]
    result = subprocess.run([*argv, str(context)], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise ImageError(f"docker build of {tag} failed:\n{result.stderr.strip()[-2000:]}")


def build_image(
    client: docker.DockerClient, kafka_version: str, settings: Settings, log: Log
) -> str:
    """Build the broker image for `kafka_version` and return its tag."""
    tag = image_tag(kafka_version, settings.compose_dir)
    choices = release_recipe(kafka_version)
    base = ensure_base(client, settings, log)
    log(f"resolving Apache Kafka {kafka_version} jars with Maven")
    with tempfile.TemporaryDirectory(prefix="kchaos-image-") as tmp:
        context = Path(tmp)
        resolve_jars(kafka_version, context / "libs", settings.compose_dir)
        for name in CONTEXT_FILES:
            shutil.copy2(settings.compose_dir / name, context / name)
        log(f"building {tag}")
        build_args = {
            "BASE": base,
            "KAFKA_VERSION": kafka_version,
            "CDS_STEPS": cds_steps(choices),
        }
        _docker_build(context, context / "Dockerfile", tag, build_args)
    # A stable alias for manual use (compose/docker-compose.yml); runs use the hashed tag.
    client.images.get(tag).tag(IMAGE_REPO, kafka_version)
    return tag


def prebuilt_image(client: docker.DockerClient, ref: str, log: Log) -> BrokerImage:
    """A prebuilt image such as apache/kafka:4.3.1: local if present, else pulled."""
    started = time.monotonic()
    image_id = _local_image(client, ref)
    source = "cached"
    if image_id is None:
        log(f"pulling {ref}")
        try:
            image_id = client.images.pull(ref).id
        except docker.errors.APIError as exc:
            raise ImageError(
                f"image {ref} is not local and cannot be pulled ({exc.explanation or exc}). "
                "Fix: omit --image to build the broker image locally from Maven Central."
            ) from exc
        source = "prebuilt"
    version = ref.rsplit(":", 1)[1] if ":" in ref else "unknown"
    return BrokerImage(ref, image_id, version, source, time.monotonic() - started)


def ensure_image(
    kafka_version: str | None = None,
    *,
    image: str | None = None,
    rebuild: bool = False,
    settings: Settings | None = None,
    log: Log = print,
) -> BrokerImage:
    """The broker image to run: `image` if given, else the cached or freshly built local one."""
    settings = settings or load_settings()
    client = docker.from_env()
    if image or settings.image:
        return prebuilt_image(client, image or settings.image or "", log)
    version = kafka_version or settings.kafka_version
    started = time.monotonic()
    tag = image_tag(version, settings.compose_dir)
    image_id = None if rebuild else _local_image(client, tag)
    source = "cached"
    if image_id is None:
        build_image(client, version, settings, log)
        image_id = client.images.get(tag).id
        source = "built"
    return BrokerImage(tag, image_id, version, source, time.monotonic() - started)


def main() -> int:
    """`python -m harness.platform.image [VERSION]`: ensure the broker image and print its tag."""
    import sys

    version = sys.argv[1] if len(sys.argv) > 1 else None
    try:
        built = ensure_image(version)
    except (ImageError, subprocess.CalledProcessError) as exc:
        print(f"broker image: {exc}", file=sys.stderr)
        return 1
    print(f"broker image: {built.tag} ({built.source} in {built.seconds:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
