"""The consume role of the aiokafka program (client.py consume ...): one start of one member
of the consumer group, its journals and its stdout lines (the client-program contract)."""

from __future__ import annotations

import asyncio
import inspect
import signal
import traceback

import aiokafka
import contract
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka.structs import OffsetAndMetadata, TopicPartition
from contract import msg_id_of, next_offsets, note
from library import POLL_MS, error_name

# ---------------------------------------------------------------------------------------------
# consume


class Member(contract.Journals):
    """The consume role on aiokafka: one start of one member of the group
    (KafkaChaosConsumer.java), its commits observed through the coordinator."""

    stopped: asyncio.Event  # the flag SIGTERM raises

    def __init__(self, args: dict[str, str]):
        super().__init__(args)
        self.kwargs = {
            "bootstrap_servers": self.bootstrap,
            "group_id": self.group,
            "client_id": self.client_id,
            "auto_offset_reset": "earliest",
            "isolation_level": "read_committed",
            "enable_auto_commit": self.commit == "auto",
            "session_timeout_ms": int(self.session_timeout_ms),
            "heartbeat_interval_ms": int(self.heartbeat_ms),
        }
        self.stopped = asyncio.Event()

    def play(self) -> None:
        asyncio.run(self.run())

    def config(self) -> dict[str, str]:
        defaults = {
            name: p.default
            for name, p in inspect.signature(AIOKafkaConsumer.__init__).parameters.items()
            if p.default is not inspect.Parameter.empty
        }
        resolved = {**defaults, **self.kwargs}
        names = {
            "bootstrap_servers": "bootstrap.servers", "group_id": "group.id",
            "client_id": "client.id", "auto_offset_reset": "auto.offset.reset",
            "isolation_level": "isolation.level", "enable_auto_commit": "enable.auto.commit",
            "auto_commit_interval_ms": "auto.commit.interval.ms",
            "session_timeout_ms": "session.timeout.ms",
            "heartbeat_interval_ms": "heartbeat.interval.ms",
            "max_poll_interval_ms": "max.poll.interval.ms",
            "request_timeout_ms": "request.timeout.ms", "fetch_max_wait_ms": "fetch.max.wait.ms",
        }  # fmt: skip
        config = {java: str(resolved[name]).lower() if isinstance(resolved[name], bool)
                  else str(resolved[name]) for name, java in names.items()
                  if resolved.get(name) is not None}  # fmt: skip
        strategy = resolved.get("partition_assignment_strategy") or ()
        config["partition.assignment.strategy"] = ",".join(s.__name__ for s in strategy)
        config["partitions_lost"] = "not reported by aiokafka (a lost assignment is revoked)"
        config["client.version"] = f"aiokafka {aiokafka.__version__}"
        return config

    async def commit_sync(self, consumer: AIOKafkaConsumer, rows) -> set[int]:
        """Commit each partition's next offset after `rows`; the partitions whose commit
        succeeded. The outcome is journalled either way."""
        offsets = next_offsets(rows)
        outcome = "ok"
        try:
            await consumer.commit(
                {
                    TopicPartition(self.topic, p): OffsetAndMetadata(o, "")
                    for p, o in offsets.items()
                }
            )
        except Exception as exc:
            outcome = type(exc).__name__
        self.write_commits(offsets, outcome)
        return set(offsets) if outcome == "ok" else set()

    async def process(self, rows) -> None:
        if self.processing_s <= 0:
            self.write_processed(rows)
            return
        for row in rows:
            await asyncio.sleep(self.processing_s)
            self.write_processed([row])

    async def handle(self, consumer: AIOKafkaConsumer, rows) -> None:
        if self.commit == "before-process":
            done = await self.commit_sync(consumer, rows)
            await self.process([row for row in rows if row[1] in done])
        else:
            await self.process(rows)
            if self.commit == "after-process":
                await self.commit_sync(consumer, rows)

    def journal_auto_commits(self, consumer: AIOKafkaConsumer) -> None:
        """aiokafka reports no automatic commit: its coordinator's commit call is wrapped so
        each one's outcome (automatic, before a rebalance, on close) reaches the journal."""
        coordinator = getattr(consumer, "_coordinator", None)
        original = getattr(coordinator, "_do_commit_offsets", None)
        if original is None:
            note("auto commit: this aiokafka's commits cannot be observed; none journalled")
            return

        async def observed(assignment, offsets):
            journal = {tp.partition: meta.offset for tp, meta in (offsets or {}).items()
                       if tp.topic == self.topic}  # fmt: skip
            try:
                result = await original(assignment, offsets)
            except BaseException as exc:
                self.write_commits(journal, type(exc).__name__)
                raise
            self.write_commits(journal, "ok")
            return result

        coordinator._do_commit_offsets = observed  # type: ignore[union-attr]

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, self.stopped.set)
        contract.watch_stdin_thread()
        consumer = AIOKafkaConsumer(**self.kwargs)
        self.out.line({"name": "effective_config", "config": self.config()})
        await consumer.start()
        if self.commit == "auto":
            self.journal_auto_commits(consumer)
        member = self

        class Listener(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked):
                member.held -= {tp.partition for tp in revoked}
                member.holding("partitions_revoked")

            async def on_partitions_assigned(self, assigned):
                member.held |= {tp.partition for tp in assigned}
                member.holding("partitions_assigned")

        consumer.subscribe([self.topic], listener=Listener())
        self.out.line({"name": "startup_complete"})
        try:
            while not self.stopped.is_set():
                batches = await consumer.getmany(timeout_ms=POLL_MS)
                rows = [
                    (msg_id_of(record.value), record.partition, record.offset)
                    for records in batches.values()
                    for record in records
                ]
                if rows:
                    await self.handle(consumer, rows)
        finally:
            try:
                await consumer.stop()  # leaves the group; in auto mode, commits what was polled
            except BaseException as exc:  # CancelledError included (aiokafka's closing tasks)
                if not self.stopped.is_set():
                    raise
                # Asked to stop, the journals are whole: what closing raised is only logged.
                note(f"closing the consumer after SIGTERM: {error_name(exc)}: {exc}")
                traceback.print_exc()
            self.close_journals()


# ---------------------------------------------------------------------------------------------
