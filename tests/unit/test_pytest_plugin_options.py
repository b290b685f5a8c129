"""The pytest plugin's options: the kafka_chaos marker and the --kafka-chaos-* command line
merged into ChaosOptions, checked by the experiment model (no Docker, no Kafka)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import kafka_chaos.testing as kafka_chaos_testing
from harness.experiment.fields import check_name
from harness.experiment.problems import SpecError
from harness.settings import load_settings
from kafka_chaos.testing.chaos import experiment_of, options_error
from kafka_chaos.testing.errors import ChaosUsageError
from kafka_chaos.testing.options import (
    CLI_OPTIONS,
    KINDS,
    OPTION_PATHS,
    ChaosOptions,
    experiment_name,
    flag_of,
    option_of,
    resolve_options,
)

pytestmark = pytest.mark.property

config_keys = st.from_regex(r"[a-z][a-z0-9]{0,6}(\.[a-z0-9]{1,6}){0,2}", fullmatch=True)
scalars = st.one_of(st.booleans(), st.integers(-(10**6), 10**6), st.text(max_size=8))
# A value of the right kind for each option (the experiment judges the range, not this).
VALUES: dict[str, st.SearchStrategy[Any]] = {
    "text": st.text(min_size=1, max_size=12).filter(str.strip),
    "whole": st.integers(-(2**40), 2**40),
    "flag": st.booleans(),
    "number": st.floats(allow_nan=False, allow_infinity=False) | st.integers(0, 10**6),
    "mapping": st.dictionaries(config_keys, scalars, max_size=4),
}
marker_kwargs = st.fixed_dictionaries(
    {}, optional={option: VALUES[kind] for option, kind in KINDS.items()}
)


def as_options(kwargs: dict[str, Any]) -> dict[str, Any]:
    """What ChaosOptions keeps of a marker's keywords: text stripped, mappings sorted."""
    kept: dict[str, Any] = {}
    for option, value in kwargs.items():
        if KINDS[option] == "mapping":
            value = tuple(sorted(value.items()))
        elif KINDS[option] == "text":
            value = value.strip()
        kept[option] = value
    return kept


@given(marker_kwargs)
def test_a_marker_gives_the_options_it_names(kwargs: dict[str, Any]) -> None:
    assert resolve_options({}, [((), kwargs)]) == ChaosOptions(**as_options(kwargs))


@given(
    marker_kwargs,
    marker_kwargs,
    st.dictionaries(st.sampled_from(list(CLI_OPTIONS)), st.integers(3, 5).map(str)),
)
def test_the_closest_marker_wins_then_the_farther_then_the_command_line(
    closest: dict[str, Any], farther: dict[str, Any], command_line: dict[str, str]
) -> None:
    options = resolve_options(command_line, [((), closest), ((), farther)])
    for option in KINDS:
        value = getattr(options, option)
        if option in closest:
            assert value == as_options(closest)[option]
        elif option in farther:
            assert value == as_options(farther)[option]
        elif option in command_line:
            expected = (
                int(command_line[option]) if KINDS[option] == "whole" else command_line[option]
            )
            assert value == expected
        else:
            assert value is None


def test_a_keyword_given_none_counts_as_not_given() -> None:
    options = resolve_options({"version": "3.9.1"}, [((), {"version": None, "brokers": None})])
    assert options == ChaosOptions(version="3.9.1")


@given(st.integers(-(10**9), 10**9))
def test_a_whole_number_on_the_command_line_is_read(brokers: int) -> None:
    assert resolve_options({"brokers": f" {brokers} "}, []).brokers == brokers


@given(
    st.text(min_size=1).filter(
        lambda text: not re.fullmatch(r"\s*[+-]?[0-9]+\s*", text) and text.strip()
    )
)
def test_a_command_line_number_that_is_no_number_names_its_flag(text: str) -> None:
    with pytest.raises(ChaosUsageError, match=re.escape(flag_of("brokers"))):
        resolve_options({"brokers": text}, [])


def test_blank_command_line_values_are_not_given() -> None:
    assert resolve_options({"version": "", "brokers": "  ", "mode": None}, []) == ChaosOptions()


def test_an_unknown_keyword_is_named_with_the_closest_option() -> None:
    with pytest.raises(ChaosUsageError, match="unknown option 'brokerz'; did you mean 'brokers'"):
        resolve_options({}, [((), {"brokerz": 3})])


def test_positional_marker_arguments_are_refused() -> None:
    with pytest.raises(ChaosUsageError, match="takes keywords only"):
        resolve_options({}, [(("3.9.1",), {})])


@pytest.mark.parametrize(
    ("option", "value", "words"),
    [
        ("version", 3.9, 'must be a non-empty string .*version="3.9.1"'),
        ("brokers", True, "must be a whole number"),
        ("brokers", "3", "must be a whole number"),
        ("unclean_leader_election", 1, "must be True or False"),
        ("final_heal_timeout_s", float("inf"), "must be a finite number"),
        ("broker_config", ["a"], "must be a mapping"),
        ("topic_config", {"retention.ms": [1]}, ".*values strings, numbers or booleans"),
    ],
)
def test_a_value_of_the_wrong_kind_names_the_option(option: str, value: Any, words: str) -> None:
    with pytest.raises(ChaosUsageError, match=rf"kafka_chaos\({option}=\.\.\.\): {words}"):
        resolve_options({}, [((), {option: value})])


@given(st.text(max_size=300))
@example("test_acks[all-3]")
@example("")
@example("---")
def test_every_test_name_gives_a_valid_experiment_name(test_name: str) -> None:
    name = experiment_name(test_name)
    assert check_name(name) == name
    assert experiment_name(name) == name


def test_a_parametrized_test_keeps_its_parameters_in_the_name() -> None:
    assert experiment_name("test_acks[all-3.9.1]") == "test_acks-all-3-9-1"


# Valid clusters and topics: brokers 3..5, replicas up to the brokers, min ISR up to those.
valid_options = st.integers(3, 5).flatmap(
    lambda brokers: st.integers(1, brokers).flatmap(
        lambda replicas: st.builds(
            ChaosOptions,
            version=st.sampled_from([None, "4.3.1", "3.9.1", "0.11.0.3"]),
            brokers=st.just(brokers),
            partitions=st.integers(1, 12),
            replication_factor=st.just(replicas),
            min_insync_replicas=st.integers(1, replicas),
            unclean_leader_election=st.booleans(),
            topic_config=st.just((("retention.ms", 60000),)),
            seed=st.integers(0, 2**32),
        )
    )
)


@given(valid_options)
def test_valid_options_make_the_experiment_they_describe(options: ChaosOptions) -> None:
    spec = experiment_of(options, "t")
    assert spec.kafka.brokers == options.brokers
    assert spec.kafka.version == (options.version or load_settings().kafka_version)
    assert spec.topic.partitions == options.partitions
    assert spec.topic.replication_factor == options.replication_factor
    assert spec.topic.min_insync_replicas == options.min_insync_replicas
    assert spec.topic.unclean_leader_election == options.unclean_leader_election
    assert spec.topic.config == {"retention.ms": 60000}
    assert spec.seed == options.seed
    assert spec.faults.schedule == []


def test_options_the_experiment_refuses_are_named_by_option() -> None:
    with pytest.raises(SpecError) as refused:
        experiment_of(ChaosOptions(brokers=7, replication_factor=3, version="4.3.1"), "t")
    message = str(options_error(refused.value))
    assert message.startswith("the kafka_chaos options are invalid:")
    assert "brokers (kafka.brokers): " in message


def test_a_mode_the_version_lacks_is_refused() -> None:
    with pytest.raises(SpecError) as refused:
        experiment_of(ChaosOptions(version="4.3.1", mode="zookeeper"), "t")
    assert "mode (kafka.mode): " in str(options_error(refused.value))


@pytest.mark.parametrize(
    ("path", "option"),
    [
        ("kafka.brokers", "brokers"),
        ("topic.config.retention.ms", "topic_config"),
        ("faults.final_heal_timeout_s", "final_heal_timeout_s"),
        ("producer.acks", None),
        ("kafka.brokersx", None),
    ],
)
def test_a_problem_path_names_its_option(path: str, option: str | None) -> None:
    assert option_of(path) == option


def test_every_option_sets_a_field_of_the_experiment() -> None:
    assert set(OPTION_PATHS) == set(KINDS) == {f for f in ChaosOptions.__dataclass_fields__}
    document = ChaosOptions(
        version="4.3.1", brokers=3, broker_config=(("a.b", 1),), seed=1
    ).document("t")
    assert document == {
        "name": "t",
        "kafka": {"version": "4.3.1", "brokers": 3, "broker_config": {"a.b": 1}},
        "seed": 1,
    }


@pytest.mark.parametrize("name", kafka_chaos_testing.__all__)
def test_every_public_name_of_the_testing_package_imports_from_it(name: str) -> None:
    """`kafka_chaos.testing` imports its names lazily; each must be where it says."""
    assert getattr(kafka_chaos_testing, name).__name__ == name
