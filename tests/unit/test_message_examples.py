"""What the message check shows and hides, against plain Python: the order examples are chosen
in (lowest msg_id, then partition and offset, rows without a msg_id last), example rows,
per-partition counts and the missing list from a hand-made message table, the sensitivity
probe's hash (splitmix64) and the records it hides."""

from __future__ import annotations

import warnings

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis.checks.messages.columns import NO_ID, NULL, Reads
from analysis.checks.messages.examples import (
    MAX_EXAMPLES,
    by_partition,
    example_order,
    examples_of,
    identity_facts,
    missing_of,
    reordered_examples,
    value_of,
)
from analysis.checks.messages.index import Messages
from analysis.model.anomalies import ANOMALY_NAMES, AnomalyName


def test_an_example_row_sorts_by_msg_id_then_where_it_is() -> None:
    assert example_order({"msg_id": 7, "partition": 2, "offset": 30}) == (False, 7, 2, 30)
    assert example_order({"msg_id": None, "partition": 1, "offset": 4}) == (True, 0, 1, 4)
    assert example_order({"msg_id": 0}) == (False, 0, -1, -1)
    assert example_order({"msg_id": 3, "partition": None, "offset": None}) == (False, 3, -1, -1)
    assert example_order({"msg_id": 3, "partition": 0, "offset": 0}) == (False, 3, 0, 0)


ROW = st.fixed_dictionaries(
    {
        "msg_id": st.none() | st.integers(0, 5),
        "partition": st.none() | st.integers(0, 2),
        "offset": st.none() | st.integers(0, 3),
    }
)


@pytest.mark.property
@given(st.lists(ROW, max_size=12))
def test_sorted_examples_put_lower_ids_first_and_rows_without_one_last(rows: list[dict]) -> None:
    ordered = sorted(rows, key=example_order)

    def oracle(row: dict) -> tuple:
        missing = row["msg_id"] is None
        where = tuple(-1 if row[k] is None else row[k] for k in ("partition", "offset"))
        return (1 if missing else 0, 0 if missing else row["msg_id"], *where)

    assert [oracle(r) for r in ordered] == sorted(oracle(r) for r in rows)


# ---------------------------------------------------------------------------------------------
# Example rows, per-partition counts and the missing list, from a hand-made message table


def _messages(n: int) -> Messages:
    """n messages: msg_id i (the last one without an id), acked at p(i % 3)@(10 i) except every
    fourth (no location); message i read once at record i // 2 when i is odd."""
    ids = np.arange(n, dtype=np.int64)
    ids[-1] = NO_ID
    located = ids % 4 != 0
    return Messages(
        msg_id=ids,
        in_acked=np.ones(n, dtype=bool),
        acked_rows=np.array([1 + (i % 5 == 1) for i in range(n)], dtype=np.int64),
        status=np.ones(n, dtype=np.int64),
        partition=np.where(located, np.arange(n) % 3, NULL).astype(np.int64),
        offset=np.where(located, 10 * np.arange(n), NULL).astype(np.int64),
        send_ts=np.zeros(n, dtype=np.int64),
        slot_read=np.zeros(n, dtype=bool),
        holder=np.where(np.arange(n) % 2 == 0, NO_ID, 1000 + np.arange(n)).astype(np.int64),
        holds_self=np.zeros(n, dtype=bool),
        reads=(np.arange(n) % 2).astype(np.int64),
        first_read=np.where(np.arange(n) % 2 == 1, np.arange(n) // 2, -1).astype(np.int64),
    )


def _reads(n: int) -> Reads:
    return Reads(
        msg_id=np.arange(n, dtype=np.int64),
        identified=np.ones(n, dtype=bool),
        partition=np.full(n, 7, dtype=np.int64),
        offset=100 + np.arange(n, dtype=np.int64),
        slot=np.arange(n, dtype=np.int64),
        key=pa.array([f"k{i}" for i in range(n)]),
        key_seq=np.arange(n, dtype=np.int64),
        has_seq=np.ones(n, dtype=bool),
    )


def test_identity_facts_count_repeated_ids_and_rows_without_one() -> None:
    m = _messages(12)  # acked_rows 2 at i = 1, 6, 11 (11 has no id)
    assert identity_facts(m) == {"repeated_msg_ids": 2, "unidentified_rows": 2}


def test_per_partition_counts_name_unknown_where_there_is_no_location() -> None:
    m = _messages(12)
    mask = np.array([i in (0, 1, 2, 4, 5, 7) for i in range(12)])
    assert by_partition(mask, m.partition) == {"unknown": 2, "1": 2, "2": 2}
    assert by_partition(np.zeros(12, dtype=bool), m.partition) == {}


def test_missing_messages_are_listed_with_their_acked_location() -> None:
    m = _messages(12)
    loss = np.array([i in (3, 4, 11) for i in range(12)])
    assert missing_of(loss, m) == [(3, 0, 30), (4, None, None), (None, 2, 110)]
    assert value_of(np.int64(NO_ID)) is None
    assert value_of(np.int64(NULL), NULL) is None
    assert value_of(np.int64(5), NULL) == 5
    assert type(value_of(np.int64(5))) is int


def test_example_rows_are_at_the_acked_offset_or_where_first_read() -> None:
    n = 2 * MAX_EXAMPLES + 4
    m, reads = _messages(n), _reads(n)
    every = np.ones(n, dtype=bool)
    classes = {AnomalyName.LOST: every, AnomalyName.DUPLICATED: every}
    reordered = {
        "msg_id": np.array([5, 3, 3, NO_ID], dtype=np.int64),
        "partition": np.array([0, 2, 1, 0], dtype=np.int64),
        "offset": np.array([1, 9, 4, 0], dtype=np.int64),
        "key_seq": np.array([11, 12, 13, 14], dtype=np.int64),
        "max_key_seq_before": np.array([21, 22, 23, 24], dtype=np.int64),
        "record": np.array([3, 2, 1, 0], dtype=np.int64),
    }
    examples = examples_of(classes, m, reads, reordered)
    assert set(examples) == set(ANOMALY_NAMES)
    assert all(examples[name] == [] for name in ANOMALY_NAMES if name not in (
        AnomalyName.LOST, AnomalyName.DUPLICATED, AnomalyName.REORDERED))  # fmt: skip
    lost = examples[AnomalyName.LOST]
    assert len(lost) == MAX_EXAMPLES
    assert lost[:4] == [
        {"msg_id": 0, "partition": None, "offset": None, "readback_msg_id_at_offset": None,
         "reads": 0},
        {"msg_id": 1, "partition": 1, "offset": 10, "readback_msg_id_at_offset": 1001,
         "reads": 1},
        {"msg_id": 2, "partition": 2, "offset": 20, "readback_msg_id_at_offset": None,
         "reads": 0},
        {"msg_id": 3, "partition": 0, "offset": 30, "readback_msg_id_at_offset": 1003,
         "reads": 1},
    ]  # fmt: skip
    duplicated = examples[AnomalyName.DUPLICATED]
    assert duplicated[:2] == [
        {"msg_id": 0, "partition": None, "offset": None, "readback_msg_id_at_offset": None,
         "reads": 0},
        {"msg_id": 1, "partition": 7, "offset": 100, "readback_msg_id_at_offset": 1001,
         "reads": 1},
    ]  # fmt: skip
    assert duplicated[3]["partition"] == 7 and duplicated[3]["offset"] == 101
    assert examples[AnomalyName.REORDERED] == reordered_examples(reordered, reads)
    assert reordered_examples(reordered, reads) == [
        {"msg_id": 3, "partition": 1, "offset": 4, "key_seq": 13, "max_key_seq_before": 23,
         "key": "k1"},
        {"msg_id": 3, "partition": 2, "offset": 9, "key_seq": 12, "max_key_seq_before": 22,
         "key": "k2"},
        {"msg_id": 5, "partition": 0, "offset": 1, "key_seq": 11, "max_key_seq_before": 21,
         "key": "k3"},
        {"msg_id": None, "partition": 0, "offset": 0, "key_seq": 14, "max_key_seq_before": 24,
         "key": "k0"},
    ]  # fmt: skip


def test_at_most_max_examples_reordered_rows_are_kept() -> None:
    n = MAX_EXAMPLES + 3
    reordered = {
        "msg_id": np.arange(n, dtype=np.int64)[::-1].copy(),
        "partition": np.zeros(n, dtype=np.int64),
        "offset": np.arange(n, dtype=np.int64),
        "key_seq": np.zeros(n, dtype=np.int64),
        "max_key_seq_before": np.zeros(n, dtype=np.int64),
        "record": np.zeros(n, dtype=np.int64),
    }
    rows = reordered_examples(reordered, _reads(1))
    assert [r["msg_id"] for r in rows] == list(range(MAX_EXAMPLES))


# ---------------------------------------------------------------------------------------------
# The sensitivity probe's choice of records, against a plain-Python oracle

MASK64 = (1 << 64) - 1


def _splitmix64(value: int, seed: int) -> int:
    """splitmix64's finaliser of value + seed × the golden gamma, in Python ints mod 2^64."""
    x = (value + seed * 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


@pytest.mark.property
@given(st.lists(st.integers(0, 2**62), max_size=20))
def test_the_probes_hash_is_splitmix64_of_the_seed(values: list[int]) -> None:
    from analysis.checks.messages.probe import SENSITIVITY_SEED, _seeded_hash

    hashed = _seeded_hash(np.array(values, dtype=np.int64))
    assert [int(h) for h in hashed] == [_splitmix64(v, SENSITIVITY_SEED) for v in values]


def test_the_probes_hash_of_known_values() -> None:
    from analysis.checks.messages.probe import _seeded_hash

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # its arithmetic wraps on purpose: no overflow warning
        assert int(_seeded_hash(np.array([0], dtype=np.int64))[0]) == _splitmix64(0, 20261122)
    assert _splitmix64(0, 0) == 0


@pytest.mark.property
@given(
    st.lists(
        st.tuples(
            st.sampled_from([1, 1, 1, 2, 3]),  # status code: ok mostly
            st.sampled_from([0, 1, 1, 1, 2]),  # reads
            st.booleans(),  # located at an acked offset
            st.booleans(),  # holds itself there
            st.integers(0, 2),  # partition read at
        ),
        max_size=30,
    ),
)
def test_the_probe_hides_each_partitions_tail_and_a_hashed_sample(
    rows: list[tuple[int, int, bool, bool, int]],
) -> None:
    from types import SimpleNamespace

    from analysis.checks.messages.probe import (
        SENSITIVITY_ONE_IN,
        SENSITIVITY_SEED,
        _records_to_hide,
    )

    n = len(rows)
    m = replace_messages(
        _messages(max(n, 1)),
        n,
        status=[r[0] for r in rows],
        reads=[r[1] for r in rows],
        offset=[5 if r[2] else NULL for r in rows],
        holds_self=[r[3] for r in rows],
        msg_id=[3 * i + 1 for i in range(n)],
        first_read=list(range(n)),
    )
    reads = SimpleNamespace(partition=np.array([r[4] for r in rows]), offset=np.arange(n))
    index = SimpleNamespace(reads=reads)
    hidden = _records_to_hide(index, m)  # type: ignore[arg-type]
    healthy = [
        i for i, (code, reads, located, itself, _) in enumerate(rows)
        if code == 1 and reads == 1 and (not located or itself)
    ]  # fmt: skip
    tails = {}
    for i in healthy:  # records are in slot order: the highest record is a group's tail
        tails[rows[i][4]] = i
    sampled = {
        i for i in healthy if _splitmix64(3 * i + 1, SENSITIVITY_SEED) % SENSITIVITY_ONE_IN == 0
    }
    assert sorted(hidden.tolist()) == sorted(set(tails.values()) | sampled)


def replace_messages(m: Messages, n: int, **columns: list) -> Messages:
    """The first n messages of m with the given columns replaced."""
    from dataclasses import fields

    kept = {f.name: getattr(m, f.name)[:n] for f in fields(m)}
    kept |= {name: np.array(values, dtype=kept[name].dtype) for name, values in columns.items()}
    return Messages(**kept)


def test_a_sampled_record_is_hidden_besides_the_tail() -> None:
    from types import SimpleNamespace

    from analysis.checks.messages.probe import (
        SENSITIVITY_ONE_IN,
        SENSITIVITY_SEED,
        _records_to_hide,
    )

    sampled_ids = [
        v for v in range(20_000) if _splitmix64(v, SENSITIVITY_SEED) % SENSITIVITY_ONE_IN == 0
    ]
    chosen = sampled_ids[:2]
    ids = [chosen[0], 10**6 + 1, chosen[1], 10**6 + 3, 10**6 + 5]
    n = len(ids)
    m = replace_messages(
        _messages(n), n, status=[1] * n, reads=[1] * n, offset=[NULL] * n,
        holds_self=[False] * n, msg_id=ids, first_read=list(range(n)),
    )  # fmt: skip
    reads = SimpleNamespace(partition=np.zeros(n, dtype=np.int64), offset=np.arange(n))
    index = SimpleNamespace(reads=reads)
    assert _records_to_hide(index, m).tolist() == [0, 2, 4]  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Reordering against a plain-Python oracle: per partition and key, in offset order


RECORD = st.tuples(
    st.integers(0, 2),  # partition
    st.none() | st.sampled_from(["a", "b", "c"]),  # key
    st.none() | st.integers(0, 5),  # key_seq (None: the record carries none)
    st.none() | st.integers(0, 50),  # msg_id (None: not ours)
)


@pytest.mark.property
@given(st.lists(RECORD, max_size=25))
def test_a_record_after_a_higher_seq_of_its_key_in_its_partition_is_reordered(
    records: list[tuple[int, str | None, int | None, int | None]],
) -> None:
    from analysis.checks.messages.classes import reordered

    offsets: dict[int, int] = {}
    rows = []
    for partition, key, seq, msg_id in records:  # each partition's records in offset order
        offset = offsets.get(partition, 0)
        offsets[partition] = offset + 1
        rows.append((partition, offset, key, seq, msg_id))
    rows.sort(key=lambda r: (r[0], r[1]))  # slot order
    n = len(rows)
    reads = Reads(
        msg_id=np.array([NO_ID if r[4] is None else r[4] for r in rows], dtype=np.int64),
        identified=np.array([r[4] is not None for r in rows], dtype=bool),
        partition=np.array([r[0] for r in rows], dtype=np.int64),
        offset=np.array([r[1] for r in rows], dtype=np.int64),
        slot=np.arange(n, dtype=np.int64),
        key=pa.array([r[2] for r in rows], pa.string()),
        key_seq=np.array([0 if r[3] is None else r[3] for r in rows], dtype=np.int64),
        has_seq=np.array([r[3] is not None for r in rows], dtype=bool),
    )
    with warnings.catch_warnings():  # a keyless record's group is no NaN cast to an int
        warnings.simplefilter("error")
        found = reordered(reads)
    got = sorted(
        zip(
            found["record"].tolist(),
            found["msg_id"].tolist(),
            found["partition"].tolist(),
            found["offset"].tolist(),
            found["key_seq"].tolist(),
            found["max_key_seq_before"].tolist(),
            strict=True,
        )
    )
    expected = []
    highest: dict[tuple[int, str | None], int] = {}
    for i, (partition, offset, key, seq, msg_id) in enumerate(rows):
        if seq is None:
            continue
        before = highest.get((partition, key))
        if before is not None and seq < before:
            expected.append(
                (i, NO_ID if msg_id is None else msg_id, partition, offset, seq, before)
            )
        highest[(partition, key)] = max(seq, before if before is not None else seq)
    assert got == sorted(expected)


def test_anomaly_seconds_count_the_missing_and_duplicated_by_second_of_send() -> None:
    from analysis.checks.messages.columns import NONE_TS
    from analysis.checks.messages.timeline import anomaly_seconds
    from analysis.model.anomalies import LOSS_CLASSES

    n = 7
    second = 1_700_000_000
    send_ts = [
        second * 1_000_000 + 5,
        second * 1_000_000 + 999_999,
        (second + 1) * 1_000_000,
        (second + 3) * 1_000_000 + 1,
        NONE_TS,
        (second + 3) * 1_000_000 + 2,
        (second + 1) * 1_000_000 + 7,
    ]
    m = replace_messages(_messages(n), n, send_ts=send_ts)
    none = np.zeros(n, dtype=bool)
    classes = {name: none for name in ANOMALY_NAMES}
    classes[LOSS_CLASSES[0]] = np.array([1, 1, 0, 1, 1, 0, 0], dtype=bool)
    classes[LOSS_CLASSES[1]] = np.array([0, 0, 1, 0, 0, 0, 0], dtype=bool)
    classes[AnomalyName.DUPLICATED] = np.array([0, 0, 0, 1, 1, 1, 1], dtype=bool)
    assert anomaly_seconds(classes, m) == {
        second: {"missing": 2},
        second + 1: {"missing": 1, "duplicated": 1},
        second + 3: {"missing": 1, "duplicated": 2},
    }
    assert anomaly_seconds(dict.fromkeys(ANOMALY_NAMES, none), m) == {}
