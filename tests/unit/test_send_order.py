"""Non-monotonic sends (analysis/checks/sends.py): a producer's successive acknowledged sends to
one partition acknowledged at or below the previous one's offset, whatever their keys.

Against an oracle written here: per producer (msg_id // 10^12) and partition, the sends in
msg_id order, and each one acknowledged at or below the one before. Generated histories append
every send to its partition's log in the order they were made (clean: nothing found), then
plant backward acknowledgements (each found); the rows come in any order. The oracle is shown
telling a planted wrong answer (a check that mixes the producers) from the right one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.checks.messages import RunInput, check_run
from analysis.checks.sends import PRODUCER_IDS, backward_sends
from analysis.judge.outcomes import Verdict
from analysis.judge.verdicts import partitions_shown
from analysis.model.anomalies import AnomalyName
from analysis.model.results import Example
from tests.examples import examples
from tests.unit.reconcile_runs import T0_US, read, sent, write_run
from tests.unit.test_caches_lost_together import every_cache_lost
from tests.unit.verdict_runs import AP, CP, MIN1, fault, judge_repetition, result, sample

Send = tuple[int, int, int]  # msg_id, partition, acknowledged offset


@st.composite
def clean_history(draw: st.DrawFn) -> list[Send]:
    """Up to three producers' sends to up to three partitions, interleaved in time; each send
    appended to its partition's log when made, so each producer's offsets rise per partition."""
    producers = draw(st.integers(1, 3))
    made = draw(st.lists(st.tuples(st.integers(0, producers - 1), st.integers(0, 2)), max_size=40))
    next_offset = [0, 0, 0]
    next_send = [0] * producers
    history = []
    for producer, partition in made:
        msg_id = producer * PRODUCER_IDS + next_send[producer]
        history.append((msg_id, partition, next_offset[partition]))
        next_send[producer] += 1
        next_offset[partition] += 1 + draw(st.integers(0, 2))  # other writers' records between
    return history


@st.composite
def planted_history(draw: st.DrawFn) -> list[Send]:
    """A clean history with some sends acknowledged at or below an earlier offset of their
    partition (a retried batch appended after a later one)."""
    history = draw(clean_history())
    for i in draw(st.sets(st.integers(0, max(len(history) - 1, 0)), max_size=5)):
        if i < len(history):
            msg_id, partition, offset = history[i]
            history[i] = (msg_id, partition, max(0, offset - draw(st.integers(0, 6))))
    return history


def oracle(history: list[Send]) -> list[Send]:
    """Each send at or below its producer's previous send's offset in its partition, with
    that offset, by msg_id."""
    previous: dict[tuple[int, int], int] = {}
    found = []
    for msg_id, partition, offset in sorted(history):
        key = (msg_id // PRODUCER_IDS, partition)
        if key in previous and offset <= previous[key]:
            found.append((msg_id, partition, previous[key]))
        previous[key] = offset
    return found


def checked(history: list[Send]) -> list[Send]:
    columns = np.array(history, dtype=np.int64).reshape(-1, 3).T
    found = backward_sends(columns[0], columns[1], columns[2])
    return list(
        zip(
            found.msg_id.tolist(), found.partition.tolist(), found.previous_offset.tolist(),
            strict=True,
        )
    )  # fmt: skip


@settings(max_examples=examples(1.0))
@given(clean_history(), st.randoms())
def test_a_clean_history_has_no_backward_send(history: list[Send], rng) -> None:
    rng.shuffle(history)
    assert checked(history) == oracle(history) == []


@settings(max_examples=examples(1.0))
@given(planted_history(), st.randoms())
def test_every_planted_backward_send_is_found(history: list[Send], rng) -> None:
    rng.shuffle(history)
    assert checked(history) == oracle(history)


def mixing_producers(history: list[Send]) -> list[Send]:
    """A planted wrong answer: sends ordered by partition and offset of ack alone."""
    return [
        (b[0], b[1], a[2])
        for a, b in zip(sorted(history), sorted(history)[1:], strict=False)
        if a[1] == b[1] and b[2] <= a[2]
    ]


def test_the_oracle_tells_a_wrong_answer_from_the_right_one() -> None:
    # Two producers interleaved on one partition: each one's own offsets rise.
    history = [(0, 0, 0), (1, 0, 2), (PRODUCER_IDS, 0, 1), (PRODUCER_IDS + 1, 0, 3)]
    assert oracle(history) == checked(history) == []
    assert mixing_producers(history) != oracle(history)


def test_a_run_counts_its_backward_sends_whatever_their_keys(tmp_path: Path) -> None:
    second = PRODUCER_IDS  # producer 1's first send
    acked = [
        sent(0, 0, key="a"),
        sent(1, 5, key="b"),  # p0 @5
        sent(2, 3, key="c"),  # p0 @3, after @5: backward, another key
        sent(3, 1, partition=1),
        sent(4, None, partition=1),  # no offset: not judged
        sent(5, 0, partition=1, status="failed"),  # not acknowledged: not judged
        sent(second, 4, key="d", send_us=T0_US),  # producer 1's own order starts afresh
        sent(second + 1, 4, key="e", send_us=T0_US + 1),  # at its previous offset: backward
    ]
    readback = [read(0, 0), read(2, 3), read(3, 1, partition=1), read(second, 4)]
    facts = check_run(RunInput(write_run(tmp_path, "c", acked, readback), True, False))
    name = AnomalyName.NONMONOTONIC_SEND
    assert facts.counts[name] == 2
    assert facts.examples[name] == [
        {"msg_id": 2, "partition": 0, "offset": 3, "from_offset": 5},
        {"msg_id": second + 1, "partition": 0, "offset": 4, "from_offset": 4},
    ]


def test_a_backward_send_violates_only_where_order_per_partition_is_promised() -> None:
    row = {"msg_id": 9, "partition": 2, "offset": 4, "from_offset": 7}
    examples_ = {"nonmonotonic_send": [row]}
    idempotent = judge_repetition(result(CP, nonmonotonic_send=1, examples=examples_), [])
    assert idempotent.verdict == Verdict.VIOLATION
    assert any(
        r.startswith("forbidden send backwards: 1 send backwards") and "msg_id 9 at p2@4" in r
        for r in idempotent.reasons
    )
    one_in_flight = judge_repetition(result(MIN1, nonmonotonic_send=1, examples=examples_), [])
    assert one_in_flight.verdict == Verdict.VIOLATION
    # Without idempotence and with 5 in flight, order is not promised: counted and allowed.
    loose = judge_repetition(result(AP, nonmonotonic_send=1, examples=examples_), [])
    assert loose.verdict != Verdict.VIOLATION
    assert any("1 send backwards" in r and "allowed" in r for r in loose.reasons)


def test_a_backward_send_where_loss_is_allowed_is_the_truncated_log_not_a_violation() -> None:
    """Idempotence promises order, but a power loss of all may truncate the log (loss allowed),
    and the next sends take the freed offsets: counted and allowed, as the loss is (by the
    partition's mechanism where its roles are known, else by the cell's class)."""
    row = {"msg_id": 9, "partition": 0, "offset": 4, "from_offset": 7}
    examples_ = {"nonmonotonic_send": [row]}
    powered_off = {**CP, "fault_class": "all-power-loss"}
    unshown = {"nonmonotonic_send": [{**row, "partition": None}]}
    judged = judge_repetition(result(powered_off, nonmonotonic_send=1, examples=unshown), [])
    assert judged.verdict != Verdict.VIOLATION
    assert any(
        "1 send backwards" in r and "allowed where loss is (a truncated log" in r
        for r in judged.reasons
    )
    mixed = {**CP, "kafka_version": "3.4.0", "fault_class": "mixed"}
    res = result(mixed, nonmonotonic_send=1, examples=examples_)
    by_partition = judge_repetition(res, every_cache_lost())
    assert by_partition.verdict != Verdict.VIOLATION
    assert any("1 send backwards" in r and "power loss of all" in r for r in by_partition.reasons)


def test_a_backward_send_is_judged_by_what_rewrote_its_partition() -> None:
    """A send backwards takes an offset its partition's log gave up: judged, partition by
    partition, by the mechanism that rewrote that log, as the loss is (under min.insync=1 the
    ISR exception: a leader alone in the ISR when the fault struck may lose its tail)."""
    row = {"msg_id": 9, "partition": 1, "offset": 4, "from_offset": 7}
    res = result(MIN1, nonmonotonic_send=1, examples={"nonmonotonic_send": [row]})
    elsewhere = [sample(1, [1], partition=0), *fault(5, 8)]  # p0's ISR shrank, not p1's
    assert judge_repetition(res, elsewhere).verdict == Verdict.VIOLATION
    here = [sample(1, [1], partition=1), *fault(5, 8)]
    judged = judge_repetition(res, here)
    assert judged.verdict != Verdict.VIOLATION
    assert any("1 send backwards" in r and "p1" in r for r in judged.reasons)
    # More sends backwards than the examples show: their partitions are unknown, and the
    # cell's rule judges them all (here: some partition's ISR shrank).
    unshown = result(MIN1, nonmonotonic_send=2, examples={"nonmonotonic_send": [row]})
    assert judge_repetition(unshown, elsewhere).verdict != Verdict.VIOLATION


@given(
    st.lists(st.one_of(st.none(), st.integers(0, 3)), max_size=6),
    st.integers(0, 8),
)
def test_sends_backwards_go_by_partition_only_when_every_one_is_shown(
    partitions: list[int | None], counted: int
) -> None:
    """Oracle: partition → examples there when the examples are all the check counted and
    each names its partition; else every one counted is of an unknown partition."""
    shown = [Example(msg_id=i, partition=p) for i, p in enumerate(partitions)]
    name = AnomalyName.NONMONOTONIC_SEND
    got = partitions_shown({name: shown}, {name: counted}, name)
    if counted == len(partitions) and None not in partitions:
        expected: dict[str, int] = {}
        for p in partitions:
            expected[str(p)] = expected.get(str(p), 0) + 1
        assert got == expected
    else:
        assert got == {"unknown": counted}
