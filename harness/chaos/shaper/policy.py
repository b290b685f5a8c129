"""When each packet goes on: the shaper's decisions, pure and seeded (standard library only).

The semantics follow netem's, so users can read them the way they read `tc qdisc ... netem`:
- delay: every packet is held `delay_ms`, plus a uniform draw in [-jitter_ms, +jitter_ms]
  (never below zero). Unlike netem with jitter, packets leave in the order they came: a
  packet is never released before one that arrived earlier and is still held (TCP then sees
  latency, not reordering; `reorder` is the fault for that);
- reorder: `reorder_percent` of the packets skip the delay and go at once, ahead of those held;
- duplicate: `duplicate_percent` of the packets are sent twice;
- drop: `drop_percent` of the packets are dropped, decided before anything else;
- connections: with `connections_percent` below 100, the delay holds only that share of the
  connections (TCP or UDP flows), each chosen once at its first packet; every packet of a held
  connection is held, in its order, and the other connections' packets go at once. A request
  on a held connection then arrives late while its retry on a new connection arrives on time:
  the late request overtaken by what the client did next;
- requests: with `request_keys` (Kafka API keys, e.g. 26 for EndTxn), a connection is only
  considered when a packet starts one of those requests (the packet holding the request's
  header), and each such request draws anew, at `connections_percent`, whether its connection
  is held from that packet on: the request chosen, and everything after it on its connection,
  arrives late;
- drop_held: a held connection's packets are dropped instead of delayed, from the packet chosen
  on: with request_keys, the chosen request never arrives and neither does anything after it
  on its connection, so the client's request times out and its retry goes on a new connection
  (a lost request; TCP retransmits a single dropped packet, so only the whole rest of the
  connection makes the request lost). A request cannot be duplicated this way: a TCP segment
  sent twice is discarded by the receiver's stack.
"""

from __future__ import annotations

import random
import struct
from dataclasses import asdict, dataclass

Flow = tuple[bytes, int, bytes, int]  # source address and port, destination address and port
FLOW_PROTOCOLS = (6, 17)  # TCP, UDP: both carry their ports first
MAX_REQUEST_BYTES = 100 << 20  # Kafka's socket.request.max.bytes default


@dataclass(frozen=True)
class Shape:
    """What the shaper does to each packet (see the module docstring)."""

    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    reorder_percent: float = 0.0
    duplicate_percent: float = 0.0
    drop_percent: float = 0.0
    connections_percent: float = 100.0
    request_keys: tuple[int, ...] = ()
    drop_held: bool = False

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if name not in ("request_keys", "drop_held") and value < 0:
                raise ValueError(f"{name} must be >= 0 (got {value})")
        for name in (
            "reorder_percent",
            "duplicate_percent",
            "drop_percent",
            "connections_percent",
        ):
            if getattr(self, name) > 100:
                raise ValueError(f"{name} must be <= 100 (got {getattr(self, name)})")

    @property
    def by_connection(self) -> bool:
        """True when only a share of the connections is held (each packet's flow decides)."""
        return self.connections_percent < 100 or bool(self.request_keys)

    @property
    def needs_payload(self) -> bool:
        """True when the shaper must see whole packets (to send copies, or to read a packet's
        flow from its headers), not just their ids."""
        return self.duplicate_percent > 0 or self.by_connection


def request_key(packet: bytes) -> int | None:
    """The Kafka API key of the request an IPv4 TCP packet starts (its payload opens with a
    request header: size, api key, api version); None when it starts none."""
    if len(packet) < 20 or packet[0] >> 4 != 4 or packet[9] != 6:
        return None
    tcp = (packet[0] & 0x0F) * 4
    if len(packet) < tcp + 13:
        return None
    payload = tcp + (packet[tcp + 12] >> 4) * 4
    if len(packet) < payload + 8:
        return None
    size, key, version = struct.unpack_from("!ihh", packet, payload)
    # A request's size counts the bytes after it; a segment in the middle of a stream rarely
    # has a plausible header where one would start.
    plausible = 0 < size < MAX_REQUEST_BYTES and 0 <= key < 100 and 0 <= version < 30
    return key if plausible else None


def flow_of(packet: bytes) -> Flow | None:
    """The flow of an IPv4 TCP or UDP packet (addresses and ports); None for anything else or
    a packet too short to hold them."""
    if len(packet) < 20 or packet[0] >> 4 != 4 or packet[9] not in FLOW_PROTOCOLS:
        return None
    header = (packet[0] & 0x0F) * 4
    if len(packet) < header + 4:
        return None
    source_port, destination_port = struct.unpack_from("!HH", packet, header)
    return packet[12:16], source_port, packet[16:20], destination_port


@dataclass(frozen=True)
class Decision:
    """The fate of one packet: dropped, or released at `release_at` (seconds, the caller's
    clock), once or twice."""

    drop: bool
    release_at: float
    duplicate: bool = False
    reordered: bool = False


class Policy:
    """Decides each packet's fate from its arrival time; one instance per queue."""

    def __init__(self, shape: Shape, seed: int | None = None):
        self.shape = shape
        self.rng = random.Random(seed)
        self._last_release = float("-inf")
        self._held_flows: dict[Flow, float] = {}  # a held flow's last release
        self._passed_flows: set[Flow] = set()

    @property
    def held_connections(self) -> int:
        """How many connections the policy chose to hold (connections_percent < 100)."""
        return len(self._held_flows)

    @property
    def passed_connections(self) -> int:
        """How many connections the policy let go untouched (connections_percent < 100)."""
        return len(self._passed_flows)

    def decide(
        self, arrived: float, flow: Flow | None = None, request: int | None = None
    ) -> Decision:
        """The fate of a packet that arrived at `arrived` (calls in arrival order), of `flow`
        and starting the request with API key `request` (read by flow_of and request_key;
        only used when the shape holds a share of the connections)."""
        shape = self.shape
        if shape.by_connection:
            return self._decide_by_flow(arrived, flow, request)
        if shape.drop_percent and self._chance(shape.drop_percent):
            return Decision(drop=True, release_at=arrived)
        duplicate = bool(shape.duplicate_percent) and self._chance(shape.duplicate_percent)
        if shape.reorder_percent and self._chance(shape.reorder_percent):
            return Decision(drop=False, release_at=arrived, duplicate=duplicate, reordered=True)
        release_at = max(arrived + self._hold_ms() / 1000.0, self._last_release)
        self._last_release = release_at
        return Decision(drop=False, release_at=release_at, duplicate=duplicate)

    def _decide_by_flow(self, arrived: float, flow: Flow | None, request: int | None) -> Decision:
        """A held connection's packets wait delay_ms (± jitter), each after its flow's packets
        before it; the other connections' packets, and packets of no flow, go at once. A
        connection draws whether it is held at its first packet, or with request_keys at each
        packet starting a chosen request until it is held."""
        if self.shape.request_keys:
            draws = request in self.shape.request_keys
        else:
            draws = flow not in self._passed_flows
        if flow is not None and flow not in self._held_flows and draws:
            self._draw(flow)
        if flow is None or flow not in self._held_flows:
            return Decision(drop=False, release_at=arrived)
        if self.shape.drop_held:
            return Decision(drop=True, release_at=arrived)
        release_at = max(arrived + self._hold_ms() / 1000.0, self._held_flows[flow])
        self._held_flows[flow] = release_at
        return Decision(drop=False, release_at=release_at)

    def _draw(self, flow: Flow) -> None:
        """Hold `flow` from now on, or let it pass, at connections_percent."""
        if self._chance(self.shape.connections_percent):
            self._held_flows[flow] = float("-inf")
            self._passed_flows.discard(flow)
        else:
            self._passed_flows.add(flow)

    def _hold_ms(self) -> float:
        """One packet's hold: delay_ms plus a uniform draw within ± jitter_ms, never below 0."""
        shape = self.shape
        if not shape.jitter_ms:
            return shape.delay_ms
        return max(0.0, shape.delay_ms + self.rng.uniform(-shape.jitter_ms, shape.jitter_ms))

    def _chance(self, percent: float) -> bool:
        return self.rng.random() * 100.0 < percent
