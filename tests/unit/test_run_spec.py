"""spec.json through its one model: what is written reads back equal, and a document that
cannot be read names the file and the field."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.rundir import layout
from harness.rundir.config import CellConfig
from harness.rundir.spec import RunSpec, RunSpecError

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
maybe_int = st.none() | st.integers(0, 1 << 40)
specs = st.builds(
    RunSpec,
    experiment=st.none() | names,
    cell=st.none() | names,
    repetition=st.none() | st.integers(0, 50),
    seed=maybe_int,
    axes=st.dictionaries(names, names, max_size=3),
    config=st.builds(
        CellConfig,
        acks=st.none() | st.sampled_from(["0", "1", "all"]),
        min_insync_replicas=st.none() | st.integers(1, 5),
        transactions=st.none() | st.booleans(),
        kafka_version=st.none() | st.sampled_from(["3.8.1", "4.3.1"]),
    ),
    started_at_us=maybe_int,
    ended_at_us=maybe_int,
    harness_error=st.none() | names,
)


@given(specs)
def test_what_is_written_reads_back_equal(tmp_path_factory, spec):
    run_dir = tmp_path_factory.mktemp("run")
    spec.write(run_dir)
    assert RunSpec.read(run_dir) == spec


def test_unknown_keys_are_kept_and_missing_ones_are_none(tmp_path):
    (tmp_path / layout.SPEC).write_text(json.dumps({"cell": "a", "resolved_schedule": [{"x": 1}]}))
    spec = RunSpec.read(tmp_path)
    assert spec.cell == "a" and spec.experiment is None and spec.topic.partitions is None
    spec.write(tmp_path)
    assert json.loads((tmp_path / layout.SPEC).read_text())["resolved_schedule"] == [{"x": 1}]


@pytest.mark.parametrize(
    "document,problem",
    [
        ([1, 2], r"spec.json: the document: Input should be an object"),
        ({"axes": [1]}, r"spec.json: axes: "),
        ({"config": {"acks": "most"}}, r"spec.json: config: config.acks: unknown acks 'most'"),
        ({"topic": {"partitions": "three"}}, r"spec.json: topic.partitions: "),
    ],
)
def test_a_document_that_cannot_be_read_names_the_field(tmp_path, document, problem):
    (tmp_path / layout.SPEC).write_text(json.dumps(document))
    with pytest.raises(RunSpecError, match=problem):
        RunSpec.read(tmp_path)


def test_no_spec_is_an_os_error(tmp_path):
    with pytest.raises(OSError):
        RunSpec.read(tmp_path)
