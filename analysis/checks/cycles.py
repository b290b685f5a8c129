"""Cycles among committed transactions (transactional runs): the `g0` (write cycle) and `g1c`
(cyclic information flow) classes of analysis.model.anomalies, as Adya defines them and Jepsen's
Kafka checker looks for them.

The nodes are the committed transactions (transactions.parquet). Edges:

- **ww** Ti -> Tj: in one partition's final read-back, in offset order, Tj's record is the next
  record of a committed transaction after Ti's (records of other transactions, aborted or
  unknown, and of no transaction are passed over), Ti != Tj;
- **wr** Ti -> Tj: Tj read a message Ti wrote (TxnReads: txn-reads.parquet of a run whose
  transactions read before their sends, `workload.transactions.reads`; `reads_of`).

One transactional producer runs its transactions one after the other, and one producer's sends
keep their order per partition, so its committed transactions follow one another the same way
in every partition: the ww graph is a chain and any cycle is an anomaly (a late write of an
earlier transaction landing after a later one's, KAFKA-17754's mechanism). G0 is a cycle of ww
edges alone; G1c a cycle through at least one wr edge in the graph of both. One pair of
transactions may be joined by a ww and a wr edge at once (Elle's edges carry several kinds): the
graph keeps every kind of a pair, so a read along a write edge still closes a G1c cycle. Each
class counts the transactions of its strongly connected components (networkx), each component
reported with one shortest cycle through it as its witness: for G1c, through a wr edge inside
it.

The edges are found with numpy; only those a cycle can use become a networkx graph: a cycle
needs an edge going back in transaction numbers, so it lies in the spans the edges going back
cover (`_cyclic_spans`). In a producer's run those are the anomalies' few transactions, so a
million-transaction history costs a sort of its records, not a graph of millions of edges
(bench/checks_bench.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING

import networkx as nx
import numpy as np
import pyarrow as pa

from analysis.checks.check import RunFacts
from analysis.checks.transactions import COMMITTED, MAX_EXAMPLES, Transactions
from analysis.model.cycles import CycleFacts, CyclicComponent, TxnReads

if TYPE_CHECKING:
    from analysis.checks.history import RunHistory

__all__ = ["CycleCheck", "cycle_facts", "dependency_graph", "reads_of"]

WW, WR = "ww", "wr"


def cycle_facts(
    txns: Transactions,
    msg_id: np.ndarray,
    partition: np.ndarray,
    offset: np.ndarray,
    reads: TxnReads | None = None,
) -> CycleFacts:
    """G0 and G1c over the committed transactions, the read-back's records being (`msg_id`,
    `partition`, `offset`) (each record once, any order; a msg_id < 0: not the producer's)."""
    graph = dependency_graph(txns, msg_id, partition, offset, reads, cyclic_only=True)
    ww = graph.edge_subgraph([(u, v) for u, v, kinds in graph.edges(data="kinds") if WW in kinds])
    g0 = tuple(_components(ww, WW))
    return CycleFacts(g0=g0, g1c=tuple(_components(graph, WR)))


def reads_of(table: pa.Table | None) -> TxnReads | None:
    """What the run's transactions read (its txn-reads table), the records that name no
    msg_id left out; None for a run whose transactions did not read. Whether a reader
    committed is the graph's question, not this one's."""
    if table is None:
        return None
    table = table.filter(table["msg_id"].is_valid())
    txn = table["txn"].to_numpy().astype(np.int64)
    return TxnReads(txn=txn, msg_id=table["msg_id"].to_numpy().astype(np.int64))


def dependency_graph(
    txns: Transactions,
    msg_id: np.ndarray,
    partition: np.ndarray,
    offset: np.ndarray,
    reads: TxnReads | None,
    *,
    cyclic_only: bool = False,
) -> nx.DiGraph:
    """The committed transactions' graph (nodes: transaction numbers; each edge's `kinds`: its
    kinds, ww or wr, each with the label of the first edge of that kind found for the pair);
    with `cyclic_only`, only its edges inside the spans a cycle can lie in (`_cyclic_spans`),
    which hold every cycle and so every cyclic component whole."""
    edges = _edges(txns, msg_id, partition, offset, reads)
    if cyclic_only:
        edges = edges[:, _inside_one_span(edges[0], edges[1], *_cyclic_spans(edges[0], edges[1]))]
    graph = nx.DiGraph()
    for source, target, kind, a, b in edges.T.tolist():
        if kind == _WW:
            _add(graph, source, target, WW, f"p{a}@{b}")
        else:
            _add(graph, source, target, WR, f"m{a}")
    return graph


_WW, _WR = 0, 1  # the kind row of _edges


def _edges(
    txns: Transactions,
    msg_id: np.ndarray,
    partition: np.ndarray,
    offset: np.ndarray,
    reads: TxnReads | None,
) -> np.ndarray:
    """Every edge in the order the graph takes them (ww in partition and offset order, then wr
    in read order), as rows source, target, kind (_WW or _WR) and its label's numbers
    (partition and offset of a ww edge's target record; a wr edge's msg_id and -1)."""
    committed = txns.outcome == COMMITTED
    at = txns.of(np.where(msg_id >= 0, msg_id, -1))
    mine = at >= 0
    mine[mine] = committed[at[mine]]
    order = np.lexsort((offset[mine], partition[mine]))
    node = txns.txn[at[mine][order]].astype(np.int64)
    p, o = partition[mine][order].astype(np.int64), offset[mine][order].astype(np.int64)
    step = np.flatnonzero((p[1:] == p[:-1]) & (node[1:] != node[:-1]))
    ww = np.stack([node[step], node[step + 1], np.full(len(step), _WW), p[step + 1], o[step + 1]])
    if reads is None:
        return ww
    writer = txns.of(reads.msg_id)
    reader = _index_of(txns.txn, reads.txn)
    kept = (writer >= 0) & (reader >= 0) & (writer != reader)
    kept[kept] = committed[writer[kept]] & committed[reader[kept]]
    n = int(np.count_nonzero(kept))
    wr = np.stack(
        [
            txns.txn[writer[kept]].astype(np.int64),
            reads.txn[kept].astype(np.int64),
            np.full(n, _WR),
            reads.msg_id[kept].astype(np.int64),
            np.full(n, -1),
        ]
    )
    return np.concatenate([ww, wr], axis=1)


def _index_of(numbers: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """The index of each wanted transaction number among `numbers`, -1 for none."""
    if not len(numbers):
        return np.full(len(wanted), -1, dtype=np.int64)
    order = np.argsort(numbers, kind="stable")
    at = np.minimum(np.searchsorted(numbers, wanted, sorter=order), len(numbers) - 1)
    found = numbers[order[at]] == wanted
    return np.where(found, order[at], -1)


def _cyclic_spans(source: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The spans [low, high] of transaction numbers a cycle can lie in: the edges going back
    (source > target), each covering [target, source], merged where they overlap or touch.
    A cycle from its lowest number up to its highest and back down has every step between
    them crossed by an edge going back, so it lies inside one span (a producer's transactions
    in order: an edge goes back only at an anomaly, and the spans are few and short)."""
    back = source > target
    low, high = target[back], source[back]
    order = np.argsort(low, kind="stable")
    low, high = low[order], high[order]
    if not len(low):
        return low, high
    reach = np.maximum.accumulate(high)
    first = np.flatnonzero(np.concatenate([[True], low[1:] > reach[:-1]]))
    return low[first], np.maximum.reduceat(high, first)


def _inside_one_span(
    source: np.ndarray, target: np.ndarray, low: np.ndarray, high: np.ndarray
) -> np.ndarray:
    """Whether each edge's two ends lie inside one span (spans ascending and disjoint)."""
    if not len(low):
        return np.zeros(len(source), dtype=bool)
    span = np.searchsorted(low, source, "right") - 1
    within = span >= 0
    for end in (source, target):
        within &= end <= high[np.maximum(span, 0)]
    within &= span == np.searchsorted(low, target, "right") - 1
    return within


def _add(graph: nx.DiGraph, source: int, target: int, kind: str, label: str) -> None:
    """Give the pair's edge the kind `kind` labelled `label`, unless it has that kind already."""
    if not graph.has_edge(source, target):
        graph.add_edge(source, target, kinds={})
    graph.edges[source, target]["kinds"].setdefault(kind, label)


def _components(graph: nx.DiGraph, through: str) -> Iterable[CyclicComponent]:
    """Each strongly connected component holding an edge of kind `through`, with the shortest
    cycle through its first such edge (lowest source, then target)."""
    for members in nx.strongly_connected_components(graph):
        if len(members) < 2:
            continue
        inside = graph.subgraph(members)
        edges = sorted((u, v) for u, v, kinds in inside.edges(data="kinds") if through in kinds)
        if not edges:
            continue
        source, target = edges[0]
        back = nx.shortest_path(inside, target, source)
        yield CyclicComponent(tuple(sorted(members)), _words(inside, [source, *back], through))


def _words(graph: nx.DiGraph, path: list[int], through: str) -> str:
    """ "T12 -ww p0@345-> T13 -ww p1@120-> T12" for a closed path of transaction numbers, its
    first hop named by the kind `through`, the others by ww where the pair has one."""
    text = f"T{path[0]}"
    for hop, (u, v) in enumerate(pairwise(path)):
        kinds = graph.edges[u, v]["kinds"]
        kind = through if hop == 0 else (WW if WW in kinds else WR)
        text += f" -{kind} {kinds[kind]}-> T{v}"
    return text


@dataclass(frozen=True)
class CycleCheck:
    """G0 and G1c over the committed transactions of a complete run."""

    name: str = "cycles"

    def applies(self, run: RunHistory) -> bool:
        """A complete run whose workload ran transactions."""
        return run.complete and run.txns is not None

    def facts(self, run: RunHistory) -> RunFacts:
        """`cycle_facts` over the read-back's records and the transactions' reads."""
        assert run.txns is not None, "applies() holds: the run has transactions"
        reads = run.reads
        ours = np.where(reads.identified, reads.msg_id, -1)
        cycles = cycle_facts(run.txns, ours, reads.partition, reads.offset, reads_of(run.txn_reads))
        return RunFacts(counts=cycles.counts, examples=cycles.examples(MAX_EXAMPLES))
