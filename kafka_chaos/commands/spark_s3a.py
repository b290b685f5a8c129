"""`kafka-chaos spark-s3a`: the pyspark / spark-submit arguments that let Spark read s3a://
(hadoop-aws for the installed pyspark, resolved with Maven; the store from the AWS variables)."""

from __future__ import annotations

import argparse
import shlex
import sys

from harness.settings import Settings
from kafka_chaos.commands.common import EXIT_ERROR, EXIT_OK

NAME = "spark-s3a"
HELP = "print the Spark arguments that read s3a:// (e.g. a --results-to dataset)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No arguments: the store comes from AWS_ENDPOINT_URL, AWS_DEFAULT_REGION and the keys."""


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Print `--jars ... --conf k=v ...` on one line (exit 0), or the problem and fix (2)."""
    from analysis.spark.s3a import S3aError, s3a_jars, s3a_spark_conf
    from harness.platform.jdk import JavaBuildError

    try:
        conf = s3a_spark_conf(s3a_jars(settings))
    except (S3aError, JavaBuildError) as exc:
        print(f"kafka-chaos spark-s3a: {exc}", file=sys.stderr)
        return EXIT_ERROR
    words = ["--jars", conf.pop("spark.jars")]
    for key, value in conf.items():
        words += ["--conf", f"{key}={value}"]
    print(shlex.join(words))
    return EXIT_OK
