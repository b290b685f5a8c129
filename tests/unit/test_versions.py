"""Version facts: ordering of release numbers, the per-release image recipe, modes, features
and the defaults that changed between releases."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.platform.image import ImageError, cds_steps, maven_arguments, release_recipe
from harness.platform.versions import (
    Feature,
    Logging,
    Mode,
    broker_defaults,
    default_mode,
    lacks,
    mode_refusal,
    modes,
    recipe,
    supports,
    version_refusal,
)
from harness.rundir.release import KafkaVersion, VersionError


def v(text: str) -> KafkaVersion:
    return KafkaVersion.parse(text)


def test_release_numbers_order_as_releases_do():
    ordered = ["0.10.2.2", "0.11.0.3", "1.1.1", "2.8.2", "3.3.0", "3.3.1", "3.9.1", "4.3.1"]
    assert sorted(reversed(ordered), key=v) == ordered
    assert v("3.3.0").key == v("3.3.0.0").key  # three and four parts compare alike
    assert v("0.10.2.2") < v("0.10.10.0")  # numeric, not string, comparison
    assert str(v(" 4.3.1 ")) == "4.3.1"


@pytest.mark.parametrize("text", ["4", "3.3", "4.x", "latest", "4.3.1-rc1", "", "1.2.3.4.5"])
def test_malformed_versions_name_the_fix(text):
    with pytest.raises(VersionError, match=re.escape("e.g. 0.10.2.2")):
        v(text)


@pytest.mark.parametrize(
    ("version", "artifact", "logging", "jaxb", "zookeeper", "kraft", "cds"),
    [
        ("0.10.2.2", "kafka_2.12", Logging.LOG4J1_IN_TREE, True, True, False, "zookeeper"),
        ("0.11.0.3", "kafka_2.12", Logging.LOG4J1_IN_TREE, True, True, False, "zookeeper"),
        ("1.0.2", "kafka_2.12", Logging.LOG4J1_IN_TREE, True, True, False, "zookeeper"),
        ("1.1.1", "kafka_2.12", Logging.LOG4J1_ADDED, True, True, False, "zookeeper"),
        ("2.1.1", "kafka_2.12", Logging.LOG4J1_ADDED, False, True, False, "zookeeper"),
        ("2.4.1", "kafka_2.13", Logging.LOG4J1_ADDED, False, True, False, "zookeeper"),
        ("2.8.2", "kafka_2.13", Logging.LOG4J1_ADDED, False, True, False, "zookeeper"),
        ("3.3.2", "kafka_2.13", Logging.LOG4J1_ADDED, False, True, True, "kraft zookeeper"),
        ("3.9.1", "kafka_2.13", Logging.LOG4J1_ADDED, False, True, True, "kraft zookeeper"),
        ("4.0.0", "kafka_2.13", Logging.LOG4J2_ADDED, False, False, True, "kraft"),
        ("4.3.1", "kafka_2.13", Logging.LOG4J2_ADDED, False, False, True, "kraft"),
    ],
)
def test_recipe_per_release(version, artifact, logging, jaxb, zookeeper, kraft, cds):
    choices = recipe(v(version))
    assert (choices.artifact, choices.logging, choices.jaxb) == (artifact, logging, jaxb)
    assert (choices.zookeeper, choices.kraft) == (zookeeper, kraft)
    assert cds_steps(choices) == cds


def test_maven_arguments_select_the_pom_profiles():
    assert maven_arguments(recipe(v("0.10.2.2"))) == [
        "-Dkafka.version=0.10.2.2",
        "-Dkafka.artifact=kafka_2.12",
        "-Dkchaos.jaxb",
    ]
    assert maven_arguments(recipe(v("3.9.1"))) == [
        "-Dkafka.version=3.9.1",
        "-Dkafka.artifact=kafka_2.13",
        "-Dkchaos.log4j1",
    ]
    # 4.3.1 exactly as before the version axis: kafka_2.13 plus the log4j 2 binding.
    assert maven_arguments(recipe(v("4.3.1"))) == [
        "-Dkafka.version=4.3.1",
        "-Dkafka.artifact=kafka_2.13",
        "-Dkchaos.log4j2",
    ]


def test_the_recipe_key_differs_per_release():
    keys = {recipe(v(text)).cache_key() for text in ("0.10.2.2", "0.11.0.3", "4.3.1")}
    assert len(keys) == 3


def test_releases_older_than_the_oldest_supported_are_refused():
    assert version_refusal(v("0.10.2.2")) is None
    assert "Fix: use 0.10.2.2 or newer" in (version_refusal(v("0.10.1.1")) or "")
    with pytest.raises(ImageError, match="oldest release"):
        release_recipe("0.9.0.1")
    with pytest.raises(ImageError, match="not an Apache Kafka release"):
        release_recipe("four")


@pytest.mark.parametrize(
    ("version", "available", "default"),
    [
        ("0.10.2.2", (Mode.ZOOKEEPER,), Mode.ZOOKEEPER),
        ("3.2.3", (Mode.ZOOKEEPER,), Mode.ZOOKEEPER),
        ("3.3.1", (Mode.KRAFT, Mode.KRAFT_DEDICATED, Mode.ZOOKEEPER), Mode.KRAFT),
        ("3.9.1", (Mode.KRAFT, Mode.KRAFT_DEDICATED, Mode.ZOOKEEPER), Mode.KRAFT),
        ("4.0.0", (Mode.KRAFT, Mode.KRAFT_DEDICATED), Mode.KRAFT),
    ],
)
def test_modes_per_release(version, available, default):
    assert modes(v(version)) == available
    assert default_mode(v(version)) is default
    for mode in Mode:
        assert (mode_refusal(v(version), mode) is None) == (mode in available)


def test_refusals_say_why_and_what_to_use_instead():
    zookeeper_on_4 = mode_refusal(v("4.3.1"), Mode.ZOOKEEPER) or ""
    assert "lacks ZooKeeper mode" in zookeeper_on_4 and "Kafka < 4.0.0" in zookeeper_on_4
    assert "Fix: use kafka.mode kraft, kraft-dedicated" in zookeeper_on_4
    kraft_on_2 = mode_refusal(v("2.8.2"), Mode.KRAFT_DEDICATED) or ""
    assert "lacks KRaft mode" in kraft_on_2 and "Kafka >= 3.3.0" in kraft_on_2
    assert "Fix: use kafka.mode zookeeper" in kraft_on_2


@pytest.mark.parametrize(
    ("feature", "last_without", "first_with"),
    [
        (Feature.IDEMPOTENCE, "0.10.2.2", "0.11.0.0"),
        (Feature.TRANSACTIONS, "0.10.2.2", "0.11.0.3"),
        (Feature.LEADER_EPOCH, "0.10.2.2", "0.11.0.0"),
        (Feature.KRAFT, "3.2.3", "3.3.0"),
        (Feature.ELR, "3.9.1", "4.0.0"),
        (Feature.ASSIGNMENT_ORDER, "0.10.2.2", "2.8.2"),
    ],
)
def test_feature_spans(feature, last_without, first_with):
    assert not supports(v(last_without), feature)
    assert supports(v(first_with), feature)
    assert lacks(v(first_with), feature) is None
    assert str(feature) in (lacks(v(last_without), feature) or "")


def test_zookeeper_mode_ends_with_3_9():
    assert supports(v("3.9.1"), Feature.ZOOKEEPER_MODE)
    assert not supports(v("4.0.0"), Feature.ZOOKEEPER_MODE)


def test_defaults_that_changed_between_releases():
    assert broker_defaults(v("0.10.2.2")).unclean_leader_election_enable is True
    assert broker_defaults(v("0.11.0.3")).unclean_leader_election_enable is False
    assert broker_defaults(v("4.0.0")).elr_enabled_for_new_clusters is False
    assert broker_defaults(v("4.1.0")).elr_enabled_for_new_clusters is True
    assert broker_defaults(v("0.10.2.2")).as_properties()["unclean.leader.election.enable"] == (
        "true"
    )
    # KIP-537 (KAFKA-9102): 2.5.0 raised the ZooKeeper session and the replica lag defaults.
    for version, session, lag in (("0.10.2.2", 6000, 10000), ("2.4.1", 6000, 10000),
                                  ("2.5.0", 18000, 30000), ("3.9.1", 18000, 30000)):  # fmt: skip
        shown = broker_defaults(v(version)).as_properties()
        assert shown["zookeeper.session.timeout.ms"] == str(session)
        assert shown["replica.lag.time.max.ms"] == str(lag)


@given(st.tuples(st.integers(0, 5), st.integers(0, 12), st.integers(0, 9)))
def test_the_session_and_lag_defaults_change_once_at_2_5(parts: tuple[int, int, int]) -> None:
    """Oracle: 6 s and 10 s before 2.5.0, 18 s and 30 s from it (KIP-537), whatever the release."""
    version = v(".".join(map(str, parts)))
    new = parts >= (2, 5, 0)
    defaults = broker_defaults(version)
    assert defaults.zookeeper_session_timeout_ms == (18_000 if new else 6_000)
    assert defaults.replica_lag_time_max_ms == (30_000 if new else 10_000)


def test_the_nemesis_draws_around_the_versions_own_defaults():
    """A cell of 0.10.2.2 times its faults around a 6 s ZooKeeper session and a 10 s replica
    lag, one of 3.9.1 around 18 s and 30 s; a value the file sets wins over either."""
    from harness.experiment.load import parse_experiment
    from harness.experiment.matrix import expand
    from harness.experiment.timeouts import cell_timeouts

    def timeouts(version: str, config: dict[str, int]) -> dict[str, float]:
        kafka = {"version": version, "mode": "zookeeper", "broker_config": config}
        document = {"name": "t", "kafka": kafka, "workload": {"rate": 1, "duration_s": 10}}
        (cell,) = expand(parse_experiment(document))
        return {t.name: t.ms for t in cell_timeouts(cell.spec)}

    old, new = timeouts("0.10.2.2", {}), timeouts("3.9.1", {})
    assert (old["zookeeper.session.timeout.ms"], old["replica.lag.time.max.ms"]) == (6000, 10000)
    assert (new["zookeeper.session.timeout.ms"], new["replica.lag.time.max.ms"]) == (18000, 30000)
    tuned = timeouts("0.10.2.2", {"zookeeper.session.timeout.ms": 12000})
    assert tuned["zookeeper.session.timeout.ms"] == 12000
