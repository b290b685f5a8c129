"""How long each fault acts, for the liveness bounds (the group's `stuck`, a transaction's
`txn_hanging`): time inside a fault is the harness's doing, only the time outside every fault
counts against Kafka.

A fault acts from its injection to its heal (one never healed: to the final heal). A crash
(the broker killed, or halted by a failed fsync, with no controlled shutdown) acts longer: the
cluster takes the broker for alive, and leaves it leading its partitions and coordinating its
transactions and groups, until its session expires. In KRaft a restarted broker cannot even
register again before then (DUPLICATE_BROKER_REGISTRATION), and when the crash took the active
controller, its successor is elected first and then grants every broker a fresh session. So a
crash acts at least `failure_detection_us` past its injection: ZooKeeper's session timeout, or
the broker's session timeout plus the quorum's fetch and election timeouts.

A node can also stop with no fault stopping it: a broker paused while it starts shuts itself
down once it may no longer register (initial.broker.registration.timeout.ms), and with it gone
one crash more can take the controllers' majority, so no successor is elected until the crashed
node is back. The sampler records the containers that stood stopped; each span a node stood
stopped acts as a crash from the last sample that saw it up, since when it went down between two
samples is not known, to the first that saw it up again.
"""

from __future__ import annotations

from typing import Final

from analysis.model.evidence import RunEvidence
from harness.rundir.events import FaultStart, Sample
from harness.rundir.spec import RunSpec

__all__ = [
    "CRASHES",
    "acting",
    "failure_detection_us",
    "fault_free_us",
    "fault_windows",
    "final_heal_us",
    "stopped_spans",
]

# The fault kinds that end a broker without a controlled shutdown (harness fault families
# process, crash and disk).
CRASHES: Final = frozenset(
    {"kill", "kill-all", "power-loss", "lose-unsynced", "torn-write", "fsync-error"}
)
_KRAFT_DETECTION: Final = (
    "broker.session.timeout.ms",
    "controller.quorum.fetch.timeout.ms",
    "controller.quorum.election.timeout.ms",
)


def failure_detection_us(spec: RunSpec | None) -> int:
    """How long after a crash the cluster of `spec` may still take the broker for alive (see
    the module docstring), from its settings or Kafka's defaults; 0 without a spec or a mode."""
    if spec is None or spec.kafka.mode is None:
        return 0
    if spec.kafka.mode == "zookeeper":
        names: tuple[str, ...] = ("zookeeper.session.timeout.ms",)
    else:
        names = _KRAFT_DETECTION
    return int(sum(spec.kafka.setting_ms(name) for name in names) * 1000)


def fault_windows(run: RunEvidence, detection_us: int = 0) -> tuple[tuple[int, int], ...]:
    """(injected, acting until) of every fault: its heal, or the final heal for one never
    healed (the last event's time when there was none); a crash's at least `detection_us`
    past its injection. Then each span a node stood stopped (`stopped_spans`), as a crash."""
    final = final_heal_us(run)
    windows = [(injected, until) for _, injected, until in acting(run, detection_us)]
    for _, down, up in stopped_spans(run.samples, final):
        windows.append((down, max(up, down + detection_us)))
    return tuple(windows)


def final_heal_us(run: RunEvidence) -> int:
    """When the final heal began; the last event's time when there was none."""
    heal = run.phase_stamps("heal")
    return heal[-1] if heal else max((e.ts_us or 0 for e in run.events.events), default=0)


def acting(run: RunEvidence, detection_us: int = 0) -> list[tuple[FaultStart, int, int]]:
    """Each fault injected, with when it was and until when it acted (as `fault_windows`
    says, stopped nodes apart), in file order."""
    final = final_heal_us(run)
    healed = {e.fault_id: e.ts_us or final for e in run.fault_ends if e.fault_id is not None}
    windows = []
    for start in run.fault_starts:
        if start.fault_id is None:
            continue
        injected = start.ts_us or 0
        until = healed.get(start.fault_id, final)
        if start.fault in CRASHES:
            until = max(until, injected + detection_us)
        windows.append((start, injected, until))
    return windows


def stopped_spans(samples: list[Sample], final: int) -> list[tuple[str, int, int]]:
    """Each span the samples saw a node stopped, as (host, from, to) in time order: from the
    last sample before that saw it up (that sample itself when none did) to the first after
    that saw it up again (`final` when none did). Samples that did not record `stopped` are
    passed over."""
    spans: list[tuple[str, int, int]] = []
    since: dict[str, int] = {}  # a node seen stopped → when it may have gone down
    previous = None
    for sample in samples:
        if sample.stopped is None:
            continue
        at, now = sample.ts_us or 0, set(sample.stopped)
        for host in now - since.keys():
            since[host] = at if previous is None else previous
        for host in since.keys() - now:
            spans.append((host, since.pop(host), at))
        previous = at
    spans.extend((host, down, final) for host, down in since.items())
    return sorted(spans, key=lambda span: (span[1], span[0]))


def fault_free_us(begin: int, finish: int, faults: tuple[tuple[int, int], ...]) -> int:
    """The µs of [begin, finish) outside every fault window."""
    covered, reach = 0, begin
    for injected, healed in sorted(faults):
        lo, hi = max(injected, reach), min(healed, finish)
        if hi > lo:
            covered += hi - lo
            reach = hi
    return finish - begin - covered
