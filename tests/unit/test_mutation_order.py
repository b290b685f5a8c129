"""The order a mutant's tests run in under mutmut (tests/unit/conftest.py's fastest_first),
against an oracle: golden reports first when asked, then by the clean pass's seconds, the
tests it has no seconds for last."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.unit.conftest import GOLDEN_TESTS, fastest_first


@dataclass
class Item:
    nodeid: str


names = st.lists(
    st.tuples(st.booleans(), st.text("abc", min_size=1, max_size=4)), unique=True, max_size=12
)


@given(names, st.dictionaries(st.integers(0, 20), st.floats(0, 10)), st.booleans())
def test_golden_first_then_fastest_then_unknown(
    tests: list[tuple[bool, str]], timed: dict[int, float], golden_first: bool
) -> None:
    items = [
        Item(f"{GOLDEN_TESTS if golden else 'tests/unit/test_x.py::'}{name}")
        for golden, name in tests
    ]
    seconds = {items[i].nodeid: s for i, s in timed.items() if i < len(items)}
    ordered: list[Any] = list(items)
    fastest_first(ordered, seconds, golden_first=golden_first)
    assert sorted(i.nodeid for i in ordered) == sorted(i.nodeid for i in items)

    def rank(item: Item) -> tuple[int, float]:
        golden = item.nodeid.startswith(GOLDEN_TESTS)
        return (0 if golden_first and golden else 1, seconds.get(item.nodeid, float("inf")))

    ranks = [rank(item) for item in ordered]
    assert ranks == sorted(ranks)
