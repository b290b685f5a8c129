"""The rules table of the per-message classes (RULES in analysis/checks/messages/classes.py),
which both engines evaluate: exactly the registry's message classes and, for any facts of a
message, the classes an oracle written here from the registry's meanings gives."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from analysis.checks.messages.classes import RULES, Fact, decide
from analysis.model.anomalies import LOSS_CLASSES, AnomalyName, Check, classes_of


@dataclass(frozen=True)
class Message:
    """One message's independent facts; every Fact is one of them or its negation."""

    journalled: bool
    status: str  # ok, failed or indeterminate
    reads: int  # distinct records holding it
    expired: bool
    proven: bool
    located: bool
    slot_read: bool
    holds_self: bool


def test_the_rules_are_the_registrys_message_classes_in_its_order() -> None:
    assert tuple(RULES) == classes_of(Check.MESSAGE)


messages = st.lists(
    st.builds(
        Message,
        journalled=st.booleans(),
        status=st.sampled_from(("ok", "failed", "indeterminate")),
        reads=st.integers(0, 3),
        expired=st.booleans(),
        proven=st.booleans(),
        located=st.booleans(),
        slot_read=st.booleans(),
        holds_self=st.booleans(),
    ),
    min_size=1,
    max_size=40,
)


def _facts(batch: list[Message]) -> dict[Fact, np.ndarray]:
    def column(name: str) -> np.ndarray:
        return np.array([getattr(m, name) for m in batch])

    status, reads = column("status"), column("reads")
    expired, proven, journalled = column("expired"), column("proven"), column("journalled")
    return {
        Fact.JOURNALLED: journalled,
        Fact.OK: status == "ok",
        Fact.FAILED: status == "failed",
        Fact.INDETERMINATE: status == "indeterminate",
        Fact.READ: reads > 0,
        Fact.READ_TWICE: reads > 1,
        Fact.EXPIRED: expired,
        Fact.PROVEN: proven,
        Fact.LOCATED: column("located"),
        Fact.SLOT_READ: column("slot_read"),
        Fact.ELSEWHERE: ~column("holds_self"),
    }


def _oracle(m: Message) -> set[AnomalyName]:
    """The classes of one message, written from the definitions, one by one."""
    acked = m.journalled and m.status == "ok"
    missing = acked and m.reads == 0 and not m.expired
    at_slot_not_self = m.status == "ok" and m.located and not m.holds_self
    found = {
        AnomalyName.LOST: missing and m.proven,
        AnomalyName.UNSEEN: missing and not m.proven,
        AnomalyName.EXPIRED: acked and m.reads == 0 and m.expired,
        AnomalyName.OFFSET_DIVERGENT: at_slot_not_self and m.slot_read,
        AnomalyName.MOVED: at_slot_not_self and m.reads > 0,
        AnomalyName.DUPLICATED: m.status == "ok" and m.reads > 1,
        AnomalyName.DUPLICATED_UNACKED: m.status != "ok" and m.reads > 1,
        AnomalyName.FAILED_PRESENT: m.status == "failed" and m.reads > 0,
        AnomalyName.INDETERMINATE_PRESENT: m.status == "indeterminate" and m.reads > 0,
        AnomalyName.PHANTOM: not m.journalled and m.reads > 0,
    }
    return {name for name, holds in found.items() if holds}


@given(messages)
def test_the_rules_give_the_oracles_classes_for_any_facts(batch: list[Message]) -> None:
    decided = decide(_facts(batch))
    for i, message in enumerate(batch):
        assert {name for name, mask in decided.items() if mask[i]} == _oracle(message)


@given(messages)
def test_the_loss_classes_split_the_missing_messages(batch: list[Message]) -> None:
    """Lost and unseen are disjoint and together every acknowledged message never read and not
    expired, whatever the read-back proves: the loss does not depend on the proof (the probe
    relies on it)."""
    facts = _facts(batch)
    loss = decide(facts, LOSS_CLASSES)
    missing = facts[Fact.JOURNALLED] & facts[Fact.OK] & ~facts[Fact.READ] & ~facts[Fact.EXPIRED]
    assert not np.any(loss[AnomalyName.LOST] & loss[AnomalyName.UNSEEN])
    assert np.array_equal(loss[AnomalyName.LOST] | loss[AnomalyName.UNSEEN], missing)
