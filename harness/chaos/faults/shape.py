"""Delayed, reordered and duplicated packets, shaped in userspace (no netem needed).

Each faulted node gets a helper container in its network namespace running the shaper
(harness/chaos/shaper): iptables' NFQUEUE hands it the node's outgoing packets to the chosen
peers, and it lets them go late, out of order or twice. Works on any broker image (the helper
brings iptables and Python) and on kernels without the netem qdisc, as these are.

By default (`direction: out`) the target's *outgoing* packets to `to` are shaped, as netem
shapes egress: a delayed leader answers its clients late and fetches from its followers late;
its incoming packets are untouched. With `direction: in` (delay and reorder) the packets the
target *receives* from `from` are held instead (NFQUEUE from INPUT): a request reaches the
broker late, e.g. a produce or EndTxn that lands after the client has moved on.
TCP hides reordering and duplicates inside one connection (it retransmits, reorders and
discards); across connections, e.g. a produce request and a later EndTxn on another, the
order in which requests reach the broker does change.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Annotated, Any, Literal, Required, TypedDict, cast

from pydantic import BeforeValidator, ConfigDict, Field, model_serializer, model_validator

from harness.chaos.faults.base import Fault, FaultError, FaultParams, HelperSite
from harness.chaos.faults.slots import MAX_QUEUE, SLOTS
from harness.limits import at_most, param_number, shown
from harness.rundir.events import FaultEndDetail, ShaperFigures
from harness.rundir.fault_classes import ClassKind

if TYPE_CHECKING:
    from harness.platform.sidecar import Sidecar

SHAPER_PACKAGE = Path(__file__).resolve().parent.parent / "shaper"
MAX_DELAY_MS = 60_000
INTERFACE = "eth0"
Peer = Literal["all", "brokers", "controllers", "clients"]
PEERS = ("all", "brokers", "controllers", "clients")
TO_MEANING = (
    "whose packets from the target are shaped: all, or a list of brokers, controllers "
    "(the metadata quorum: KRaft controllers or ZooKeeper servers), clients (everything "
    "outside the cluster)"
)


def _peer_list(value: Any) -> Any:
    """`to` as a list without repeats: one peer kind, or a non-empty list of them."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise ValueError(f"must be one of {', '.join(PEERS)} or a list of them")
    for peer in value:
        if peer not in PEERS:
            raise ValueError(f"unknown peer {shown(peer)}; choose from {', '.join(PEERS)}")
    if "all" in value and len(value) > 1:
        raise ValueError("all already covers every peer; give it alone")
    return list(dict.fromkeys(value))


To = Annotated[list[Peer], BeforeValidator(_peer_list), Field(description=TO_MEANING)]
Milliseconds = Annotated[
    param_number,
    Field(ge=0, description="milliseconds"),
    at_most(MAX_DELAY_MS, "a minute, beyond every client and broker timeout", "ms"),
]
Percent = Annotated[param_number, Field(gt=0, le=100, description="share of packets, %")]
Direction = Literal["in", "out"]
FROM_MEANING = (
    "with direction: in, whose packets to the target are shaped: all, or a list of brokers, "
    "controllers, clients (as `to` is for direction: out)"
)
# The Kafka requests a held connection may be chosen by (their API keys, from Kafka's protocol
# guide): those a client sends, those brokers send each other (replication, transaction
# markers) and those of the metadata quorum (KRaft's votes and fetches, brokers' heartbeats and
# ISR changes): the ones a late arrival can matter for.
REQUESTS: dict[str, int] = {
    "Produce": 0,
    "Fetch": 1,
    "ListOffsets": 2,
    "Metadata": 3,
    "OffsetCommit": 8,
    "OffsetFetch": 9,
    "FindCoordinator": 10,
    "JoinGroup": 11,
    "Heartbeat": 12,
    "LeaveGroup": 13,
    "SyncGroup": 14,
    "InitProducerId": 22,
    "OffsetForLeaderEpoch": 23,
    "AddPartitionsToTxn": 24,
    "AddOffsetsToTxn": 25,
    "EndTxn": 26,
    "WriteTxnMarkers": 27,
    "TxnOffsetCommit": 28,
    "Vote": 52,
    "BeginQuorumEpoch": 53,
    "EndQuorumEpoch": 54,
    "AlterPartition": 56,
    "BrokerRegistration": 62,
    "BrokerHeartbeat": 63,
}


def _request_names(value: Any) -> Any:
    """`requests` as a list of known request names, each once."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise ValueError(f"must be a list of requests: {', '.join(REQUESTS)}")
    for name in value:
        if name not in REQUESTS:
            raise ValueError(f"unknown request {shown(name)}; choose from {', '.join(REQUESTS)}")
    return list(dict.fromkeys(value))


REQUESTS_MEANING = (
    "with direction: in, hold a connection only from a packet that starts one of these "
    "requests on (each such request draws anew at connections_percent): e.g. [EndTxn] makes a "
    "commit or abort arrive late; empty (default): connections are chosen at their first packet"
)
DIRECTION_MEANING = (
    "out (default): the packets the target sends to `to`; in: the packets it receives from "
    "`from` (a request that arrives late)"
)


class _Directed(FaultParams):
    """The peers of a shaped fault that may act on either direction: `to` for the packets the
    target sends (direction: out), `from` for those it receives (direction: in)."""

    # `from` is a Python keyword: the field is from_, read and written as `from`.
    model_config = ConfigDict(
        extra="forbid", frozen=True, serialize_by_alias=True, validate_by_name=True
    )

    direction: Annotated[Direction, Field(description=DIRECTION_MEANING)] = "out"
    to: To = ["all"]  # noqa: RUF012 (pydantic copies defaults)
    from_: Annotated[
        list[Peer] | None,
        BeforeValidator(_peer_list),
        Field(alias="from", description=FROM_MEANING),
    ] = None

    @model_validator(mode="after")
    def _peers_of_the_direction(self) -> _Directed:
        given = self.model_fields_set
        if self.direction == "out" and "from_" in given:
            raise ValueError("from applies to direction: in; for direction: out use to")
        if self.direction == "in" and "to" in given:
            raise ValueError("to applies to direction: out; for direction: in use from")
        return self

    @model_serializer(mode="wrap")
    def _used_values(self, handler: Any) -> dict[str, object]:
        """The values used, as FaultParams dumps them, with only the active side's peers."""
        data = super()._used_values(handler)
        data.pop("to" if self.direction == "in" else "from", None)
        return data

    @property
    def peers(self) -> list[str]:
        """The peers on the shaped side: `to` (out) or `from` (in, default all)."""
        return list(self.to) if self.direction == "out" else list(self.from_ or ["all"])


class DelayParams(_Directed):
    """How late the target's packets leave (or arrive), and to (or from) whom."""

    delay_ms: Annotated[Milliseconds, Field(description="added to every packet, ms")] = 100
    jitter_ms: Annotated[
        Milliseconds, Field(description="uniform spread around delay_ms, ± ms (order is kept)")
    ] = 0
    connections_percent: Annotated[
        Percent,
        Field(
            description="share of the connections held, each chosen at its first packet, %; "
            "the others pass untouched, so a request on a held connection arrives late while "
            "its retry on a new one arrives on time (100: every packet)"
        ),
    ] = 100
    requests: Annotated[
        list[str], BeforeValidator(_request_names), Field(description=REQUESTS_MEANING)
    ] = []  # noqa: RUF012

    @model_validator(mode="after")
    def _requests_arrive(self) -> DelayParams:
        if self.requests and self.direction != "in":
            raise ValueError("requests applies to direction: in (a broker receives requests)")
        return self


def _required_requests(value: Any) -> Any:
    """`requests` of the request drop: known names, at least one."""
    names = _request_names(value)
    if not names:
        raise ValueError(f"name at least one request to drop: {', '.join(REQUESTS)}")
    return names


class DropRequestsParams(_Directed):
    """Which requests the target never receives (the rest of their connection with them), from
    whom, and on which share of the requests."""

    direction: Annotated[
        Literal["in"], Field(description="in (the only one): the requests the target receives")
    ] = "in"
    connections_percent: Annotated[
        Percent,
        Field(
            description="share of the chosen requests whose connection is dropped from them "
            "on, each drawn anew, %; the others pass untouched (100: every one)"
        ),
    ] = 100
    requests: Annotated[
        list[str],
        BeforeValidator(_required_requests),
        Field(
            description="the requests lost: from a packet that starts one of these on, its "
            "connection's packets are dropped, so the request times out and its retry goes on "
            "a new connection"
        ),
    ] = ["Produce"]  # noqa: RUF012 (pydantic copies defaults)


class ReorderParams(_Directed):
    """Which share of the target's packets (sent or received) overtake the rest, held."""

    percent: Annotated[
        Percent, Field(description="packets sent at once, ahead of held ones, %")
    ] = 25
    delay_ms: Annotated[
        Milliseconds, Field(description="how long the other packets are held, ms")
    ] = 50


class DuplicateParams(FaultParams):
    """Which share of the target's packets are sent twice."""

    percent: Annotated[Percent, Field(description="packets sent twice, %")] = 10
    to: To = ["all"]  # noqa: RUF012


class LossParams(FaultParams):
    """How many packets the target loses (the `loss` fault's: loss.py; PeerDrop's with peers)."""

    percent: Annotated[
        param_number, Field(ge=1, le=100, description="share of packets dropped, 1 to 100 %")
    ] = 30
    to: To = ["all"]  # noqa: RUF012


def shape_of(fault: str, params: FaultParams) -> dict[str, float | tuple[int, ...]]:
    """The shaper's Shape fields (harness/chaos/shaper/policy.py) for a step's params."""
    if isinstance(params, DelayParams):
        return {
            "delay_ms": float(params.delay_ms),
            "jitter_ms": float(params.jitter_ms),
            "connections_percent": float(params.connections_percent),
            **(
                {"request_keys": tuple(REQUESTS[r] for r in params.requests)}
                if params.requests
                else {}
            ),
        }
    if isinstance(params, DropRequestsParams):
        return {
            "connections_percent": float(params.connections_percent),
            "request_keys": tuple(REQUESTS[r] for r in params.requests),
            "drop_held": True,
        }
    if isinstance(params, ReorderParams):
        return {"reorder_percent": float(params.percent), "delay_ms": float(params.delay_ms)}
    if isinstance(params, DuplicateParams):
        return {"duplicate_percent": float(params.percent)}
    if isinstance(params, LossParams):
        return {"drop_percent": float(params.percent)}
    raise TypeError(f"fault {fault} is not shaped in userspace")


def match_rules(
    peers: list[str],
    own: str,
    addresses: dict[str, str],
    brokers: set[str],
    quorum: set[str],
    direction: Direction = "out",
) -> tuple[list[list[str]], list[list[str]]]:
    """(matches, skips): the iptables matches for the packets from node `own` to `peers`
    (direction out), or to node `own` from `peers` (direction in).

    `addresses` maps every node's name to its address; `brokers` and `quorum` name the
    brokers and the metadata quorum's nodes (a combined KRaft node is both). Clients are
    whoever is not a node, so shaping them means letting the nodes not chosen through first
    (skips) and shaping the rest of the interface."""
    out = ["-o", INTERFACE] if direction == "out" else ["-i", INTERFACE]
    peer = "-d" if direction == "out" else "-s"
    if "all" in peers:
        return [out], []
    others = {name: ip for name, ip in addresses.items() if name != own}
    chosen: set[str] = set()
    if "brokers" in peers:
        chosen |= {name for name in others if name in brokers}
    if "controllers" in peers:
        chosen |= {name for name in others if name in quorum}
    if "clients" in peers:
        skips = [[*out, peer, ip] for name, ip in sorted(others.items()) if name not in chosen]
        return [out], skips
    return [[*out, peer, others[name]] for name in sorted(chosen)], []


def peers_and_direction(params: FaultParams) -> tuple[list[str], Direction]:
    """The shaped side's peers and direction of a shaped fault's params (duplicate and the
    peer drop act on outgoing packets only)."""
    if isinstance(params, _Directed):
        return params.peers, params.direction
    return list(params.to), "out"  # type: ignore[attr-defined]


# A shaped fault's detail: its params as used (`from` is a keyword, hence this form; direction
# and delay_ms are FaultDetail's, which the analysis reads), the shaper and each node's rules.
ShapedDetail = TypedDict(
    "ShapedDetail",
    {
        "direction": str,
        "delay_ms": float,
        "to": list[str],
        "from": list[str],
        "jitter_ms": float,
        "connections_percent": float,
        "requests": list[str],
        "percent": float,
        "shaper": Required[str],
        "rules": Required[dict[str, list[list[str]]]],
    },
    total=False,
)


class _Shaped(Fault[Any]):
    """The shared inject and heal of the faults shaped by a helper in each target's namespace."""

    helper_site = HelperSite.SIDECAR
    on_packets = True
    shaped = True
    # Once injected: the shapers started, each node's mark bit (both until the heal), and what
    # each shaper did (from the heal on). Replaced, never changed in place, before then.
    _sidecars: Sequence[Sidecar] = ()
    _marks: Mapping[tuple[str, str], int] = MappingProxyType({})
    _figures: Mapping[str, ShaperFigures | None] = MappingProxyType({})

    def inject(self) -> ShapedDetail:
        from harness.platform.sidecar import Sidecar

        cluster = self.ctx.cluster
        # A node that is down has no address: it takes no rule (another fault holds it).
        addresses = {
            node.hostname: ip for node in cluster.all_nodes if (ip := node.ip(cluster.network_name))
        }
        brokers = {node.hostname for node in cluster.nodes}
        quorum = {node.hostname for node in [*cluster.quorum, *cluster.ensemble]}
        # Filled as they start, so that a heal after a failure stops those started.
        sidecars: list[Sidecar] = []
        marks: dict[tuple[str, str], int] = {}
        self._sidecars, self._marks, self._figures = sidecars, marks, MappingProxyType({})
        rules: dict[str, list[list[str]]] = {}
        try:
            peers, direction = peers_and_direction(self.params)
            for node in self.nodes:
                matches, skips = match_rules(
                    peers, node.hostname, addresses, brokers, quorum, direction
                )
                where = (cluster.network_name, node.hostname)
                # A queue number of its own: two shapers on one node must not share a queue.
                mark, queue = SLOTS.take(where, self.ctx.rng.randrange(1, MAX_QUEUE))
                marks[where] = mark
                plan = self._plan(matches, skips, direction, mark, queue)
                sidecar = Sidecar(cluster, node, SHAPER_PACKAGE, "shaper.main", plan, "shaper")
                rules[node.hostname] = sidecar.start()["rules"]
                sidecars.append(sidecar)
        except Exception as exc:
            self.heal()
            raise FaultError(str(exc)) from exc
        detail = {**self.params.model_dump(), "shaper": "nfqueue", "rules": rules}
        return cast("ShapedDetail", detail)  # the params' keys, as pydantic dumps them

    def _plan(
        self,
        matches: list[list[str]],
        skips: list[list[str]],
        direction: str,
        mark: int,
        queue: int,
    ) -> str:
        """The shaper's plan (harness/chaos/shaper/main.py) as its JSON argument; `mark` its
        bit of the packet mark on the node, `queue` its NFQUEUE number there."""
        return json.dumps({
            "queue": queue,
            "chain": f"KCHAOS_Q{queue}",
            # The built-in chain that jumps to the plan's: what the node sends, or receives.
            "hook": "OUTPUT" if direction == "out" else "INPUT",
            "matches": matches,
            "skips": skips,
            "shape": shape_of(self.name, self.params),
            "seed": self.ctx.rng.randrange(1 << 30),
            "mark": mark,
        })  # fmt: skip

    def heal(self) -> None:
        problems = []
        figured = dict(self._figures)
        for sidecar in self._sidecars:
            said = sidecar.stop()
            figures = next((line["figures"] for line in said if "figures" in line), None)
            figured[sidecar.where] = figures
            if figures is None:
                problems.append(f"{sidecar.where}: the shaper ended without its figures")
        self._sidecars, self._figures = (), figured
        for where, mark in self._marks.items():  # their rules are gone by now
            SLOTS.give_back(where, mark)
        self._marks = MappingProxyType({})
        if problems:
            raise FaultError("; ".join(problems))

    def detail(self) -> FaultEndDetail:
        """What each node's shaper did: packets shaped, dropped, duplicated, hold times."""
        return {"shaper": dict(self._figures)}


class Delay(_Shaped):
    """The target's packets to params.to leave params.delay_ms late (± params.jitter_ms), or
    with direction: in, those it receives from params.from arrive that late; with
    params.connections_percent below 100, only the packets of that share of the connections."""

    name = "delay"
    Params = DelayParams
    class_kinds = (ClassKind.DELAY,)


class DropRequests(_Shaped):
    """The requests params.requests that the target receives from params.from never arrive:
    from a packet that starts one on, the rest of its connection is dropped (on
    params.connections_percent of such requests), so the sender's request times out and its
    retry goes on a new connection: a request lost by its API key."""

    name = "drop-requests"
    Params = DropRequestsParams
    class_kinds = (ClassKind.LOSS,)


class Reorder(_Shaped):
    """params.percent of the target's packets (sent, or with direction: in received) overtake
    the rest, held params.delay_ms."""

    name = "reorder"
    Params = ReorderParams
    class_kinds = (ClassKind.REORDER,)


class Duplicate(_Shaped):
    """params.percent of the target's packets to params.to are sent twice."""

    name = "duplicate"
    Params = DuplicateParams
    class_kinds = (ClassKind.DUPLICATE,)


class PeerDrop(_Shaped):
    """params.percent of the target's packets to params.to dropped by the shaper: how the
    `loss` fault (loss.py) drops packets to chosen peers only. Not in the registry."""

    name = "loss"
    Params = LossParams
    class_kinds = (ClassKind.LOSS,)
