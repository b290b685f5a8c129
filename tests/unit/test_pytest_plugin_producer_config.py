"""The pytest plugin reads a test's own producer settings as the experiment's producer
section: librdkafka's names and spellings, its defaults, idempotence's adjustments."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from harness.experiment.fields import PRODUCER_KEY_FIELDS, PRODUCER_OWNED_KEYS
from kafka_chaos.testing.chaos import experiment_of
from kafka_chaos.testing.errors import ChaosUsageError
from kafka_chaos.testing.options import ChaosOptions
from kafka_chaos.testing.producer_config import LIBRDKAFKA_DEFAULTS, producer_section

pytestmark = pytest.mark.property

NAMES = {
    field: [k for k, f in PRODUCER_KEY_FIELDS.items() if f == field]
    for field in LIBRDKAFKA_DEFAULTS
}
ACKS = {"all": ["all", "ALL", "-1", -1], "1": ["1", 1], "0": ["0", 0]}
# Other settings librdkafka knows, each with values it takes (validation asks librdkafka: a
# key it does not know is refused, tests/unit/test_client_config.py).
other_settings = {
    "socket.timeout.ms": st.integers(10, 300_000),
    "batch.num.messages": st.integers(1, 1_000_000),
    "compression.type": st.sampled_from(["none", "gzip", "snappy", "lz4", "zstd"]),
    "socket.nagle.disable": st.booleans(),
}
not_settings = st.sampled_from([print, object(), [1, 2], {"a": 1}, None])


@st.composite
def client_configs(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """A confluent_kafka.Producer config, and the section fields an oracle expects of it."""
    config: dict[str, Any] = {"bootstrap.servers": "127.0.0.1:9092"}
    expected = dict(LIBRDKAFKA_DEFAULTS)
    idempotent = draw(st.booleans())
    if draw(st.booleans()):
        # librdkafka refuses idempotence without acks=all, as the experiment does
        acks = "all" if idempotent else draw(st.sampled_from(list(ACKS)))
        config[draw(st.sampled_from(NAMES["acks"]))] = draw(st.sampled_from(ACKS[acks]))
        expected["acks"] = acks
    if draw(st.booleans()) or idempotent:
        config["enable.idempotence"] = draw(
            st.sampled_from([idempotent, str(idempotent).lower(), str(idempotent).upper()])
        )
        expected["enable_idempotence"] = idempotent
    if idempotent and "acks" not in {PRODUCER_KEY_FIELDS.get(k) for k in config}:
        expected["acks"] = "all"  # librdkafka's adjustment
    if idempotent:
        expected["max_in_flight"] = 5
    for field in ("max_in_flight", "linger_ms", "request_timeout_ms", "retries"):
        if draw(st.booleans()):
            # librdkafka's own bounds: idempotence needs retries > 0
            low = {"max_in_flight": 1, "request_timeout_ms": 1, "retries": int(idempotent)}
            high = 5 if field == "max_in_flight" else 10_000
            value = draw(st.integers(low.get(field, 0), high))
            config[draw(st.sampled_from(NAMES[field]))] = draw(st.sampled_from([value, str(value)]))
            expected[field] = value
    for key in draw(st.lists(st.sampled_from(sorted(other_settings)), max_size=3, unique=True)):
        config[key] = draw(other_settings[key])
    for key in draw(st.lists(st.sampled_from(["on_delivery", "error_cb", "logger"]), unique=True)):
        config[key] = draw(not_settings)
    return config, expected


@given(client_configs())
def test_the_section_holds_what_the_client_would_use(case: tuple[dict, dict]) -> None:
    config, expected = case
    section = producer_section(config)
    spec_producer = experiment_of(ChaosOptions(), "t", producer=section).producer
    for field, value in expected.items():
        assert getattr(spec_producer, field) == value, field
    extra = {k: v for k, v in config.items() if k not in PRODUCER_OWNED_KEYS}
    extra = {k: v for k, v in extra.items() if isinstance(v, str | int | float | bool)}
    assert spec_producer.config == extra


def test_an_empty_config_is_librdkafkas_defaults() -> None:
    assert producer_section({}) == LIBRDKAFKA_DEFAULTS


@given(st.sampled_from(sorted(NAMES)).flatmap(lambda field: st.permutations(NAMES[field])))
def test_one_setting_under_two_names_is_refused(names: list[str]) -> None:
    assume(len(names) > 1)
    with pytest.raises(ChaosUsageError, match="two names of one setting"):
        producer_section({names[0]: 1, names[1]: 1})


def test_a_transactional_producer_is_refused() -> None:
    with pytest.raises(ChaosUsageError, match=r"transactional\.id is set"):
        producer_section({"transactional.id": "t"})


def test_a_config_that_is_no_mapping_is_refused() -> None:
    with pytest.raises(ChaosUsageError, match="must be the settings mapping"):
        producer_section([("acks", "all")])  # type: ignore[arg-type]


def test_settings_librdkafka_would_refuse_are_refused_by_the_experiment() -> None:
    from harness.experiment.problems import SpecError

    with pytest.raises(SpecError, match=r"enable_idempotence requires producer\.acks: all"):
        experiment_of(
            ChaosOptions(), "t", producer=producer_section({"enable.idempotence": True, "acks": 1})
        )
