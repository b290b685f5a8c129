"""The cycle check (analysis/checks/cycles.py) on generated transactional logs, against an oracle
written here: the edges read record by record, and a transaction in a cyclic component found by
depth-first search for a path back to itself (for G1c: it shares a cycle with a wr edge, that
is, it reaches and is reached from both ends of one). A producer's sequential transactions are
clean; a planted late write (G0) and a planted read of a later transaction's write (G1c) are
found, and every witness is a closed walk over the oracle's edges."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.checks.cycles import cycle_facts
from analysis.checks.transactions import ABORTED, COMMITTED, Transactions
from analysis.model.anomalies import AnomalyName
from analysis.model.cycles import TxnReads
from tests.examples import examples

SIZE = 3  # messages a transaction holds


@dataclass(frozen=True)
class Log:
    """Transactions 0..n-1 of SIZE messages each (msg_ids t*SIZE ..), their outcomes, the
    read-back's records per partition in offset order (msg_ids), and reads (txn, msg_id)."""

    outcomes: tuple[int, ...]
    partitions: tuple[tuple[int, ...], ...]
    reads: tuple[tuple[int, int], ...] = ()

    def facts(self, numbers: tuple[int, ...] = ()):
        """The check's facts, transaction t numbered numbers[t] (default t + 100)."""
        n = len(self.outcomes)
        number = np.array(numbers or range(100, 100 + n), dtype=np.int64)  # apart from indexes
        txns = Transactions(
            txn=number,
            first=np.arange(n, dtype=np.int64) * SIZE,
            size=np.full(n, SIZE, dtype=np.int64),
            outcome=np.array(self.outcomes, dtype=np.int8),
            uncommitted=np.zeros(n, dtype=bool),
            began=np.full(n, -1, dtype=np.int64),
            ended=np.full(n, -1, dtype=np.int64),
            errors=(None,) * n,
        )
        ids = [m for log in self.partitions for m in log]
        part = [p for p, log in enumerate(self.partitions) for _ in log]
        off = [o for log in self.partitions for o in range(len(log))]
        reads = None
        if self.reads:
            reads = TxnReads(
                number[[t for t, _ in self.reads]], np.array([m for _, m in self.reads])
            )
        arrays = (np.array(v, dtype=np.int64) for v in (ids, part, off))
        return cycle_facts(txns, *arrays, reads)


def oracle_edges(log: Log) -> dict[tuple[int, int], set[tuple[str, str]]]:
    """(Ti, Tj) → {(kind, label)} read record by record."""
    edges: dict[tuple[int, int], set[tuple[str, str]]] = {}
    committed = {t for t, o in enumerate(log.outcomes) if o == COMMITTED}
    for p, records in enumerate(log.partitions):
        last = None
        for offset, m in enumerate(records):
            t = m // SIZE
            if m < 0 or t not in committed:
                continue
            if last is not None and last != t:
                edges.setdefault((last + 100, t + 100), set()).add(("ww", f"p{p}@{offset}"))
            last = t
    for reader, m in log.reads:
        writer = m // SIZE
        if writer != reader and {writer, reader} <= committed:
            edges.setdefault((writer + 100, reader + 100), set()).add(("wr", f"m{m}"))
    return edges


def reaches(edges, source: int, target: int) -> bool:
    """A path of one edge or more from source to target (depth-first)."""
    seen, stack = set(), [v for u, v in edges if u == source]
    while stack:
        node = stack.pop()
        if node == target:
            return True
        if node not in seen:
            seen.add(node)
            stack += [v for u, v in edges if u == node]
    return False


def oracle_counts(log: Log) -> dict[str, int]:
    edges = oracle_edges(log)
    ww = {e for e, kinds in edges.items() if any(k == "ww" for k, _ in kinds)}
    wr = {e for e, kinds in edges.items() if any(k == "wr" for k, _ in kinds)}
    nodes = {v for e in edges for v in e}
    g0 = {v for v in nodes if reaches(ww, v, v)}
    on_wr_cycle = [(a, b) for a, b in wr if reaches(set(edges), b, a)]
    g1c = {
        v
        for v in nodes
        for a, _ in on_wr_cycle
        if v == a or (reaches(set(edges), v, a) and reaches(set(edges), a, v))
    }
    return {AnomalyName.G0: len(g0), AnomalyName.G1C: len(g1c)}


def assert_witnesses(log: Log, facts) -> None:
    """Every witness is a closed walk over the oracle's edges, ww only for G0, through a wr
    edge for G1c, starting at a transaction of its component."""
    edges = oracle_edges(log)
    for name, rows in facts.examples(100).items():
        for row in rows:
            hops = re.findall(r"-(ww|wr) (\S+)-> T(\d+)", row["cycle"])
            walk = [int(re.match(r"T(\d+)", row["cycle"]).group(1))] + [int(t) for *_, t in hops]
            assert walk[0] == walk[-1] and len(hops) >= 2
            for (kind, label, _), u, v in zip(hops, walk, walk[1:], strict=False):
                assert (kind, label) in edges[(u, v)]
            kinds = {kind for kind, _, _ in hops}
            assert kinds == {"ww"} if name == AnomalyName.G0 else "wr" in kinds


outcome = st.sampled_from([COMMITTED, COMMITTED, COMMITTED, ABORTED, 2])


@st.composite
def any_log(draw: st.DrawFn) -> Log:
    """Any transactions' messages spread over up to 3 partitions in any order, foreign
    records (-1) among them, and any reads."""
    n = draw(st.integers(min_value=1, max_value=5))
    outcomes = tuple(draw(st.lists(outcome, min_size=n, max_size=n)))
    messages = [m for m in range(n * SIZE) if draw(st.booleans())] + [-1]
    where = [draw(st.integers(min_value=0, max_value=2)) for _ in messages]
    shuffled = draw(st.permutations(range(len(messages))))
    partitions = tuple(tuple(messages[i] for i in shuffled if where[i] == p) for p in range(3))
    reads = draw(
        st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n * SIZE - 1)), max_size=3)
    )
    return Log(outcomes, partitions, tuple(reads))


@st.composite
def reads_along_writes(draw: st.DrawFn) -> Log:
    """Any log whose transactions also read along some of its write edges: a pair of
    transactions joined by a ww and a wr edge at once."""
    log = draw(any_log())
    ww = sorted(e for e, kinds in oracle_edges(log).items() if any(k == "ww" for k, _ in kinds))
    along = draw(st.lists(st.sampled_from(ww), max_size=3)) if ww else []
    offset = draw(st.integers(min_value=0, max_value=SIZE - 1))
    extra = tuple((b - 100, (a - 100) * SIZE + offset) for a, b in along)
    return Log(log.outcomes, log.partitions, log.reads + extra)


@st.composite
def sequential_log(draw: st.DrawFn) -> Log:
    """One producer's transactions one after the other: each partition holds their messages in
    transaction order; some aborted or unknown ones, foreign records between."""
    n = draw(st.integers(min_value=1, max_value=6))
    outcomes = tuple(draw(st.lists(outcome, min_size=n, max_size=n)))
    where = [draw(st.integers(min_value=0, max_value=2)) for _ in range(n * SIZE)]
    partitions = tuple(
        (-1, *(m for m in range(n * SIZE) if where[m] == p and draw(st.booleans())))
        for p in range(3)
    )
    # Reads only of earlier transactions' writes: information flows forward.
    reads = draw(
        st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n * SIZE - 1)), max_size=3)
    )
    return Log(outcomes, partitions, tuple((t, m) for t, m in reads if m // SIZE < t))


@settings(max_examples=examples(1.0))
@given(any_log())
def test_the_cyclic_transactions_are_the_oracles(log: Log) -> None:
    facts = log.facts()
    assert facts.counts == oracle_counts(log)
    assert_witnesses(log, facts)


@settings(max_examples=examples(1.0))
@given(any_log(), st.data())
def test_the_cyclic_transactions_do_not_depend_on_their_numbering(log: Log, data) -> None:
    # The check builds its graph only over the spans its edges going back in transaction
    # numbers cover: numbered in any order, the same transactions are cyclic.
    n = len(log.outcomes)
    numbers = data.draw(st.permutations(range(100, 100 + 2 * n)))[:n]
    assert log.facts(tuple(numbers)).counts == oracle_counts(log)


@settings(max_examples=examples(1.0))
@given(reads_along_writes())
def test_reads_along_write_edges_are_found_as_the_oracle_finds_them(log: Log) -> None:
    facts = log.facts()
    assert facts.counts == oracle_counts(log)
    assert_witnesses(log, facts)


@settings(max_examples=examples(1.0))
@given(sequential_log())
def test_sequential_transactions_have_no_cycle(log: Log) -> None:
    assert log.facts().counts == {AnomalyName.G0: 0, AnomalyName.G1C: 0}


def test_a_planted_late_write_is_a_write_cycle_with_its_witness() -> None:
    # T0 then T1 in p0; in p1 a write of T0 landed after T1's (KAFKA-17754's late write).
    log = Log((COMMITTED, COMMITTED, COMMITTED), ((0, 3, 6), (4, 1), (7, 8)))
    facts = log.facts()
    assert facts.counts == {AnomalyName.G0: 2, AnomalyName.G1C: 0}
    [row] = facts.examples(5)[AnomalyName.G0]
    assert row == {"txn": 100, "transactions": 2, "cycle": "T100 -ww p0@1-> T101 -ww p1@1-> T100"}


def test_a_planted_read_of_a_later_write_is_cyclic_information_flow() -> None:
    # The log orders T0 before T1 before T2 (and T0 before T2 in p1), yet T0 read T2's message 7.
    log = Log((COMMITTED, COMMITTED, COMMITTED), ((0, 3, 6), (1, 7)), reads=((0, 7),))
    facts = log.facts()
    assert facts.counts == {AnomalyName.G0: 0, AnomalyName.G1C: 3}
    [row] = facts.examples(5)[AnomalyName.G1C]
    assert row["cycle"] == "T102 -wr m7-> T100 -ww p1@1-> T102"  # the shortest one
    assert_witnesses(log, facts)


def test_a_read_along_a_write_edge_still_closes_a_g1c_cycle() -> None:
    # T0 before T1 in p0 and T1 before T0 in p1 (a G0 cycle); T1 also read T0's message 0, so
    # the pair T0 -> T1 carries a ww and a wr edge: the cycle runs through a read as well.
    log = Log((COMMITTED, COMMITTED), ((0, 3), (4, 1)), reads=((1, 0),))
    facts = log.facts()
    assert facts.counts == {AnomalyName.G0: 2, AnomalyName.G1C: 2}
    [row] = facts.examples(5)[AnomalyName.G1C]
    assert row["cycle"] == "T100 -wr m0-> T101 -ww p1@1-> T100"
    assert_witnesses(log, facts)
