"""Spark's S3A connector, for a Spark that reads what reports publish to s3a:// (the results
dataset of --results-to): hadoop-aws at the Hadoop release pyspark ships (its AWS SDK bundle
comes with it), resolved with Maven once and cached like the harness's Java programs, and the
Hadoop settings that point S3A at the AWS SDK's variables (keys, region, an S3-compatible
endpoint).

Credentials come from the AWS SDK's environment variables only (read by each JVM, never written
into the settings): S3A's default chain would also ask the instance-metadata address for them,
which a test machine must never reach.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from harness.platform.jdk import library_classpath
from harness.settings import Settings

__all__ = ["S3aError", "pyspark_hadoop_version", "s3a_jars", "s3a_spark_conf"]

_HADOOP_API = re.compile(r"^hadoop-client-api-([0-9][0-9A-Za-z.\-]*)\.jar$")


class S3aError(RuntimeError):
    """S3A cannot be set up here; the message names the problem and the fix."""


def pyspark_hadoop_version() -> str:
    """The Hadoop release of the installed pyspark (its hadoop-client-api jar); hadoop-aws
    must match it exactly."""
    import pyspark

    jars = Path(pyspark.__file__).resolve().parent / "jars"
    for jar in sorted(jars.glob("hadoop-client-api-*.jar")):
        if match := _HADOOP_API.match(jar.name):
            return match.group(1)
    raise S3aError(
        f"no hadoop-client-api jar in {jars}: this pyspark ships without Hadoop. "
        "Fix: install pyspark from PyPI (it bundles Hadoop)."
    )


def s3a_jars(settings: Settings | None = None) -> list[str]:
    """hadoop-aws and its dependencies for the installed pyspark, as jar paths (downloaded
    once, ~700 MB with the AWS SDK bundle). Spark brings its own SLF4J binding: none here."""
    classpath = library_classpath(
        "org.apache.hadoop", "hadoop-aws", pyspark_hadoop_version(), settings
    )
    return [jar for jar in classpath.split(os.pathsep) if "slf4j" not in Path(jar).name]


def s3a_spark_conf(jars: list[str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The Spark settings that read s3a:// with `jars` and the AWS variables of `environ`
    (default: this process's); S3aError naming the variable when the keys are missing."""
    env = os.environ if environ is None else environ
    missing = [name for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY") if not env.get(name)]
    if missing:
        raise S3aError(f"{' and '.join(missing)} not set. Fix: export the store's keys.")
    conf = {
        "spark.jars": ",".join(jars),
        "spark.hadoop.fs.s3a.aws.credentials.provider": (
            "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider"
        ),
        "spark.hadoop.fs.s3a.endpoint.region": env.get("AWS_DEFAULT_REGION") or "us-east-1",
    }
    if endpoint := env.get("AWS_ENDPOINT_URL"):
        # An S3-compatible server answers on one host: bucket names go in the path.
        conf |= {
            "spark.hadoop.fs.s3a.endpoint": endpoint,
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": str(
                endpoint.startswith("https://")
            ).lower(),
        }
    return conf
