"""events.jsonl: the event types of a run, their writer (EventLog) and their reader."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Final, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetPydanticSchema,
    TypeAdapter,
    ValidationError,
    with_config,
)
from pydantic_core import core_schema
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12

from harness.rundir.layout import EVENTS

# ---------------------------------------------------------------------------------------------
# events.jsonl


class EventType(StrEnum):
    """The `type` of an events.jsonl line."""

    PHASE = "phase"  # phase: cluster-start, topic-ready, workload-start, ...
    # fault_id, step, fault, target, nodes, hosts, class_kind, whole_cluster, detail, and
    # partitions: [{partition, leader, isr, replicas}] just before injection (or
    # partitions_error); `as` and `open` for a named fault left active until a heal step
    FAULT_START = "fault_start"
    FAULT_END = "fault_end"  # fault_id, fault, nodes, detail?
    FAULT_ERROR = "fault_error"  # fault_id, fault, target, error, stage (inject|heal|condition)
    FAULT_SKIPPED = "fault_skipped"  # step, fault, target, reason: a step that did not act
    CONDITION = "condition"  # step, condition, waited_s: a step's `after:` condition held
    SAMPLE = "sample"  # the sampler's view of the topic and the cluster (Sample)
    READBACK = "readback"  # complete, log_start_offsets, high_watermarks, records, ...
    RECORDER_TALLY = "recorder_tally"  # reports: {ok, failed, indeterminate}, journal_error
    # client, config: {key: value}, idempotent: the producer settings a client program ran
    # with, its own defaults resolved, as it printed them (workload.client java or command)
    CLIENT_CONFIG = "client_config"
    HARNESS_ERROR = "harness_error"  # error
    # producer, pid, exitcode, error: a producer process (workload.producers > 1) that died or
    # failed before it finished; its journal is still merged into acked.parquet
    PRODUCER_CRASHED = "producer_crashed"
    # kept, reason, missing_acked, budget_bytes, topic, error,
    # brokers: {id: {files, bytes, partitions, skipped}}
    SEGMENTS = "segments"
    # member, start, pid, exitcode, error: a group consumer process (workload.consumers > 0)
    # that ended unexpectedly (not by a consumer fault); its journal is still read
    CONSUMER_CRASHED = "consumer_crashed"
    # caught_up, waited_s, committed: {partition: offset}, end_offsets: {partition: offset},
    # commit, members, starts: after the final heal, whether the group's committed offsets
    # reached every partition's end (else consumer_unprocessed cannot be judged)
    CONSUMERS = "consumers"


class _Event(BaseModel):
    """What every event has: when (epoch µs of the harness host's wall clock) and its type.

    Fields the writer did not give stay out of the line (so a line holds what was known);
    fields no model names are kept (extra="allow"): a newer harness's additions still read.
    Nested structures (partition states, offsets by partition) stay JSON-shaped: their keys
    are the JSON file's (partition numbers as strings).
    """

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)

    ts_us: int | None = None  # None only in a hand-written line; EventLog.write stamps now


@with_config(ConfigDict(extra="allow"))
class PartitionRoles(TypedDict, total=False):
    """One partition's roles as a `sample` and a `fault_start` record them: its leader (None:
    it had none), its ISR and, at an injection, its replicas (writers give the keys in this
    order; keys no field names are kept; readers take a missing or null list as empty)."""

    partition: int
    leader: int | None
    isr: list[int] | None
    replicas: list[int] | None


@with_config(ConfigDict(extra="allow"))
class UncommittedView(TypedDict, total=False):
    """A transactional run's read_uncommitted read-back: whether it reached every end, its
    records, each partition's high watermark, and its seconds."""

    complete: bool
    records: int
    high_watermarks: dict[Any, int]
    seconds: float


@with_config(ConfigDict(extra="allow"))
class BrokerSegments(TypedDict, total=False):
    """What was kept of one broker's segments: files, bytes, partition folders, and why not
    (`skipped`)."""

    files: int
    bytes: int
    partitions: list[str]
    skipped: str | None


class FaultDetail(TypedDict, total=False):
    """A fault_start's `detail`: what the fault's inject() said. Each fault type's detail
    (harness/chaos/faults/<type>.py) extends this with its own keys; these are the keys the
    analysis reads: a shaped fault's direction (`in`: the target's incoming packets are held)
    and the delay it adds, ms."""

    direction: str
    delay_ms: float


class HeldConnection(TypedDict):
    """A connection a shaper held: when its first held packet came (epoch µs) and the API key
    of the request that packet started (None: not chosen by its request)."""

    at_us: int
    api_key: int | None


class ShaperFigures(TypedDict, total=False):
    """What one node's shaper did (harness/chaos/shaper/main.py prints it as it ends; the
    connections only when it held or passed any; an older shaper's may lack keys)."""

    packets: int
    dropped: int
    duplicated: int
    reordered: int
    hold_ms_p50: float | None
    hold_ms_p99: float | None
    hold_ms_max: float | None
    held_connections: dict[str, HeldConnection]  # by "source:port > destination:port"
    passed_connections: int


class FaultEndDetail(TypedDict, total=False):
    """A fault_end's `detail`: what the fault's detail() said after the heal. Each fault type's
    extends this; the key the analysis reads: each node's shaper figures (None: it ended
    without them)."""

    shaper: dict[str, ShaperFigures | None]


# A fault's detail as written: typed for the code on both sides, never validated or reshaped
# (the line keeps the fault's keys in its order; an older run's detail reads as it is).
AsWritten: Final = GetPydanticSchema(lambda _source, _handler: core_schema.any_schema())


class PhaseEvent(_Event):
    """A phase of the repetition began: cluster-start, topic-ready, workload-start, ..."""

    type: Literal[EventType.PHASE] = EventType.PHASE
    phase: str = ""
    pids: list[int] | None = None  # producers-ready, consumers-ready
    group: str | None = None  # consumers-ready
    bootstrap: str | None = None  # topic-ready
    actions: list[str] | None = None  # heal: what heal_all did


class FaultStart(_Event):
    """A fault was injected: ts_us when injection began, injected_us when it returned."""

    type: Literal[EventType.FAULT_START] = EventType.FAULT_START
    injected_us: int | None = None
    fault_id: int | None = None
    step: int | None = None
    fault: str | None = None
    target: str | None = None
    partition: int | None = None
    class_kind: str | None = None  # what the analysis keys the guarantee on
    whole_cluster: bool = False
    as_: str | None = Field(default=None, alias="as")  # a named fault left for a heal step
    open: bool = False
    nodes: list[int] = []  # broker ids faulted
    hosts: list[str] = []  # every faulted node's host name (controllers, ZooKeeper too)
    # [{partition, leader, isr, replicas}] just before injection, or why not
    partitions: list[PartitionRoles] | None = None
    partitions_error: str | None = None
    detail: Annotated[FaultDetail, AsWritten] = {}


class FaultEnd(_Event):
    """A fault was healed (ts_us: when the heal commands returned)."""

    type: Literal[EventType.FAULT_END] = EventType.FAULT_END
    fault_id: int | None = None
    fault: str | None = None
    nodes: list[int] = []
    hosts: list[str] = []
    detail: Annotated[FaultEndDetail, AsWritten] = {}


class FaultFailed(_Event):
    """A fault could not be injected, healed or waited for."""

    type: Literal[EventType.FAULT_ERROR] = EventType.FAULT_ERROR
    fault_id: int | None = None
    step: int | None = None
    fault: str | None = None
    target: str | None = None
    stage: str | None = None  # inject | heal | condition
    error: str | None = None


class FaultSkipped(_Event):
    """A step of a disjoint (generated) schedule that did not act: no node its role named
    then was free of other faults, or the cluster refused it. Its heal is skipped too."""

    type: Literal[EventType.FAULT_SKIPPED] = EventType.FAULT_SKIPPED
    step: int | None = None
    fault: str | None = None
    target: str | None = None
    reason: str | None = None


class ConditionMet(_Event):
    """A step's `after:` condition held after `waited_s`."""

    type: Literal[EventType.CONDITION] = EventType.CONDITION
    step: int | None = None
    condition: str | None = None
    waited_s: float | None = None


class PartitionEnd(BaseModel):
    """One partition's ends as ListOffsets(latest) answered: the high watermark (what a
    read_uncommitted consumer can read up to) and the last stable offset (a read_committed
    one's limit: the first offset of a transaction still open). None: the leader did not say."""

    model_config = ConfigDict(extra="allow", frozen=True)

    partition: int
    high_watermark: int | None = None
    last_stable: int | None = None


class Sample(_Event):
    """The sampler's view of the topic: [{partition, leader, isr}], the controller sometimes,
    each partition's ends read just after (at `ends_us`; `ends_error` when unreadable), the
    host names of the containers neither running nor paused (`stopped`; None: not recorded)
    and in a run with a consumer group the group's committed offsets."""

    type: Literal[EventType.SAMPLE] = EventType.SAMPLE
    partitions: list[PartitionRoles] = []
    stopped: list[str] | None = None
    controller: int | None = None
    error: str | None = None
    ends: list[PartitionEnd] | None = None  # None: not recorded (older runs, or unreadable)
    ends_us: int | None = None
    ends_error: str | None = None
    # The consumer group's committed offsets (partition → next offset to read, -1: none; a
    # partition its coordinator answered with an error for is absent), read with an OffsetFetch
    # sent at committed_asked_us: every commit acknowledged before then must show. None: no
    # group, or not readable.
    committed: dict[int, int] | None = None
    committed_asked_us: int | None = None
    committed_error: str | None = None


class ReadbackDone(_Event):
    """The final read-back: whether it reached every partition's end, and the offsets."""

    type: Literal[EventType.READBACK] = EventType.READBACK
    complete: bool = False
    records: int | None = None
    waited_s: float | None = None  # for the full ISR before reading
    full_isr: bool | None = None
    log_start_offsets: dict[Any, int] = {}
    high_watermarks: dict[Any, int] = {}
    end_offsets: dict[Any, int] = {}
    seconds: float | None = None
    log_start_is_zero: bool | None = None
    isolation: str | None = None
    uncommitted: UncommittedView | None = None  # transactional runs: the read_uncommitted view


class ProducerTally(TypedDict):
    """One producer's part of a fleet's tally (workload.producers > 1), whatever the client."""

    producer: int
    reports: dict[str, int]  # {ok, failed, indeterminate}
    journal_error: str | None
    problem: str | None  # what ended it early (a crash, a client's error), None when nothing


class RecorderTally(_Event):
    """The delivery reports a recorder served, and its journal's first error."""

    type: Literal[EventType.RECORDER_TALLY] = EventType.RECORDER_TALLY
    reports: dict[str, int] = {}  # {ok, failed, indeterminate}
    journal_error: str | None = None
    producers: list[ProducerTally] | None = None  # a fleet's, each producer's part
    transactions: dict[str, int] | None = None  # transactional runs: outcomes


class ClientConfig(_Event):
    """The settings a client program's producer ran with, defaults resolved (as it said)."""

    type: Literal[EventType.CLIENT_CONFIG] = EventType.CLIENT_CONFIG
    client: str = ""  # e.g. "java 3.8.0"
    config: dict[str, str] = {}
    idempotent: bool | None = None  # None: the client could not tell


class HarnessError(_Event):
    """The harness failed the repetition (the run is UNKNOWN)."""

    type: Literal[EventType.HARNESS_ERROR] = EventType.HARNESS_ERROR
    error: str | None = None


class ProducerCrashed(_Event):
    """A producer process died or failed before it finished (its journal is still merged)."""

    type: Literal[EventType.PRODUCER_CRASHED] = EventType.PRODUCER_CRASHED
    producer: int | None = None
    pid: int | None = None
    exitcode: int | None = None
    error: str | None = None


class SegmentsKept(_Event):
    """Whether the brokers' log segments were kept for attribution, and why."""

    type: Literal[EventType.SEGMENTS] = EventType.SEGMENTS
    kept: bool = False
    reason: str | None = None
    missing_acked: int | None = None
    budget_bytes: int | None = None
    topic: str | None = None
    error: str | None = None
    brokers: dict[str, BrokerSegments] | None = None  # broker id → what was kept
    seconds: float | None = None


class ConsumerCrashed(_Event):
    """A group consumer process ended unexpectedly (its journal is still read)."""

    type: Literal[EventType.CONSUMER_CRASHED] = EventType.CONSUMER_CRASHED
    member: int | None = None
    start: int | None = None
    pid: int | None = None
    exitcode: int | None = None
    error: str | None = None


class ConsumersDone(_Event):
    """After the final heal: whether the group's committed offsets reached every end."""

    type: Literal[EventType.CONSUMERS] = EventType.CONSUMERS
    caught_up: bool = False
    waited_s: float | None = None
    committed: dict[str, int] = {}
    end_offsets: dict[str, int] = {}
    commit: str | None = None
    members: int | None = None
    starts: dict[str, int] = {}
    group: str | None = None
    processing_ms: float | None = None
    journal_errors: list[str] = []
    crashes: list[Any] = []
    # the members' client: librdkafka (in the harness), or a program's: "java <version>",
    # "franz-go <version>" ...
    client: str = "librdkafka"
    config: dict[str, str] = {}  # the members' settings (ConsumerGroup._members_config)
    # The liveness bound (workload.consumer_stuck_s), and the producers' transaction.timeout.ms
    # in a transactional run (how long an open transaction may hold the last stable offset).
    stuck_s: float | None = None
    transaction_timeout_ms: int | None = None


Event = Annotated[
    PhaseEvent
    | FaultStart
    | FaultEnd
    | FaultFailed
    | FaultSkipped
    | ConditionMet
    | Sample
    | ReadbackDone
    | RecorderTally
    | ClientConfig
    | HarnessError
    | ProducerCrashed
    | SegmentsKept
    | ConsumerCrashed
    | ConsumersDone,
    Field(discriminator="type"),
]
_EVENT: Final = TypeAdapter(Event)
E = TypeVar("E", bound=_Event)


@dataclass(frozen=True)
class RunEvents:
    """A run's events.jsonl parsed once: every event in file order, typed."""

    events: tuple[Event, ...] = ()
    unreadable: int = 0  # torn, non-object, unknown-type or invalid lines (skipped)

    def of(self, kind: type[E]) -> list[E]:
        """The events of one model, in file order."""
        return [e for e in self.events if isinstance(e, kind)]

    def phases(self, phase: str) -> list[PhaseEvent]:
        """The `phase` events of one phase, in file order."""
        return [e for e in self.of(PhaseEvent) if e.phase == phase]


def parse_events(lines: Iterable[str]) -> RunEvents:
    """Parse events.jsonl lines; lines that are torn, not objects, of an unknown type or
    invalid are counted, not raised (a crashed run may leave a torn last line)."""
    return _validated((line for line in lines if line.strip()), _EVENT.validate_json)


def parse_event_objects(objects: Iterable[Mapping[str, Any]]) -> RunEvents:
    """Events already decoded from JSON (hand-written ones: tests, tools), parsed as lines are."""
    return _validated(objects, _EVENT.validate_python)


def _validated(items: Iterable[Any], validate: Callable[[Any], Event]) -> RunEvents:
    """Each item validated as an event; the invalid ones counted, not raised."""
    events: list[Event] = []
    unreadable = 0
    for item in items:
        try:
            events.append(validate(item))
        except ValidationError:
            unreadable += 1
    return RunEvents(tuple(events), unreadable)


def read_events(run_dir: str | Path) -> RunEvents:
    """The run directory's events, typed; empty when events.jsonl is missing."""
    path = Path(run_dir) / EVENTS
    if not path.is_file():
        return RunEvents()
    return parse_events(path.read_text(encoding="utf-8", errors="replace").splitlines())


def load_events(run_dir: str | Path) -> list[dict[str, Any]]:
    """The events of a run dir in file order as plain objects; [] when missing; skips torn or
    non-object lines (for tests and tools that look at the raw file)."""
    path = Path(run_dir) / EVENTS
    if not path.is_file():
        return []
    events: list[dict[str, Any]] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


def now_us() -> int:
    """Wall-clock time as int64 epoch microseconds."""
    return time.time_ns() // 1000


class EventLog:
    """events.jsonl: one JSON object a line, each flushed as it is written (thread-safe)."""

    def __init__(self, path: Path):
        self.path = path
        self._file = path.open("a", buffering=1)
        self._lock = threading.Lock()

    def write(self, event: Event) -> Event:
        """Append `event` (stamped now unless it has a ts_us) as one line; return it as written.

        Only the fields the writer set are written, `ts_us` and `type` first."""
        if event.ts_us is None:
            event = event.model_copy(update={"ts_us": now_us()})
        fields = event.model_dump(mode="json", by_alias=True, exclude_unset=True)
        fields.pop("ts_us", None)
        fields.pop("type", None)
        line = json.dumps({"ts_us": event.ts_us, "type": str(event.type), **fields}, default=str)
        with self._lock:
            if not self._file.closed:
                self._file.write(line + "\n")
        return event

    def close(self) -> None:
        with self._lock:
            self._file.close()
