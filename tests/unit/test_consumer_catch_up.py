"""The catch-up's reader: a group is caught up on a partition when nothing a read_committed
consumer could read lies past its committed offset (a transaction marker, aborted records)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError
from hypothesis import given
from hypothesis import strategies as st

from harness.workload.consumer_group.group import nothing_readable

EOF_CODE = KafkaError._PARTITION_EOF


class ScriptedReader:
    """What nothing_readable uses of a Consumer: assign, poll (the script, then None) and
    unassign; it remembers what it was assigned and whether it was unassigned."""

    def __init__(self, script: list[tuple[str, int]]):
        self.script = list(script)
        self.assigned: list = []
        self.unassigned = False

    def assign(self, partitions: list) -> None:
        self.assigned = [(tp.partition, tp.offset) for tp in partitions]

    def unassign(self) -> None:
        self.unassigned = True

    def poll(self, timeout: float):
        if not self.script:
            return None
        kind, partition = self.script.pop(0)
        if kind == "idle":
            return None
        error = {
            "record": None,
            "eof": SimpleNamespace(code=lambda: EOF_CODE),
            "other": SimpleNamespace(code=lambda: KafkaError._TRANSPORT),
        }[kind]
        return SimpleNamespace(error=lambda: error, partition=lambda: partition)


events = st.lists(
    st.tuples(st.sampled_from(["record", "eof", "other", "idle"]), st.integers(0, 2)), max_size=12
)


@pytest.mark.property
@given(st.dictionaries(st.integers(0, 2), st.integers(0, 50), min_size=1), events)
def test_caught_up_when_every_partition_ends_before_any_record(starts, script):
    reader = ScriptedReader(script)
    # The oracle: walk the script; a record first means not caught up, the end of every
    # partition asked about first means caught up, a script that runs out means not.
    expected, ended = False, set()
    for kind, partition in script:
        if kind == "record":
            break
        if kind == "eof":
            ended.add(partition)
            if ended >= set(starts):
                expected = True
                break
    assert nothing_readable(reader, "t", starts, timeout_s=0.05) == expected
    assert sorted(reader.assigned) == sorted(starts.items())
    assert reader.unassigned


def test_a_partition_without_a_committed_offset_is_behind():
    reader = ScriptedReader([("eof", 0)])
    assert nothing_readable(reader, "t", {0: -1001}) is False
    assert reader.assigned == []
