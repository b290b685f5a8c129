"""Which faults share a node in a disjoint (generated) schedule, and the mark bits that let two
shapers on one node both act: share_node against a table written here, the bits a node's
shapers take against a model of who holds what."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from harness.chaos.faults import FAULT_TYPES
from harness.chaos.faults.base import share_node
from harness.chaos.faults.slots import MARK_BITS, MAX_QUEUE, Slots

SHAPED = {"delay", "drop-requests", "reorder", "duplicate"}
RULES = {"partition", "loss", "slow"}  # packets, by iptables or tc rules of their own


@given(st.sampled_from(sorted(FAULT_TYPES)), st.sampled_from(sorted(FAULT_TYPES)))
def test_two_faults_share_a_node_when_both_act_on_packets_and_one_is_shaped(held, coming):
    packets = SHAPED | RULES
    expected = held in packets and coming in packets and bool({held, coming} & SHAPED)
    assert share_node(FAULT_TYPES[held], FAULT_TYPES[coming]) is expected


def test_the_kinds_that_share_are_the_packet_kinds_of_the_registry():
    """The table above covers every packet fault the registry has (a new one must be placed)."""
    assert {name for name, kind in FAULT_TYPES.items() if kind.on_packets} == SHAPED | RULES
    assert {name for name, kind in FAULT_TYPES.items() if kind.shaped} == SHAPED


@given(
    st.lists(
        st.tuples(
            st.booleans(),
            st.sampled_from(["kafka-1", "kafka-2"]),
            st.integers(0, 9),
            st.sampled_from([1, 2, MAX_QUEUE - 1, MAX_QUEUE]),
        ),
        max_size=60,
    )
)
def test_the_shapers_on_a_node_hold_distinct_bits_and_queues_and_give_them_back(actions):
    """take/give_back in any order, queue numbers drawn to collide: on each node the bits and
    the queues held are distinct, a queue is the one drawn when no shaper there holds it, and
    what is given back can be taken again (the model: what each taker holds)."""
    slots = Slots()
    held: dict[tuple[str, int], tuple[int, int]] = {}
    for take, host, taker, drawn in actions:
        node = ("net", host)
        mine = [slot for (owner, _), slot in held.items() if owner == host]
        if take and (host, taker) not in held:
            bit, queue = slots.take(node, drawn)
            assert 1 <= queue <= MAX_QUEUE
            assert queue == drawn or drawn in {q for _, q in mine}
            held[(host, taker)] = (bit, queue)
        elif not take and (host, taker) in held:
            slots.give_back(node, held.pop((host, taker))[0])
        for h in ("kafka-1", "kafka-2"):
            theirs = [slot for (owner, _), slot in held.items() if owner == h]
            bits, queues = [b for b, _ in theirs], [q for _, q in theirs]
            assert len(set(bits)) == len(bits) and set(bits) <= set(MARK_BITS)
            assert len(set(queues)) == len(queues)


def test_a_node_takes_as_many_shapers_as_there_are_bits_and_no_more():
    import pytest

    from harness.chaos.faults import FaultError

    slots = Slots()
    taken = {slots.take(("net", "kafka-1"), 7)[0] for _ in MARK_BITS}
    assert taken == set(MARK_BITS)
    with pytest.raises(FaultError, match="kafka-1"):
        slots.take(("net", "kafka-1"), 7)
    assert slots.take(("net", "kafka-2"), 7) == (MARK_BITS[0], 7)  # another node has its own
