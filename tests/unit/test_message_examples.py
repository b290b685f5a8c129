"""The order examples are chosen in (lowest msg_id, then partition and offset, rows without a
msg_id last), and two shards' probe tallies adding up, checked against plain Python."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis.checks.messages.examples import example_order
from analysis.checks.messages.probe import ProbeTally


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


def test_two_shards_probe_tallies_add_field_by_field() -> None:
    total = ProbeTally(5, 4, 1) + ProbeTally(20, 17, 3)
    assert total == ProbeTally(25, 21, 4)
    assert ProbeTally(0, 0, 0) + ProbeTally(2, 1, 0) == ProbeTally(2, 1, 0)
