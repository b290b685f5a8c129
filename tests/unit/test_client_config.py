"""producer.config checked by librdkafka itself at validation: unknown keys and refused values
are problems of the file, named with librdkafka's words and the nearest known name."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.experiment.client_config import librdkafka_refusal
from tests.unit.spec_documents import doc, one_cell, rejects


@pytest.mark.parametrize(
    ("config", "key", "words"),
    [
        ({"compression.typo": "lz4"}, "compression.typo", "did you mean 'compression.type'"),
        ({"compression.type": "lz5"}, "compression.type", 'Invalid value "lz5"'),
        ({"linger.ms": 5, "lingerr.ms": 5}, "lingerr.ms", "No such configuration property"),
    ],
)
def test_librdkafka_names_what_it_refuses(config, key, words) -> None:
    refused = librdkafka_refusal(config)
    assert refused is not None and refused[0] == key and words in refused[1], refused


@given(
    st.fixed_dictionaries(
        {},
        optional={
            "linger.ms": st.integers(0, 900_000),
            "compression.type": st.sampled_from(["none", "gzip", "snappy", "lz4", "zstd"]),
            "socket.nagle.disable": st.booleans(),
            "batch.num.messages": st.integers(1, 1_000_000),
        },
    )
)
def test_settings_librdkafka_takes_pass(config) -> None:
    assert librdkafka_refusal(config) is None


def test_a_refused_key_is_a_problem_of_the_file_for_librdkafka_cells_only() -> None:
    rejects(
        doc(producer={"config": {"compression.typo": "lz4"}}),
        "producer.config.compression.typo: librdkafka refuses it",
    )
    # The Java client's own settings are the Java client's business (max.block.ms).
    one_cell(doc(producer={"config": {"max.block.ms": 10_000}}, workload={"client": "java:4.3.1"}))


def test_a_users_producer_properties_decide_what_the_cell_is_judged_by(tmp_path) -> None:
    """A Java producer.properties as users keep it: its acks and idempotence become the
    cell's, so the guarantee the cell is held to is the file's."""
    import argparse

    from harness.experiment.matrix import expand
    from harness.experiment.plan import cell_config
    from kafka_chaos.commands.common import resolved_experiment

    experiment = tmp_path / "mine.yaml"
    experiment.write_text("name: mine\nworkload: {rate: 100, duration_s: 10}\n")
    properties = tmp_path / "producer.properties"
    properties.write_text(
        "bootstrap.servers=kafka:9092\n"
        "key.serializer=org.apache.kafka.common.serialization.StringSerializer\n"
        "acks=1\nenable.idempotence=false\nlinger.ms=20\ncompression.type=lz4\n"
    )
    args = argparse.Namespace(producer_config=properties, topic_config=None, set=[])
    (cell,) = expand(resolved_experiment(experiment, args))
    config = cell_config(cell, []).as_json()
    assert (config["acks"], config["enable_idempotence"]) == ("1", False)
    assert cell.spec.producer.linger_ms == 20
    assert cell.spec.producer.config == {"compression.type": "lz4"}
