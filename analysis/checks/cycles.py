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
    graph = dependency_graph(txns, msg_id, partition, offset, reads)
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
) -> nx.DiGraph:
    """The committed transactions' graph (nodes: transaction numbers; each edge's `kinds`: its
    kinds, ww or wr, each with the label of the first edge of that kind found for the pair)."""
    graph = nx.DiGraph()
    committed = txns.outcome == COMMITTED
    at = txns.of(np.where(msg_id >= 0, msg_id, -1))
    mine = at >= 0
    mine[mine] = committed[at[mine]]
    order = np.lexsort((offset[mine], partition[mine]))
    node = txns.txn[at[mine][order]]
    p, o = partition[mine][order], offset[mine][order]
    step = np.flatnonzero((p[1:] == p[:-1]) & (node[1:] != node[:-1]))
    for i in step.tolist():
        _add(graph, int(node[i]), int(node[i + 1]), WW, f"p{p[i + 1]}@{o[i + 1]}")
    if reads is not None:
        number = {int(t): i for i, t in enumerate(txns.txn.tolist())}
        writer = txns.of(reads.msg_id).tolist()
        for w, t, m in zip(writer, reads.txn.tolist(), reads.msg_id.tolist(), strict=True):
            r = number.get(int(t), -1)
            if w >= 0 and r >= 0 and w != r and committed[w] and committed[r]:
                _add(graph, int(txns.txn[w]), int(t), WR, f"m{m}")
    return graph


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
