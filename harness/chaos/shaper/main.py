"""The shaper program: `python3 -m shaper.main '<plan as JSON>'` in a helper container that
shares a node's network namespace (standard library only).

It binds its NFQUEUE, puts its rules in a chain of its own (jumped to first from OUTPUT for the
packets the node sends, or from INPUT for those it receives, as the plan's `hook` says; each
NFQUEUE rule with --queue-bypass so packets pass untouched if this program dies), prints one
line `{"ready": ...}`, shapes packets until SIGTERM, then removes its rules, lets every held
packet go, and prints one line `{"figures": ...}` with what it did. With a `mark` (one bit of
its own on the node), a packet it lets go goes through its hook's rules again with that bit
set, which its own chain returns on: the rules of every other shaper and cut on the node still
apply to it, so faults on one node compose (without, the packet skips the rest of its hook).
A failure prints `{"error": ...}` and exits 1. Everything else it prints is not for the harness.
"""

from __future__ import annotations

import heapq
import json
import select
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .nfqueue import Packet, Queue
from .policy import Flow, Policy, Shape, flow_of, request_key

if TYPE_CHECKING:  # the harness's types: the helper container has this package only
    from harness.rundir.events import HeldConnection, ShaperFigures

IPT = ["iptables", "-w"]
# Copies the shaper sends carry this mark, so its own rules let them pass.
DUPLICATE_MARK = 0x4B435153
SO_MARK = 36
HOOKS = ("OUTPUT", "INPUT")
HOLDS_KEPT = 1_000_000  # hold times kept for the percentiles (a long fault keeps the first)
HELD_CONNECTIONS_KEPT = 200  # held connections named in the figures (the evidence of late requests)


@dataclass
class Plan:
    """What one shaper does: its queue and chain, which packets, and their shape."""

    queue: int
    chain: str
    matches: list[list[str]]  # iptables matches of the packets shaped (e.g. -o eth0 -d IP)
    skips: list[list[str]]  # matches of packets let through first (clients: not the nodes)
    shape: Shape
    seed: int | None = None
    hook: str = "OUTPUT"  # the built-in chain that jumps to ours: OUTPUT (sent) or INPUT
    mark: int = 0  # this shaper's bit of the packet mark on its node (0: accept, not repeat)

    @classmethod
    def from_json(cls, text: str) -> Plan:
        raw = json.loads(text)
        return cls(
            int(raw["queue"]),
            str(raw["chain"]),
            [list(map(str, m)) for m in raw["matches"]],
            [list(map(str, m)) for m in raw.get("skips", [])],
            Shape(**{**raw["shape"], "request_keys": tuple(raw["shape"].get("request_keys", ()))}),
            raw.get("seed"),
            str(raw.get("hook", "OUTPUT")),
            int(raw.get("mark", 0)),
        )

    def rules(self) -> list[list[str]]:
        """The chain's rules, in order, as arguments after `iptables -A <chain>`."""
        target = ["-j", "NFQUEUE", "--queue-num", str(self.queue), "--queue-bypass"]
        seen = f"{self.mark:#x}/{self.mark:#x}"
        return [
            *([["-m", "mark", "--mark", seen, "-j", "RETURN"]] if self.mark else []),
            ["-m", "mark", "--mark", hex(DUPLICATE_MARK), "-j", "RETURN"],
            *([*skip, "-j", "RETURN"] for skip in self.skips),
            *([*match, *target] for match in self.matches),
        ]


@dataclass
class Figures:
    """What the shaper did, printed when it ends."""

    seen: int = 0
    dropped: int = 0
    duplicated: int = 0
    reordered: int = 0
    holds_ms: list[float] = field(default_factory=list)
    # With connections_percent < 100 or request_keys: each held connection, named source >
    # destination, with the wall-clock time (epoch microseconds) its first packet was held and
    # the API key of the request that packet started (None: not chosen by its request).
    held_connections: dict[str, HeldConnection] = field(default_factory=dict)
    passed_connections: int = 0

    def hold_connection(self, flow: Flow, request: int | None, came_us: int) -> None:
        """Name a newly held connection, with the time its first held packet came (epoch µs,
        the time its hold is counted from) and the request it started."""
        if len(self.held_connections) < HELD_CONNECTIONS_KEPT:
            source, sport, destination, dport = flow
            name = f"{socket.inet_ntoa(source)}:{sport} > {socket.inet_ntoa(destination)}:{dport}"
            held: HeldConnection = {"at_us": came_us, "api_key": request}
            self.held_connections.setdefault(name, held)

    def add_hold(self, seconds: float) -> None:
        if len(self.holds_ms) < HOLDS_KEPT:
            self.holds_ms.append(seconds * 1000.0)

    def summary(self) -> ShaperFigures:
        holds = sorted(self.holds_ms)

        def pct(q: float) -> float | None:
            return round(holds[min(len(holds) - 1, int(q * len(holds)))], 3) if holds else None

        figures: ShaperFigures = {
            "packets": self.seen,
            "dropped": self.dropped,
            "duplicated": self.duplicated,
            "reordered": self.reordered,
            "hold_ms_p50": pct(0.50),
            "hold_ms_p99": pct(0.99),
            "hold_ms_max": round(holds[-1], 3) if holds else None,
        }
        if self.held_connections or self.passed_connections:
            figures["held_connections"] = self.held_connections
            figures["passed_connections"] = self.passed_connections
        return figures


def iptables(*args: str) -> None:
    subprocess.run([*IPT, *args], check=True, capture_output=True, text=True)


def install(plan: Plan) -> None:
    """The plan's chain, filled, jumped to first from its hook (replacing any stale one)."""
    if plan.hook not in HOOKS:
        raise ValueError(f"unknown hook {plan.hook!r}: expected one of {', '.join(HOOKS)}")
    remove(plan)
    iptables("-N", plan.chain)
    for rule in plan.rules():
        iptables("-A", plan.chain, *rule)
    iptables("-I", plan.hook, "1", "-j", plan.chain)


def remove(plan: Plan) -> None:
    """No trace of the plan's chain, jumped to from either hook (nothing happens when there is
    none)."""
    jumps = [["-D", hook, "-j", plan.chain] for hook in HOOKS]
    for args in (*jumps, ["-F", plan.chain], ["-X", plan.chain]):
        subprocess.run([*IPT, *args], capture_output=True)


class Shaper:
    """Holds each queued packet as the policy decides and gives its verdict when due."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.policy = Policy(plan.shape, plan.seed)
        self.queue = Queue(plan.queue, copy_payload=plan.shape.needs_payload)
        self.held: list[tuple[float, int, Packet, bool, float]] = []
        self.figures = Figures()
        self.sequence = 0
        self.copies: socket.socket | None = None
        if plan.shape.needs_payload:
            self.copies = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
            self.copies.setsockopt(socket.SOL_SOCKET, SO_MARK, DUPLICATE_MARK)

    def run(self, stopping: list[bool]) -> None:
        """Shape until `stopping[0]` turns true."""
        while not stopping[0]:
            wait = 0.2
            if self.held:
                wait = min(wait, max(0.0, self.held[0][0] - time.monotonic()))
            try:
                select.select([self.queue], [], [], wait)
            except InterruptedError:
                continue
            self.take(time.monotonic())
            self.release(time.monotonic())

    def take(self, now: float) -> None:
        """Decide the fate of every packet waiting, each counted as come at `now`
        (monotonic)."""
        came_us = int((time.time() - (time.monotonic() - now)) * 1e6)  # `now` on the wall clock
        by_connection = self.plan.shape.by_connection
        by_request = bool(self.plan.shape.request_keys)
        for packet in self.queue.read():
            self.figures.seen += 1
            flow = flow_of(packet.payload) if by_connection else None
            request = request_key(packet.payload) if by_request else None
            held_before = self.policy.held_connections
            decision = self.policy.decide(now, flow, request)
            if flow is not None and self.policy.held_connections > held_before:
                self.figures.hold_connection(flow, request, came_us)
            self.figures.passed_connections = self.policy.passed_connections
            if decision.drop:
                self.figures.dropped += 1
                self.queue.verdict(packet.packet_id, accept=False)
                continue
            self.figures.reordered += decision.reordered
            self.sequence += 1
            entry = (decision.release_at, self.sequence, packet, decision.duplicate, now)
            heapq.heappush(self.held, entry)

    def release(self, now: float, everything: bool = False) -> None:
        while self.held and (everything or self.held[0][0] <= now):
            _, _, packet, duplicate, arrived = heapq.heappop(self.held)
            if self.plan.mark:
                self.queue.repeat(packet.packet_id, packet.mark | self.plan.mark)
            else:
                self.queue.verdict(packet.packet_id, accept=True)
            self.figures.add_hold(time.monotonic() - arrived)
            if duplicate and self.copies is not None and len(packet.payload) >= 20:
                destination = socket.inet_ntoa(packet.payload[16:20])
                try:
                    self.copies.sendto(packet.payload, (destination, 0))
                    self.figures.duplicated += 1
                except OSError:
                    pass  # a copy that cannot be sent is a packet not duplicated

    def finish(self) -> None:
        """Let everything held go (the rules are gone by now), then unbind."""
        self.take(time.monotonic())
        self.release(time.monotonic(), everything=True)
        self.queue.close()


def say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def main(argv: list[str]) -> int:
    stopping = [False]

    def stop(*_: object) -> None:
        stopping[0] = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        plan = Plan.from_json(argv[1])
        shaper = Shaper(plan)
        install(plan)
    except Exception as exc:  # the harness reads this line as the reason
        say(error=f"{type(exc).__name__}: {exc}")
        return 1
    say(ready={"queue": plan.queue, "chain": plan.chain, "rules": plan.rules()})
    try:
        shaper.run(stopping)
    finally:
        remove(plan)
        shaper.finish()
        say(figures=shaper.figures.summary())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
