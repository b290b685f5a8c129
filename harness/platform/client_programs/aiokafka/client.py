"""kafka-chaos's client program on aiokafka: the harness's producer and consumer-group member
roles (the client-program contract, the Java programs in harness/platform/java_programs being
its reference), one JSON object a line on stdout.

    client.py produce <the Java recorder's arguments>
    client.py consume <the Java member's arguments>

Standalone: it runs in a virtualenv that holds aiokafka and nothing of the harness, beside
contract.py (client_programs/python_contract), the contract's plumbing both Python programs
share; what is here is aiokafka's.

aiokafka is asyncio-based: every send is awaited into the client's accumulator and its outcome
arrives on the future send() returns. The client has no `retries`, no `delivery.timeout.ms`
and no `max.in.flight.requests.per.connection` (it keeps one produce request per broker in
flight, retries a retriable error until the batch's `request.timeout.ms` has passed, and an
idempotent batch never expires); those keys are reported on stderr and the effective config
says what the client does instead. Its transactional calls have no timeout of their own: the
program waits for each at most `max.block.ms` (60000 ms unless the producer.config says
otherwise, as the Java client), which is what a timeout is here. A commit that timed out is
still pending in the client: retrying waits for that same commit again, and an abort is then
refused by the client (its state machine allows none while committing), which the contract
answers with a new producer.

The consume role is in member.py, the library's error and version helpers both roles use in
library.py (both copied beside this file at build time).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import signal
import sys
import time
from collections.abc import Callable

import aiokafka
import contract
from aiokafka import AIOKafkaProducer
from aiokafka import errors as kafka_errors
from aiokafka.partitioner import DefaultPartitioner
from aiokafka.structs import OffsetAndMetadata, TopicPartition
from contract import note
from library import FATAL_ERRORS, TimedOut, describe, error_code, error_name
from member import Member


def _compression(value: str) -> str | None:
    """compression.type as aiokafka takes it (None: no compression)."""
    return None if value == "none" else value


# Java producer setting -> (aiokafka keyword, converter)
PRODUCER_KEYS: dict[str, tuple[str, Callable[[str], object]]] = {
    "linger.ms": ("linger_ms", int),
    "request.timeout.ms": ("request_timeout_ms", int),
    "retry.backoff.ms": ("retry_backoff_ms", int),
    "batch.size": ("max_batch_size", int),
    "max.request.size": ("max_request_size", int),
    "metadata.max.age.ms": ("metadata_max_age_ms", int),
    "connections.max.idle.ms": ("connections_max_idle_ms", int),
    "client.id": ("client_id", str),
    "transactional.id": ("transactional_id", str),
    "transaction.timeout.ms": ("transaction_timeout_ms", int),
    "compression.type": ("compression_type", _compression),
}
# Java settings aiokafka has no equivalent for, and what it does instead.
NO_EQUIVALENT = {
    "retries": "aiokafka has no retry count: it retries a retriable error until the batch's "
    "request.timeout.ms passed (an idempotent batch: forever)",
    "delivery.timeout.ms": "aiokafka has no delivery timeout: a batch expires after "
    "request.timeout.ms (never when idempotent)",
    "max.in.flight.requests.per.connection": "aiokafka keeps one produce request per broker "
    "in flight",
    "key.serializer": "the program sends bytes",
    "value.serializer": "the program sends bytes",
    "partitioner.class": "aiokafka's default partitioner (murmur2, as Java's) is used",
}
# ---------------------------------------------------------------------------------------------
# produce


def producer_settings(props: dict[str, str]) -> tuple[dict, dict[str, str], int]:
    """aiokafka keywords from the Java settings; the Java-named settings it passes on; the
    program's own max.block.ms. Exits 2 when acks or idempotence cannot be honoured."""
    kwargs: dict = {}
    passed: dict[str, str] = {}
    max_block_ms = contract.DEFAULT_MAX_BLOCK_MS
    for key, value in props.items():
        value = value.strip()
        if key == "acks":
            if value in ("all", "-1"):
                kwargs["acks"] = "all"
            elif value in ("0", "1"):
                kwargs["acks"] = int(value)
            else:
                fail_config(f"acks={value} is not a value aiokafka takes")
            passed[key] = value
        elif key == "enable.idempotence":
            if value.lower() not in ("true", "false"):
                fail_config(f"enable.idempotence={value} is not a boolean")
            kwargs["enable_idempotence"] = value.lower() == "true"
            passed[key] = value
        elif key == "max.block.ms":
            max_block_ms = int(value)
            passed[key] = value
            note("max.block.ms: aiokafka has none; the program waits this long for each "
                 "transactional call and producer start")  # fmt: skip
        elif key in PRODUCER_KEYS:
            name, convert = PRODUCER_KEYS[key]
            kwargs[name] = convert(value)
            passed[key] = value
        elif key in NO_EQUIVALENT:
            note(f"{key}={value}: not applied ({NO_EQUIVALENT[key]})")
        else:
            note(f"{key}={value}: aiokafka has no such setting; not applied")
    if kwargs.get("transactional_id") is not None and kwargs.get("enable_idempotence") is False:
        fail_config("transactional.id with enable.idempotence=false: aiokafka makes every "
                    "transactional producer idempotent")  # fmt: skip
    return kwargs, passed, max_block_ms


def fail_config(message: str) -> None:
    contract.fail(message, told=f"producer.config cannot be honoured: {message}")


def effective_producer_config(producer: AIOKafkaProducer, kwargs: dict, max_block_ms: int):
    """The settings the producer runs with, Java-named: the constructor's defaults with the
    given keywords over them, and what the client resolved (acks, idempotence)."""
    defaults = {
        name: p.default
        for name, p in inspect.signature(AIOKafkaProducer.__init__).parameters.items()
        if p.default is not inspect.Parameter.empty
    }
    resolved = {**defaults, **kwargs}
    sender = getattr(producer, "_sender", None)
    acks = getattr(sender, "_acks", None)
    txn_manager = getattr(producer, "_txn_manager", "?")
    idempotent = None if txn_manager == "?" else txn_manager is not None
    if acks is None:  # the client's rules, where its sender cannot tell
        acks = resolved.get("acks")
        if not isinstance(acks, (int, str)):
            acks = "all" if idempotent else 1
    acks_text = "all" if acks in (-1, "all") else str(acks)
    config = {"acks": acks_text, "enable.idempotence": str(bool(idempotent)).lower()}
    for java, (name, _) in PRODUCER_KEYS.items():
        if resolved.get(name) is not None:
            config[java] = str(resolved[name])
    config["max.in.flight.requests.per.connection"] = "1"  # one produce request per broker
    config["delivery.timeout.ms"] = "none (batches expire after request.timeout.ms" + (
        "; never when idempotent)" if idempotent else ")"
    )
    config["retries"] = "until the batch expires"
    config["max.block.ms"] = str(max_block_ms)
    config["partitioner"] = "murmur2 (aiokafka DefaultPartitioner)"
    config["client.version"] = f"aiokafka {aiokafka.__version__}"
    return config, idempotent


class Producing(contract.Sends):
    """The produce role on aiokafka: plain sends or transactions, every send's outcome
    reported once (its future's callback, or abandoned with its producer)."""

    stopped: asyncio.Event  # the flag SIGTERM raises

    def __init__(self, args: dict[str, str]):
        super().__init__(args)
        self.kwargs, self.passed, self.max_block_ms = producer_settings(self.props)
        self.stopped = asyncio.Event()
        # future -> (head, sent_ns, the partition when the program knows it)
        self.pending: dict[asyncio.Future, tuple[str, int, int | None]] = {}
        self.producer: AIOKafkaProducer | None = None

    def play(self) -> None:
        asyncio.run(self.run())

    # -- the client --------------------------------------------------------------------------

    def new_producer(self) -> AIOKafkaProducer:
        return AIOKafkaProducer(bootstrap_servers=self.bootstrap, **self.kwargs)

    async def start_producer(self, producer: AIOKafkaProducer) -> None:
        """start() (bootstrap and, when idempotent, InitProducerId), each attempt waited for at
        most max.block.ms, retried after a timeout as initTransactions is."""
        task = asyncio.ensure_future(producer.start())
        stop = asyncio.ensure_future(self.stopped.wait())  # SIGTERM ends the wait
        try:
            for attempt in range(1, contract.INIT_ATTEMPTS + 1):
                await asyncio.wait(
                    {task, stop}, timeout=self.max_block_ms / 1000,
                    return_when=asyncio.FIRST_COMPLETED,
                )  # fmt: skip
                if task.done():
                    task.result()
                    return
                if attempt >= contract.INIT_ATTEMPTS or self.stopped.is_set():
                    task.cancel()
                    raise TimedOut(
                        f"the producer did not start ({attempt} x max.block.ms, or stopped)"
                    )
                note("the producer's start timed out, waiting again")
        finally:
            stop.cancel()

    async def close_producer(self, producer: AIOKafkaProducer, seconds: float) -> None:
        try:
            await asyncio.wait_for(producer.stop(), timeout=seconds)
        except Exception as exc:  # a timeout, or the error that killed its sender
            note(f"closing the producer: {describe(exc)}")

    def producer_dead(self, producer: AIOKafkaProducer) -> BaseException | None:
        """The error that ended the producer's sender task (it sends nothing more), or None."""
        task = getattr(getattr(producer, "_sender", None), "sender_task", None)
        if task is None or not task.done():
            return None
        if task.cancelled():
            return kafka_errors.ProducerClosed("the producer's sender was stopped")
        return task.exception() or kafka_errors.ProducerClosed("the producer's sender ended")

    # -- sends -------------------------------------------------------------------------------

    async def send_one(self, producer: AIOKafkaProducer, i: int, partition: int | None):
        """Hand message i to the client; its outcome comes on its future. Returns the
        exception of a send refused before it entered the client (reported at once)."""
        key, value, head = self.message(i)
        sent_ns = time.monotonic_ns()
        dead = self.producer_dead(producer)
        if dead is not None:
            self.report_error(head, sent_ns, dead)
            return dead
        try:
            future = await producer.send(self.topic, value, key=key, partition=partition)
        except Exception as exc:
            self.report_error(head, sent_ns, exc)
            return exc
        if partition is None and self.kwargs.get("acks") == 0:
            # acks=0: the future's result is None, so the partition is worked out as the
            # client's default partitioner did (murmur2 of the key over all partitions).
            partitions = sorted(await producer.partitions_for(self.topic))
            partition = DefaultPartitioner()(key, partitions, partitions)
        self.pending[future] = (head, sent_ns, partition)
        future.add_done_callback(self.reported)
        return None

    def reported(self, future: asyncio.Future) -> None:
        sent = self.pending.pop(future, None)
        if sent is None:
            return
        head, sent_ns, partition = sent
        if future.cancelled():
            self.report_error(head, sent_ns, asyncio.CancelledError("the send was cancelled"))
            return
        exc = future.exception()
        if exc is not None:
            self.report_error(head, sent_ns, exc)
            return
        metadata = future.result()
        if metadata is None:  # acks=0: no partition or offset from the broker
            offset = -1
        else:
            partition = metadata.partition
            offset = metadata.offset if metadata.offset is not None and metadata.offset >= 0 else -1
        self.succeeded(head, sent_ns, partition, offset)

    def report_error(self, head: str, sent_ns: int, exc: BaseException) -> None:
        self.failed(head, sent_ns, error_name(exc), str(exc), error_code(exc))

    def abandon(self, why: str) -> None:
        """Report every send still without an outcome as indeterminate: its producer was
        replaced (after a fatal error or a timeout) and will report nothing more."""
        for future, (head, sent_ns, _) in list(self.pending.items()):
            self.pending.pop(future, None)
            self.report_error(head, sent_ns, kafka_errors.ProducerClosed(why))

    async def pace(self, i: int) -> bool:
        """Wait (at most 50 ms) for message i's due time; True when it is due."""
        ahead = self.ahead(i)
        if ahead <= 0:
            return True
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stopped.wait(), timeout=min(ahead, 0.05))
        return False

    # -- the run -----------------------------------------------------------------------------

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, self.stopped.set)
        if self.transactional and not self.kwargs.get("transactional_id"):
            fail_config("--transaction-size needs transactional.id in producer.config")
        try:
            self.producer = self.new_producer()
        except ValueError as exc:  # aiokafka refuses the combination (acks with idempotence)
            fail_config(str(exc))
        await self.start_producer(self.producer)
        config, idempotent = effective_producer_config(
            self.producer, self.kwargs, self.max_block_ms
        )
        self.started(config, idempotent)
        if self.transactional:
            sent = await Transactions(self).run()
        else:
            sent = await self.send_all()
        if self.pending:
            await asyncio.wait(set(self.pending), timeout=self.close_s)
        if self.producer is not None:
            await self.close_producer(self.producer, 5.0)
        if self.pending:
            note(f"{len(self.pending)} send(s) without an outcome after --close-s")
        self.finished(sent)

    async def send_all(self) -> int:
        i = 0
        assert self.producer is not None
        while self.more(i):
            if not await self.pace(i):
                continue
            if await self.send_one(self.producer, i, None) is not None:
                # a refusal that lasts must not spin
                await asyncio.sleep(contract.REFUSED_BACKOFF_S)
            i += 1
            self.progress(i)
        return i


class Transactions(contract.Plan):
    """The sends in transactions as TransactionalSends.java runs them (its outcome rules)."""

    def __init__(self, recorder: Producing):
        super().__init__(recorder)
        self.r = recorder
        self.group = self.group_id

    async def intent(self) -> str | None:
        line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        return line.strip() if line else None

    async def run(self) -> int:
        r = self.r
        i = 0
        txn = 0
        while r.more(i):
            intent = await self.intent()
            if intent is None:
                note("the harness's plan ended: no more transactions")
                break
            i = await self.transaction(txn, i, self.count(r, i), intent)
            txn += 1
            if self.fatal and (r.stopped.is_set() or not await self.replace()):
                break
        return i

    async def transaction(self, txn: int, first: int, count: int, intent: str) -> int:
        r = self.r
        producer = r.producer
        assert producer is not None
        begin_us = self.beginning()
        try:
            await self.timed(asyncio.ensure_future(producer.begin_transaction()))
        except Exception as exc:  # nothing sent in it: no line; the producer is replaced
            note(f"begin_transaction failed: {describe(exc)}")
            self.fatal = True
            return first
        i, refused = first, None
        while i < first + count and not r.stopped.is_set():
            if not await r.pace(i):
                continue
            refused = await r.send_one(producer, i, i % self.partitions)
            i += 1
            r.progress(i)
            if refused is not None:  # the rest is not sent, and the transaction is aborted
                break
        errors = [f"send: {describe(refused)}"] if refused is not None else []
        outcome = await self.end(producer, txn, intent, refused is not None, errors)
        contract.transaction_end(r, txn, first, i, intent, outcome, errors, begin_us)
        if refused is not None and not self.fatal:
            await asyncio.sleep(contract.REFUSED_BACKOFF_S)
        return i

    async def timed(self, task: asyncio.Future) -> None:
        """Wait for `task` at most max.block.ms (it goes on when that passes); its result."""
        done, _ = await asyncio.wait({task}, timeout=self.r.max_block_ms / 1000)
        if not done:
            raise TimedOut(f"no answer in max.block.ms ({self.r.max_block_ms} ms)")
        task.result()

    async def end(
        self, producer: AIOKafkaProducer, txn: int, intent: str, must_abort: bool, errors: list
    ) -> str:
        """Commit or abort as `intent` says (abort whatever it says when `must_abort`), each
        call a task awaited again on a retry: committed, aborted or unknown."""
        e = contract.Ending(self, intent, must_abort, self.group is None, errors)
        offer = commit_call = abort_call = None
        for _ in range(contract.END_ATTEMPTS):
            try:
                if e.commit:
                    if not e.offered:
                        if offer is None:
                            offsets = {
                                TopicPartition(self.r.topic, 0): OffsetAndMetadata(txn + 1, "")
                            }
                            offer = asyncio.ensure_future(
                                producer.send_offsets_to_transaction(offsets, self.group)
                            )
                        await self.timed(offer)
                        e.offered = True
                    e.committing = True
                    if commit_call is None:
                        commit_call = asyncio.ensure_future(producer.commit_transaction())
                    await self.timed(commit_call)
                    return "committed"
                if e.planned and abort_call is None:
                    # Deliver first, as the Java program does: an abort that never reached the
                    # log gives read_committed nothing to hide.
                    try:
                        await self.timed(asyncio.ensure_future(producer.flush()))
                    except TimedOut:
                        note("flush before a planned abort timed out; aborting")
                if abort_call is None:
                    abort_call = asyncio.ensure_future(producer.abort_transaction())
                await self.timed(abort_call)
                return e.aborted()
            except FATAL_ERRORS as exc:
                e.error(describe(exc))
                break
            except TimedOut as exc:
                e.error(describe(exc))
                if e.timed_out(self.r.stopped.is_set()):
                    break
            except kafka_errors.KafkaError as exc:
                e.error(describe(exc))
                if self.client_fatal(producer):
                    break
                if not e.commit:
                    e.refused()
                    break
                e.commit = False  # the documented answer to any other error: abort
            except Exception as exc:  # a state the client refuses the call in
                e.error(describe(exc))
                if not e.commit:
                    e.refused()
                break
        return e.unknown()

    def client_fatal(self, producer: AIOKafkaProducer) -> bool:
        manager = getattr(producer, "_txn_manager", None)
        fatal = getattr(manager, "is_fatal_error", None)
        return bool(fatal and fatal()) or self.r.producer_dead(producer) is not None

    async def replace(self) -> bool:
        """Close the producer and start a fresh one with the same transactional.id (which
        fences the old); False when REPLACE_ATTEMPTS are used up or it cannot start."""
        r = self.r
        old, r.producer = r.producer, None
        if old is not None:
            await r.close_producer(old, contract.CLOSE_FATAL_S)
        r.abandon("the producer was replaced before this send's outcome was known")
        if not self.may_replace():
            return False
        try:
            r.producer = r.new_producer()
            await r.start_producer(r.producer)
        except Exception as exc:
            return self.not_replaced(describe(exc))
        return True


def main(argv: list[str]) -> int:
    return contract.main(argv, Producing, Member, describe, lambda exc: f"{error_name(exc)}: {exc}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
