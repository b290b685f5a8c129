"""The rules across an experiment's sections, checked on every resolved matrix cell.

Each rule yields (field path, problem) pairs; `rule_problems` collects them so that one
error names every problem of a file at once.
"""

from __future__ import annotations

from collections.abc import Iterator

from harness.chaos.faults import FAULT_TYPES, HelperSite, is_consumer_target
from harness.experiment import quorum
from harness.experiment.client_rules import client_problems
from harness.experiment.fields import (
    BOUND_TARGET,
    CONSUMER_TARGET,
    COORDINATOR_TARGETS,
    HEAL,
    NODE_TARGET,
    PARTITION_TARGETS,
    ZOOKEEPER_TARGET,
)
from harness.experiment.model import Experiment, FaultGenerator, FaultStep, workload_duration_s
from harness.experiment.problems import Problem
from harness.experiment.soak import duty_problems, repeat_problems
from harness.experiment.transaction_rules import transaction_problems
from harness.limits import MAX_DURATION_S, WHY_DURATION, shown
from harness.platform.versions import Feature, Mode, mode_refusal, version_refusal
from harness.rundir.release import KafkaVersion

__all__ = ["rule_problems"]


def _kafka_rules(spec: Experiment) -> Iterator[Problem]:
    kafka = spec.kafka
    if not (kafka.version or kafka.image):
        yield "kafka.version", "set kafka.version (built locally) or kafka.image (prebuilt)"
    if kafka.zookeeper_nodes != 1 and kafka.effective_mode() not in (Mode.ZOOKEEPER, None):
        reason = f"applies to kafka.mode zookeeper only (this cell runs {kafka.effective_mode()})"
        yield "kafka.zookeeper_nodes", reason
    if kafka.quorum == "dynamic":
        yield from quorum.dynamic_quorum_problems(spec)
    yield from quorum.controller_config_problems(spec)
    if not kafka.version:
        return  # a prebuilt image of an unknown version: nothing to check it against
    version = KafkaVersion.parse(kafka.version)
    if refusal := version_refusal(version):
        yield "kafka.version", refusal
        return
    mode = kafka.effective_mode()
    if mode is not None and (refusal := mode_refusal(version, mode)):
        yield "kafka.mode", refusal
    if spec.producer.enable_idempotence and (lacking := kafka.lacks(Feature.IDEMPOTENCE)):
        yield "producer.enable_idempotence", f"{lacking} Fix: set it false for this version."
    elr_keys = [key for key in kafka.broker_config if "eligible.leader.replicas" in str(key)]
    if elr_keys and (lacking := kafka.lacks(Feature.ELR)):
        yield f"kafka.broker_config.{elr_keys[0]}", f"{lacking} Fix: remove it for this version."


def _topic_rules(spec: Experiment) -> Iterator[Problem]:
    topic, brokers = spec.topic, spec.kafka.brokers
    if topic.replication_factor > brokers:
        reason = (
            f"{shown(topic.replication_factor)} replicas need as many brokers but kafka.brokers "
            f"is {brokers}; lower topic.replication_factor or raise kafka.brokers"
        )
        yield "topic.replication_factor", reason
    if topic.min_insync_replicas > topic.replication_factor:
        reason = (
            f"{shown(topic.min_insync_replicas)} is more than topic.replication_factor "
            f"({shown(topic.replication_factor)}), so every acks=all write would be refused; "
            f"use 1..{shown(topic.replication_factor)}"
        )
        yield "topic.min_insync_replicas", reason


def _producer_rules(spec: Experiment) -> Iterator[Problem]:
    producer = spec.producer
    if producer.enable_idempotence and producer.acks != "all":
        reason = (
            f'enable_idempotence requires producer.acks: all (got "{producer.acks}"); '
            "set producer.acks: all or producer.enable_idempotence: false"
        )
        yield "producer.enable_idempotence", reason
    if producer.enable_idempotence and producer.max_in_flight > 5:
        reason = (
            f"enable_idempotence allows at most 5 requests in flight (got "
            f"{producer.max_in_flight}); set producer.max_in_flight to 1..5"
        )
        yield "producer.max_in_flight", reason
    if producer.enable_idempotence and producer.retries == 0:
        reason = (
            "enable_idempotence requires retries > 0; set producer.retries: null "
            "(librdkafka default) or a positive number"
        )
        yield "producer.retries", reason
    if 0 < producer.message_timeout_ms <= producer.linger_ms:
        # librdkafka refuses this combination when the producer is created.
        reason = (
            f"must be greater than producer.linger_ms ({producer.linger_ms}), or 0 for no limit"
        )
        yield "producer.message_timeout_ms", reason


def _workload_rules(spec: Experiment) -> Iterator[Problem]:
    workload = spec.workload
    if (workload.duration_s is None) == (workload.count is None):
        reason = "set exactly one of workload.duration_s and workload.count (the other to null)"
        yield "workload.duration_s", reason
    if workload.count is not None and workload.count < workload.producers:
        reason = (
            f"workload.count ({workload.count}) is below workload.producers "
            f"({workload.producers}); count is the total over all producers, so give each "
            "at least one message or use fewer producers"
        )
        yield "workload.count", reason
    if workload.neighbours is not None and not workload.consumers:
        reason = (
            "workload.neighbours share the consumer group's coordinator, and there is no "
            "group: set workload.consumers (1 or more) or drop workload.neighbours"
        )
        yield "workload.neighbours", reason
    horizon = workload_duration_s(workload)
    if workload.duration_s is None and horizon is not None and horizon > MAX_DURATION_S:
        reason = (
            f"workload.count / workload.rate makes the workload last {horizon:,.0f} s; it must "
            f"last at most {MAX_DURATION_S:,} s: {WHY_DURATION}"
        )
        yield "workload.count", reason


def _target_rules(
    spec: Experiment, target: str, partition: int | str, where: str
) -> Iterator[Problem]:
    """Check a target against the cluster and topic; `where` is the step's or generator's path."""
    transactions = spec.workload.transactions
    if target == "group-coordinator" and spec.workload.consumers:
        pass  # the coordinator of the workload's consumer group
    elif target in COORDINATOR_TARGETS and transactions is None:
        reason = f"{shown(target)} needs workload.transactions (the coordinator of its ids)"
        yield f"{where}.target", reason
    elif target == "group-coordinator" and transactions and not transactions.send_offsets:
        reason = (
            "group-coordinator needs workload.transactions.send_offsets: true or workload.consumers"
        )
        yield f"{where}.target", reason
    brokers, partitions = spec.kafka.brokers, spec.topic.partitions
    mode = spec.kafka.effective_mode()
    zookeeper = ZOOKEEPER_TARGET.match(target)
    if (zookeeper or target == "zookeeper") and mode not in (Mode.ZOOKEEPER, None):
        reason = f"{shown(target)} needs kafka.mode zookeeper (this cell runs {mode})"
        yield f"{where}.target", reason
    elif zookeeper and int(zookeeper.group(1)) > spec.kafka.zookeeper_nodes:
        count = spec.kafka.zookeeper_nodes
        reason = f"{shown(target)} does not exist: kafka.zookeeper_nodes is {count}"
        yield f"{where}.target", reason
    if target in ("controllers", "controller-follower") and mode is Mode.ZOOKEEPER:
        reason = "zookeeper mode has one elected controller: target `controller` or `zookeeper`"
        yield f"{where}.target", reason
    node = NODE_TARGET.match(target)
    if node and int(node.group(1)) > brokers:
        reason = (
            f"{shown(target)} does not exist: kafka.brokers is {brokers}; "
            f"use node:1..node:{brokers}"
        )
        yield f"{where}.target", reason
    if target in PARTITION_TARGETS and isinstance(partition, int) and partition >= partitions:
        reason = (
            f"partition {partition} does not exist: topic.partitions is {partitions}; "
            f"use 0..{partitions - 1}"
        )
        yield f"{where}.partition", reason
    if target in PARTITION_TARGETS[1:] and spec.topic.replication_factor < 2:
        reason = f"{shown(target)} needs topic.replication_factor >= 2; target the leader or a node"
        yield f"{where}.target", reason


def _consumer_target_rules(
    spec: Experiment, faults: list[str], targets: list[str], fault_at: str, target_at: str
) -> Iterator[Problem]:
    """Consumer faults target group members, every other fault targets nodes; a member must
    exist. `fault_at` and `target_at` are the fields' paths."""
    on_members = [f for f in faults if f in FAULT_TYPES and FAULT_TYPES[f].acts_on_consumers]
    on_nodes = [f for f in faults if f in FAULT_TYPES and not FAULT_TYPES[f].acts_on_consumers]
    members = [t for t in targets if is_consumer_target(t)]
    if on_members and spec.workload.consumers == 0:
        reason = (
            f"{on_members[0]} acts on the consumer group, but workload.consumers is 0; "
            "set workload.consumers to the size of the group"
        )
        yield fault_at, reason
    if on_members and len(members) < len(targets):
        node = next(t for t in targets if not is_consumer_target(t))
        reason = (
            f"{on_members[0]} acts on consumer group members: target `consumer` or "
            f"consumer-<i>, not {shown(node)}"
        )
        yield target_at, reason
    if on_nodes and members:
        reason = (
            f"{shown(members[0])} is a consumer group member, which only the consumer faults "
            f"({', '.join(n for n, f in FAULT_TYPES.items() if f.acts_on_consumers)}) act on; "
            f"{on_nodes[0]} acts on brokers"
        )
        yield target_at, reason
    for target in members:
        match = CONSUMER_TARGET.match(target)
        if match and int(match.group(1)) >= spec.workload.consumers:
            reason = (
                f"{shown(target)} does not exist: workload.consumers is "
                f"{spec.workload.consumers}; use consumer-0..consumer-"
                f"{max(spec.workload.consumers - 1, 0)} or `consumer`"
            )
            yield target_at, reason


def _disk_target_rules(faults: list[str], targets: list[str], target_at: str) -> Iterator[Problem]:
    """The disk faults act through the disk layer under Kafka nodes' log directories, which
    ZooKeeper servers do not get."""
    on_disk = [
        f
        for f in faults
        if f in FAULT_TYPES and FAULT_TYPES[f].helper_site is HelperSite.FUSE_MOUNT
    ]
    for target in targets:
        if on_disk and (target == "zookeeper" or ZOOKEEPER_TARGET.match(target)):
            reason = (
                f"{on_disk[0]} acts on a Kafka node's log directory; ZooKeeper servers have no "
                f"disk layer: target a broker or a KRaft controller, not {shown(target)}"
            )
            yield target_at, reason


def _fault_target_rules(
    spec: Experiment, faults: list[str], targets: list[str], fault_at: str, target_at: str
) -> Iterator[Problem]:
    """What the faults' kinds ask of their targets, for a step or the generator; `fault_at`
    and `target_at` are the paths of their fault(s) and target(s)."""
    yield from _consumer_target_rules(spec, faults, targets, fault_at, target_at)
    yield from _disk_target_rules(faults, targets, target_at)
    yield from quorum.quorum_fault_problems(spec, faults, targets, fault_at, target_at)
    if "reassign" in faults and (lacking := spec.kafka.lacks(Feature.REASSIGNMENT_API)):
        yield fault_at, f"reassign: {lacking} Fix: Kafka 2.4 or later, or another fault."


def _step_rules(spec: Experiment, index: int, step: FaultStep) -> Iterator[Problem]:
    where = f"faults.schedule[{index}]"
    if not step.heals:
        yield from _fault_target_rules(
            spec, [step.fault], [step.target], f"{where}.fault", f"{where}.target"
        )
    yield from _target_rules(spec, step.target, step.partition, where)
    if not step.heals:
        fault = FAULT_TYPES[step.fault]
        for field, reason in fault.cluster_problems(step.params, spec.kafka.brokers):
            yield f"{where}.{field}", reason
    yield from _condition_partition_rules(spec, step, where)
    horizon = workload_duration_s(spec.workload)
    bound = "workload.duration_s" if spec.workload.duration_s else "workload.count / rate"
    ends = "workload ends"
    if horizon is not None and (after := spec.faults.after_workload_s):
        horizon, ends = horizon + after, "schedule ends"
        bound += " + faults.after_workload_s"
    if horizon is not None and step.end_s is not None and step.end_s >= horizon:
        reason = (
            f"step {index} ends at {step.end_s:g} s (at_s + duration_s), not before the "
            f"{ends} at {horizon:g} s ({bound}); start it earlier, "
            "shorten it, or lengthen the workload"
        )
        yield where, reason
    elif horizon is not None and step.at_s is not None and step.at_s >= horizon:
        reason = f"step {index} starts at {step.at_s:g} s, after the {ends} at {horizon:g} s"
        yield f"{where}.at_s", f"{reason} ({bound}); start it earlier or lengthen the workload"


def _condition_partition_rules(spec: Experiment, step: FaultStep, where: str) -> Iterator[Problem]:
    partitions = spec.topic.partitions
    condition = step.condition
    for partition in condition.partitions if condition else ():
        if partition >= partitions:
            reason = (
                f"the condition {shown(step.after)} reads partition {partition}, which does not "
                f"exist: topic.partitions is {partitions}; use 0..{partitions - 1}"
            )
            yield f"{where}.after", reason


def _sequence_rules(spec: Experiment) -> Iterator[Problem]:
    """What only the order of steps decides: start times, names bound before use, heals."""
    bound: dict[str, int] = {}  # name → the step that bound it
    open_faults: set[str] = set()  # names whose fault has no duration and is not healed yet
    last_at, held = 0.0, None  # held: (step, end) of the last step healed after duration_s
    for index, step in enumerate(spec.faults.schedule):
        where = f"faults.schedule[{index}]"
        # A repeated step's repetitions are placed by their start times (soak.py), not here.
        if step.at_s is not None and not step.repeats:
            if step.at_s < last_at:
                reason = (
                    f"starts at {step.at_s:g} s, before the previous step's {last_at:g} s; steps "
                    "run in file order: list them in the order they happen"
                )
                yield f"{where}.at_s", reason
            elif held is not None and step.at_s < held[1]:
                reason = (
                    f"starts at {step.at_s:g} s, while step {held[0]} is in force until "
                    f"{held[1]:g} s: a step with duration_s is healed before the next one "
                    f"starts, so this one would start late. For faults in force at once, bind "
                    f"step {held[0]} with `as: name`, leave out its duration_s and end it with "
                    'a later step {fault: heal, target: "@name"}'
                )
                yield f"{where}.at_s", reason
            last_at = max(last_at, step.at_s)
        if not step.heals and not step.repeats and step.end_s is not None:
            held = (index, step.end_s)
        elif not step.heals:
            held = None
        used = [step.bound_target] if step.bound_target else []
        used += [step.partition_binding] if step.partition_binding else []
        used += list(step.condition.names) if step.condition else []
        for name in used:
            if name not in bound:
                later = " (it is bound later)" if _binds_later(spec, index, name) else ""
                reason = (
                    f"@{name} is used before any earlier step binds it with `as: {name}`"
                    f"{later}; bind it on an earlier step"
                )
                yield where, reason
        if step.heals:
            yield from _heal_rules(step, where, open_faults, bound)
            continue
        if step.as_ is not None:
            if step.as_ in bound:
                reason = f"{step.as_!r} is already bound by step {bound[step.as_]}; use a new name"
                yield f"{where}.as", reason
            bound[step.as_] = index
            if step.duration_s is None:
                open_faults.add(step.as_)


def _binds_later(spec: Experiment, index: int, name: str) -> bool:
    return any(step.as_ == name for step in spec.faults.schedule[index + 1 :])


def _heal_rules(
    step: FaultStep, where: str, open_faults: set[str], bound: dict[str, int]
) -> Iterator[Problem]:
    name = step.bound_target
    if name is None:
        reason = (
            f"a heal step names the fault it ends as @name (got {shown(step.target)}); bind the "
            "fault's step with `as: name` and leave out its duration_s"
        )
        yield f"{where}.target", reason
    elif name in bound and name not in open_faults:
        reason = (
            f"heals @{name}, but no fault bound to it is still active (the step that bound it "
            "has a duration_s, or an earlier step already healed it): nothing to heal"
        )
        yield f"{where}.target", reason
    open_faults.discard(name or "")
    if step.duration_s is not None or step.as_ is not None:
        yield where, "a heal step takes no duration_s and no `as`; it ends at once"


def _mode_rules(plan: FaultGenerator, where: str) -> Iterator[Problem]:
    """What each mode needs and refuses: uniform draws from its lists, generic from families."""
    own = {
        "uniform": ("faults", "targets", "duration_s", "params"),
        "generic": ("families", "weights", "swarm", "overlap"),
    }
    if plan.mode == "uniform":
        for field in ("faults", "targets", "duration_s"):
            if not getattr(plan, field):
                yield f"{where}.{field}", "required (or mode: generic, which draws every family)"
    for field in own["generic" if plan.mode == "uniform" else "uniform"]:
        # Given: not its default (a dumped spec writes the defaults too).
        default = type(plan).model_fields[field].get_default(call_default_factory=True)
        if getattr(plan, field) != default:
            yield f"{where}.{field}", f"is not used by mode: {plan.mode}; remove it"
    if plan.mode == "generic":
        if plan.duty_cycle is not None:
            reason = "mode generic draws durations from the cell's timeouts: use mean_interval_s"
            yield f"{where}.duty_cycle", reason
        elif plan.mean_interval_s is None:
            yield f"{where}.mean_interval_s", "required: the mean gap in s between faults"
        if not any(plan.weights.get(f, 1) > 0 for f in plan.allowed_families):
            yield f"{where}.weights", "every allowed family weighs 0; give one a positive weight"


def _generator_rules(spec: Experiment, plan: FaultGenerator) -> Iterator[Problem]:
    where = "faults.generate"
    yield from _mode_rules(plan, where)
    if HEAL in plan.faults:
        yield f"{where}.faults", "heal ends a named fault; a generated schedule heals each itself"
    yield from _fault_target_rules(
        spec, list(plan.faults), list(plan.targets), f"{where}.faults", f"{where}.targets"
    )
    for target in dict.fromkeys(plan.targets):
        if BOUND_TARGET.match(target):
            yield f"{where}.targets", f"{target}: a generated schedule binds no names"
        yield from _target_rules(spec, target, plan.partition, where)
    horizon = workload_duration_s(spec.workload)
    if horizon is None:
        reason = (
            "a generated schedule needs a time bound: set workload.duration_s, or "
            "workload.rate together with workload.count"
        )
        yield where, reason
    if plan.mode == "uniform":
        yield from duty_problems(plan, horizon)
    if horizon is not None and plan.duration_s and plan.duration_s[0] >= horizon:
        reason = (
            f"the shortest fault ({plan.duration_s[0]:g} s) does not fit in the workload "
            f"({horizon:g} s); shorten the faults or lengthen the workload"
        )
        yield f"{where}.duration_s", reason


def _fault_rules(spec: Experiment) -> Iterator[Problem]:
    faults = spec.faults
    if faults.schedule and faults.generate is not None:
        reason = "give either faults.schedule (explicit steps) or faults.generate, not both"
        yield "faults.generate", reason
    for index, step in enumerate(faults.schedule):
        yield from _step_rules(spec, index, step)
    yield from _sequence_rules(spec)
    yield from repeat_problems(spec)
    if faults.generate is not None:
        yield from _generator_rules(spec, faults.generate)
    yield from _power_loss_rules(spec)


def _power_loss_rules(spec: Experiment) -> list[Problem]:
    """Where the power-loss model does not apply. It cuts logs at record-batch boundaries it
    reads: message format v2 only. It cuts what lies past a partition's last recovery-point
    checkpoint (written once a minute), which with an fsync per message was in fact on disk:
    it would lose fsynced writes that a real power loss keeps, and a cell held to "none" would
    read as a violation of Kafka's. Such a cell takes the disk layer's real one (lose-unsynced)."""
    whys = []
    if lacking := spec.kafka.lacks(Feature.RECORD_BATCH_V2):
        whys.append(
            f"{lacking} The power-loss model reads v2 record batches. Fix: use Kafka 0.11 or later."
        )
    if spec.fsyncs_each_message():
        whys.append(
            "the power-loss model cuts writes past the last recovery-point checkpoint, which "
            "flush.messages=1 (or log.flush.interval.messages=1) already fsynced; use the disk "
            "layer's lose-unsynced fault for a real power loss"
        )
    steps, generate = enumerate(spec.faults.schedule), spec.faults.generate
    paths = [f"faults.schedule[{i}].fault" for i, step in steps if step.fault == "power-loss"]
    if generate is not None and "power-loss" in generate.faults:
        paths.append("faults.generate.faults")
    return [(path, why) for why in whys for path in paths]


def rule_problems(spec: Experiment) -> list[Problem]:
    """Every rule that relates fields of different sections, on a resolved experiment."""
    rules = (
        _kafka_rules,
        _topic_rules,
        _producer_rules,
        _workload_rules,
        transaction_problems,
        client_problems,
        _fault_rules,
    )
    return [problem for rule in rules for problem in rule(spec)]
