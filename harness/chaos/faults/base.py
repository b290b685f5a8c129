"""The one interface every fault type implements, and what each type declares about itself.

A fault type is a `Fault` subclass that states, next to its inject and heal: the name an
experiment file gives it, its parameter model (defaults, bounds, cross-field checks), the
tools it needs in the broker image, the kinds of fault class it yields (what the guarantee
table keys on), and what the final heal must clear in every node. Everything else (validation,
fault classes, the nemesis' final heal, the guarantee table's kinds) reads those declarations.

This module and the fault modules import no Docker or Kafka client at load time: the analysis
reads the fault kinds on machines without either.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, model_serializer

from harness.limits import shown
from harness.rundir.events import FaultDetail, FaultEndDetail

if TYPE_CHECKING:
    from harness.platform.cluster import KafkaCluster
    from harness.platform.node import KafkaNode


class FaultError(RuntimeError):
    """A fault could not be injected or healed; the message names the node and the command."""


class FaultRefused(FaultError):
    """The fault cannot act on the cluster as it is now, and nothing was done (a replica set
    it would leave empty, no quorum node besides its target): a generated schedule skips it."""


class FaultParams(BaseModel):
    """The `params:` of one fault step: immutable, unknown keys refused, defaults filled in.

    Dumped for spec.json as the values actually used; an optional key nobody set (None) is
    left out, as it was never part of what the user wrote or the fault used.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_serializer(mode="wrap")
    def _used_values(self, handler: Any) -> dict[str, object]:
        data = handler(self)
        return {k: v for k, v in data.items() if v is not None or k in self.model_fields_set}


class NoParams(FaultParams):
    """The parameters of a fault type that takes none."""


P = TypeVar("P", bound=FaultParams)


@dataclass
class FaultContext:
    """What a fault needs to act: the cluster, the experiment topic and a seeded RNG."""

    cluster: KafkaCluster
    topic: str
    rng: random.Random = field(default_factory=random.Random)
    netem: bool | None = None  # detected once per cluster, never assumed
    # The workload's consumer group (harness.workload.consumer_group.group.ConsumerGroup), when
    # it has one: what the consumer faults act on.
    consumers: Any = None
    # The workload's ids whose coordinators the targets txn-coordinator / group-coordinator
    # name (None: the workload has none).
    transactional_id: str | None = None
    group_id: str | None = None


class HelperSite(StrEnum):
    """Where the commands that inject and heal a fault run: what an image or host must offer.

    A fault of a new kind picks its site once; the runner checks what that site needs before
    any write (today: the broker image's tools for BROKER_CONTAINER)."""

    DOCKER_ENGINE = "docker-engine"  # the engine's API: kill, stop, pause, copy files in and out
    BROKER_CONTAINER = "broker-container"  # commands inside the broker's container (its tools)
    SIDECAR = "sidecar"  # a helper container sharing the broker's network namespace
    FUSE_MOUNT = "fuse-mount"  # a file system layered under the broker's log directory
    CLIENT_PROCESS = "client-process"  # the workload's own processes (signals to consumers)
    ADMIN_CLIENT = "admin-client"  # the cluster's admin API, from a program beside the harness


class Fault(ABC, Generic[P]):
    """One injected fault on concrete nodes; `heal` undoes it and is safe to call twice."""

    name: ClassVar[str]  # as an experiment file spells it: `fault: kill`
    Params: ClassVar[type[FaultParams]] = NoParams
    helper_site: ClassVar[HelperSite] = HelperSite.DOCKER_ENGINE
    tools: ClassVar[tuple[str, ...]] = ()  # commands the helper site must have for this fault
    # The <kind> parts of the '<role>-<kind>' fault classes this type can yield; the first is
    # the one `class_kind` gives unless a subclass decides by its parameters.
    class_kinds: ClassVar[tuple[str, ...]]
    # Shell run in every node by the final heal, undoing what this type may leave behind
    # even when its own heal never ran (the harness was interrupted); "" when nothing.
    residue_cleanup: ClassVar[str] = ""
    # True for a fault on the consumer group's members (target `consumer` or `consumer-<i>`)
    # rather than on nodes.
    acts_on_consumers: ClassVar[bool] = False
    # True for a change of the KRaft quorum's membership, which a dynamic quorum alone allows
    # (kafka.quorum dynamic); it targets one dedicated controller.
    needs_dynamic_quorum: ClassVar[bool] = False
    # True for a fault that only drops, holds or shapes packets with rules of its own in the
    # node's network namespace (iptables, tc, a shaper), leaving every other fault's in force.
    on_packets: ClassVar[bool] = False
    # True for one of those acting through a shaper of its own (shape.py), whose packets go
    # through the node's other rules when it lets them go.
    shaped: ClassVar[bool] = False

    def __init__(
        self,
        ctx: FaultContext,
        nodes: list[KafkaNode],
        params: P | None = None,
        partition: int = 0,
    ):
        self.ctx = ctx
        self.nodes = nodes
        self.partition = partition  # the step's partition of the topic (its `partition:`)
        if params is not None and not isinstance(params, self.Params):
            raise TypeError(f"fault {self.name} takes {self.Params.__name__}, not {params!r}")
        # Without params (tests, tools): the type's defaults, as an experiment file gets them.
        self.params: P = self.Params() if params is None else params  # type: ignore[assignment]

    @classmethod
    def prepare(cls, settings: Any) -> None:
        """Build what this type needs before any cluster starts (nothing by default); raise
        an error naming the fix when it cannot be built here."""

    @classmethod
    def parse_params(cls, raw: Any) -> FaultParams:
        """`raw` (the step's `params:` mapping) as this type's model; ValueError saying why not."""
        if raw is None:
            raw = {}
        if isinstance(raw, FaultParams):
            raw = raw.model_dump()
        if not isinstance(raw, dict):
            raise ValueError(f"params must be a mapping of names to values (got {shown(raw)})")
        try:
            return cls.Params.model_validate(raw)
        except ValidationError as exc:
            raise ValueError("; ".join(_param_problem(cls, e) for e in exc.errors())) from None

    @classmethod
    def class_kind(cls, params: FaultParams) -> str:
        """The <kind> of the fault class a step of this type with `params` belongs to."""
        return cls.class_kinds[0]

    def acted_as(self, detail: FaultDetail) -> dict[str, str]:
        """What fault_start records otherwise than the step foretold, from the injection's
        `detail` (a stop that turned into a kill: its class_kind); {} when nothing."""
        return {}

    @classmethod
    def hits_whole_cluster(cls, params: FaultParams) -> bool:
        """True when a step with `params` acts on every broker, whatever its target says."""
        return False

    @classmethod
    def cluster_problems(cls, params: FaultParams, brokers: int) -> Iterator[tuple[str, str]]:
        """What `params` get wrong about a cluster of `brokers` nodes: (params.<field>, why)."""
        return iter(())

    @abstractmethod
    def inject(self) -> FaultDetail:
        """Start the fault; return details worth recording in events.jsonl (the fault_start's
        `detail`: each type declares its own FaultDetail beside it)."""

    @abstractmethod
    def heal(self) -> None:
        """End the fault."""

    def detail(self) -> FaultEndDetail:
        """After heal: what the fault ended up doing, worth recording (the fault_end's
        `detail`; empty by default)."""
        return {}


class AdminFault(Fault[P]):
    """A fault made through the cluster's admin API, by the admin program beside the harness."""

    helper_site = HelperSite.ADMIN_CLIENT

    @classmethod
    def prepare(cls, settings: Any) -> None:
        """The admin program, built before any cluster starts."""
        from harness.platform.admin import admin_classpath

        admin_classpath(settings)


def _param_problem(fault: type[Fault], error: Any) -> str:
    """One pydantic error of a params model as a clause naming the param and its meaning."""
    loc = [str(part) for part in error["loc"]]
    # By the names a user writes: a field's alias where it has one (`from`).
    fields = {info.alias or name: info for name, info in fault.Params.model_fields.items()}
    if error["type"] == "extra_forbidden":
        takes = f"it takes {', '.join(fields)}" if fields else "it takes no params"
        return f"unknown param {shown(loc[-1])} for fault {fault.name}; {takes}"
    message = error["msg"].removeprefix("Value error, ")
    if not loc:  # a rule across params states its own fix
        return message
    if error["type"] != "value_error":
        message = f"{message} (got {shown(error['input'])})"
    path = "params." + loc[0] + "".join(f"[{part}]" for part in loc[1:])
    meaning = fields[loc[0]].description if loc[0] in fields else None
    return f"{path} ({meaning}): {message}" if meaning else f"{path}: {message}"


def share_node(held: type[Fault[Any]], coming: type[Fault[Any]]) -> bool:
    """Whether a fault of type `coming` may act on a node that a fault of type `held` holds
    (a disjoint schedule): both only act on packets and one of them through its own shaper.
    Its rules pass what it lets go through the other's, and neither restarts the node or its
    namespace. Two cuts, or two tc shapes, stay apart (a cascade's cuts walk other replicas)."""
    return held.on_packets and coming.on_packets and (held.shaped or coming.shaped)


def run_in(node: KafkaNode, argv: list[str]) -> str:
    """Run `argv` in `node`'s network namespace with the harness's network tools (see
    KafkaNode.net_exec); raise FaultError with its output when it fails."""
    code, out = node.net_exec(argv)
    if code != 0:
        raise FaultError(f"kafka-{node.node_id}: `{' '.join(argv)}` exited {code}: {out.strip()}")
    return out


def start_stopped(nodes: list[KafkaNode]) -> None:
    """Start each of `nodes` that is not running (the heal of every fault that stops one)."""
    for node in nodes:
        if node.state() != "running":
            node.start()


def check_tools(node: KafkaNode, faults: list[type[Fault]], image: str) -> None:
    """Raise FaultError naming what is missing when `node` lacks a tool that the faults run in
    the broker container need."""
    in_broker = [f for f in faults if f.helper_site == HelperSite.BROKER_CONTAINER]
    needed = sorted({tool for fault in in_broker for tool in fault.tools})
    if not needed:
        return
    code, _ = node.net_exec(["sh", "-c", " && ".join(f"command -v {tool}" for tool in needed)])
    if code != 0:
        kinds = ", ".join(sorted({fault.name for fault in in_broker if fault.tools}))
        raise FaultError(
            f"image {image} lacks {' or '.join(needed)}, which the {kinds} faults of this "
            "experiment run inside the broker container; use the locally built image "
            "(drop --image / kafka.image) or an image that has them"
        )
