"""The S3A settings `kafka-chaos spark-s3a` prints, from the AWS variables (pure), and the
Hadoop release hadoop-aws must match. Spark reading s3a:// for real: tests/unit/test_publish.py."""

from __future__ import annotations

from pathlib import Path

import pyspark
import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis.spark.s3a import S3aError, pyspark_hadoop_version, s3a_spark_conf
from kafka_chaos.cli import main

KEYS = {"AWS_ACCESS_KEY_ID": "id", "AWS_SECRET_ACCESS_KEY": "secret"}
PROVIDER = "spark.hadoop.fs.s3a.aws.credentials.provider"


@given(
    st.sampled_from(["http", "https"]),
    st.from_regex(r"[a-z0-9.]{1,20}(:[0-9]{2,5})?", fullmatch=True),
    st.one_of(st.none(), st.sampled_from(["eu-west-1", "us-east-1"])),
)
def test_an_endpoint_is_reached_by_path_with_tls_as_its_scheme_says(scheme, host, region):
    env = {**KEYS, "AWS_ENDPOINT_URL": f"{scheme}://{host}"}
    if region:
        env["AWS_DEFAULT_REGION"] = region
    conf = s3a_spark_conf(["a.jar", "b.jar"], env)
    assert conf["spark.jars"] == "a.jar,b.jar"
    assert conf["spark.hadoop.fs.s3a.endpoint"] == f"{scheme}://{host}"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == str(scheme == "https").lower()
    assert conf["spark.hadoop.fs.s3a.endpoint.region"] == (region or "us-east-1")
    # The keys stay in the environment: never in settings a command line would show.
    assert not any("secret" in value for value in conf.values())
    assert conf[PROVIDER].endswith("EnvironmentVariableCredentialsProvider")


def test_without_an_endpoint_s3a_goes_to_aws_itself():
    conf = s3a_spark_conf([], KEYS)
    assert "spark.hadoop.fs.s3a.endpoint" not in conf
    assert "spark.hadoop.fs.s3a.path.style.access" not in conf


@pytest.mark.parametrize("missing", sorted(KEYS))
def test_missing_keys_are_named_with_the_fix(missing, monkeypatch, capsys):
    with pytest.raises(S3aError, match=f"{missing} not set. Fix: export"):
        s3a_spark_conf([], {k: v for k, v in KEYS.items() if k != missing})
    for name in KEYS:
        monkeypatch.delenv(name, raising=False)
    assert main(["spark-s3a"]) == 2
    assert "not set. Fix:" in capsys.readouterr().err


def test_hadoop_aws_matches_the_hadoop_pyspark_ships():
    version = pyspark_hadoop_version()
    jars = Path(pyspark.__file__).resolve().parent / "jars"
    assert (jars / f"hadoop-client-api-{version}.jar").is_file()
