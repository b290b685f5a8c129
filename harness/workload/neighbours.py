"""Neighbour groups: other tenants of the workload group's coordinator, as on a shared cluster.

Groups that never read, placed on the workload group's `__consumer_offsets` partition, each
holding an offset of every partition of the topic `kchaos-neighbours` (one replica),
committed once before the workload. While the workload runs, lag monitors ask the groups'
coordinator for all of their offsets, in one OffsetFetch for all the groups (as lag
exporters poll), keeping the broker that answers, as clients keep their coordinator; and a
checkpointer commits one offset of the next group through every broker each interval (one
record each), each commit on a free connection, so that a coordinator holding its commits
keeps taking new ones.

A broker that is not the groups' coordinator answers at once; one that believes it is (a
coordinator cut off from the other brokers, still loaded, keeps its monitors) does the work.
The load is a queue of events on the coordinator's partition, ahead of whatever the
coordinator schedules behind them (an unload: KAFKA-20634). Each request's broker, latency
and answer is a line of `neighbours.jsonl`.

The load runs in its own process (`python -m harness.workload.neighbours neighbours.json`),
started by the harness and stopped with SIGTERM, so that reading the monitors' answers
(megabytes each) takes nothing from the harness's own threads.
"""

from __future__ import annotations

import json
import queue
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from harness.chaos.coordinators import partition_for
from harness.workload import kafka_wire
from harness.workload.producer.command import dying_with_parent

TOPIC = "kchaos-neighbours"
CLIENT_ID = "kchaos-neighbours"
# A coordinator cut off from its followers holds a commit up to offsets.commit.timeout.ms.
REQUEST_TIMEOUT_S = 90.0
LOG = "neighbours.jsonl"
SPEC = "neighbours.json"  # the load process's NeighbourLoad, beside LOG
OFFSETS_PARTITIONS = 50  # offsets.topic.num.partitions' default
PRELOAD_TIMEOUT_S = 300.0
# A monitor whose coordinator refused waits this long before it looks for the next one, as a
# lag exporter polls on an interval: the new coordinator, whose broker the old one's replicas
# fetch from as they rejoin, does not take the whole load at once.
REDISCOVERY_PAUSE_S = 5.0
MAX_PENDING = 200  # connections a checkpointer keeps to one broker


def neighbour_ids(group_id: str, partitions: int, count: int) -> list[str]:
    """The first `count` names kchaos-neighbour-<n> on `group_id`'s partition."""
    target = partition_for(group_id, partitions)
    names: list[str] = []
    index = 0
    while len(names) < count:
        name = f"kchaos-neighbour-{index}"
        if partition_for(name, partitions) == target:
            names.append(name)
        index += 1
    return names


@dataclass(frozen=True)
class Broker:
    """A broker's id and the address the harness reaches it at."""

    node: int
    host: str
    port: int


@dataclass(frozen=True)
class NeighbourLoad:
    """What the load process needs: the brokers, the groups, the topic's partitions, the
    monitor's connections and the checkpointer's interval."""

    brokers: tuple[Broker, ...]
    groups: tuple[str, ...]
    partitions: int
    monitors: int
    commit_interval_s: float
    log: str

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> NeighbourLoad:
        raw = json.loads(text)
        brokers = tuple(Broker(**broker) for broker in raw.pop("brokers"))
        return cls(brokers=brokers, groups=tuple(raw.pop("groups")), **raw)


def _exact(sock: socket.socket, size: int) -> bytes:
    buffer = bytearray()
    while len(buffer) < size:
        chunk = sock.recv(min(size - len(buffer), 1 << 20))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        buffer += chunk
    return bytes(buffer)


class Connection:
    """One socket to one broker, one request at a time; a failure closes it and the next
    request connects again."""

    def __init__(self, broker: Broker):
        self.broker = broker
        self._socket: socket.socket | None = None
        self._correlation = 0

    def request(self, build: Callable[[int], bytes]) -> bytes:
        """Send the request `build` makes for the next correlation id; the response (without
        its size). Raises OSError when the broker cannot be reached or does not answer."""
        if self._socket is None:
            address = (self.broker.host, self.broker.port)
            self._socket = socket.create_connection(address, timeout=REQUEST_TIMEOUT_S)
        self._correlation += 1
        try:
            self._socket.sendall(build(self._correlation))
            (size,) = struct.unpack(">i", _exact(self._socket, 4))
            return _exact(self._socket, size)
        except OSError:
            self.close()
            raise

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None


class RequestLog:
    """`neighbours.jsonl`: one line a request, written by any thread."""

    def __init__(self, path: Path):
        self._file = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def close(self) -> None:
        self._file.close()

    def write(self, kind: str, broker: int, started: float, error: int | str) -> None:
        line = {
            "ts_us": int(time.time() * 1e6),
            "kind": kind,
            "broker": broker,
            "ms": round((time.monotonic() - started) * 1000, 1),
            "error": error,
        }
        with self._lock:
            self._file.write(json.dumps(line) + "\n")
            self._file.flush()


def _timed(
    log: RequestLog,
    kind: str,
    connection: Connection,
    build: Callable[[int], bytes],
    error_of: Callable[[bytes], int],
) -> int | str:
    """One request, logged with its latency; its error code, or the OSError's name."""
    started = time.monotonic()
    try:
        error: int | str = error_of(connection.request(build))
    except OSError as exc:
        error = type(exc).__name__
    log.write(kind, connection.broker.node, started, error)
    return error


def monitor(load: NeighbourLoad, log: RequestLog, stop: threading.Event) -> None:
    """Ask the groups' coordinator for every offset of every group, again and again until
    `stop`. As a client does, the monitor keeps the broker that answered until it refuses (not
    the coordinator, or unreachable); then, after REDISCOVERY_PAUSE_S, it asks every broker in
    turn until one answers."""
    connections = [Connection(broker) for broker in load.brokers]
    groups = list(load.groups)
    current: Connection | None = None
    turn = 0
    while not stop.is_set():
        connection = current or connections[turn % len(connections)]
        turn += 1
        error = _timed(
            log, "fetch", connection,
            lambda c: kafka_wire.offset_fetch_all(groups, c, CLIENT_ID),
            kafka_wire.fetch_error,
        )  # fmt: skip
        if error == 0:
            current = connection
        elif current is not None:  # the coordinator refused: look again after a pause
            current = None
            stop.wait(REDISCOVERY_PAUSE_S)
        elif turn % len(connections) == 0:
            stop.wait(0.1)  # no broker answered this round: do not spin
    for connection in connections:
        connection.close()


def checkpointer(
    load: NeighbourLoad, broker: Broker, log: RequestLog, stop: threading.Event
) -> None:
    """Each interval, commit one offset of the next group (one record, the next partition in
    turn) through `broker` until `stop`, each commit
    on a connection of its own that is free (a new one while all wait, up to MAX_PENDING): a
    coordinator that holds its commits (cut off from its followers) keeps taking new ones, as
    it does from many clients."""
    free: queue.SimpleQueue[Connection] = queue.SimpleQueue()
    opened = 0
    step = 0
    while not stop.wait(load.commit_interval_s):
        try:
            connection = free.get_nowait()
        except queue.Empty:
            if opened >= MAX_PENDING:
                continue
            connection = Connection(broker)
            opened += 1
        group = load.groups[step % len(load.groups)]
        step += 1
        threading.Thread(
            target=_commit_once, args=(load, connection, group, step, log, free), daemon=True
        ).start()


def _commit_once(
    load: NeighbourLoad,
    connection: Connection,
    group: str,
    offset: int,
    log: RequestLog,
    free: queue.SimpleQueue[Connection],
) -> None:
    _timed(
        log, "commit", connection,
        lambda c: kafka_wire.offset_commit(
            group, TOPIC, [offset % load.partitions], offset, c, CLIENT_ID
        ),
        kafka_wire.commit_error,
    )  # fmt: skip
    free.put(connection)


def preload(load: NeighbourLoad, deadline_s: float = PRELOAD_TIMEOUT_S) -> float:
    """Commit offset 0 of every partition for each group, through each broker until one
    commits it; the seconds it took. Raises TimeoutError past `deadline_s`."""
    started = time.monotonic()
    connections = [Connection(broker) for broker in load.brokers]
    try:
        for group in load.groups:
            while not _committed_somewhere(connections, group, load.partitions):
                if time.monotonic() - started > deadline_s:
                    raise TimeoutError(f"no broker took the offsets of {group}")
                time.sleep(0.5)
    finally:
        for connection in connections:
            connection.close()
    return time.monotonic() - started


def _committed_somewhere(connections: Sequence[Connection], group: str, partitions: int) -> bool:
    for connection in connections:
        try:
            answer = connection.request(
                lambda c: kafka_wire.offset_commit(group, TOPIC, range(partitions), 0, c, CLIENT_ID)
            )
        except OSError:
            continue
        if kafka_wire.commit_error(answer) == 0:
            return True
    return False


class Neighbours:
    """The neighbour groups of a repetition: start() commits their offsets (`preload`) and
    starts the load process; stop() ends it (SIGTERM, then a wait)."""

    def __init__(self, load: NeighbourLoad):
        self.load = load
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Preload, then the load process. Raises TimeoutError when no broker takes a group."""
        seconds = preload(self.load)
        log = RequestLog(Path(self.load.log))
        log.write("preload", -1, time.monotonic() - seconds, 0)
        log.close()
        spec = Path(self.load.log).with_name(SPEC)  # a file: thousands of groups outgrow argv
        spec.write_text(self.load.to_json(), encoding="utf-8")
        argv = [sys.executable, "-m", "harness.workload.neighbours", str(spec)]
        self.process = subprocess.Popen(dying_with_parent(argv))

    def stop(self, timeout_s: float = 10.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def main(spec: str) -> None:
    """The load process (the path of its NeighbourLoad's JSON): monitors and one checkpointer
    per broker until SIGTERM."""
    load = NeighbourLoad.from_json(Path(spec).read_text(encoding="utf-8"))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the harness decides
    log = RequestLog(Path(load.log))
    threads = [
        threading.Thread(target=monitor, args=(load, log, stop), daemon=True)
        for _ in range(load.monitors)
    ]
    if load.commit_interval_s > 0:
        threads += [
            threading.Thread(target=checkpointer, args=(load, broker, log, stop), daemon=True)
            for broker in load.brokers
        ]
    for thread in threads:
        thread.start()
    stop.wait()


if __name__ == "__main__":
    main(sys.argv[1])
