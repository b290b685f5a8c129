"""The Java recorder in transactions (java_programs/TransactionalSends.java): the transactional
workload of harness/workload/transactions/librdkafka.py on the Java client, journalled the same way.

The plan stays the harness's (`TransactionPlan`, one definition): the program reads one intent
a line on stdin before each transaction, written here from the plan (the pipe holds the writer
back once it is ahead), and prints a `transaction_end` line for each transaction that sent
something. Each such line becomes the row of the transaction journal
(layout.TRANSACTIONS_JOURNAL) the librdkafka recorder writes, once checked against the plan: a
line whose intent is not the plan's, whose number goes back, or whose messages do not follow
the previous transaction's breaks the protocol (the run is UNKNOWN with the reason). Each send
is journalled as for the plain Java recorder (command.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from itertools import count
from pathlib import Path
from typing import IO

from harness.experiment.clients import ClientSpec
from harness.experiment.fields import Scalar
from harness.experiment.model import ProducerSpec
from harness.rundir import layout
from harness.rundir.transactions import Intent
from harness.workload.producer.by_client import client_program
from harness.workload.producer.command import (
    ClientError,
    ClientProgram,
    CommandProducer,
    dying_with_parent,
)
from harness.workload.producer.fleet import MemberEnd
from harness.workload.producer.protocol import Line, TransactionEnd, Violation
from harness.workload.producer.recorder import Workload
from harness.workload.transactions.librdkafka import (
    GROUP_ID,
    TransactionJournal,
    TransactionPlan,
    transactional_config,
)

__all__ = [
    "JavaTransactions",
    "PlanFollower",
    "age_transactional_id",
    "java_transactions",
    "java_transactions_argv",
]

AGE_LOG = "age.log"  # the aging program's stderr, in the run directory
# The slowest aging the harness waits for, in commits a second (its time bound); one commit
# is three requests to the coordinators and two log writes.
AGE_MIN_RATE = 20


def java_transactions_argv(plan: TransactionPlan) -> list[str]:
    """The arguments that put the Java recorder in transactions (after its usual ones)."""
    offsets = ["--offsets-group", GROUP_ID] if plan.send_offsets else []
    return [
        "--transaction-size", str(plan.size), "--partitions", str(plan.partitions), *offsets,
        "--on-timeout", plan.on_timeout.value,
    ]  # fmt: skip


def java_settings(plan: TransactionPlan) -> dict[str, Scalar]:
    """What transactions need on top of the file's producer settings (Java's names are
    librdkafka's for these): the transactional.id, idempotence, acks=all, the timeout."""
    return {**transactional_config({}, plan), "acks": "all"}


@dataclass
class PlanFollower:
    """Checks each transaction_end line against the plan's intents (as written to the program)
    and the transactions before it; `problem` says why a line does not follow them."""

    intents: Sequence[Intent]
    size: int
    last: int = -1  # the last transaction's number
    next_msg_id: int = 0  # where the next transaction's messages start

    def problem(self, line: TransactionEnd) -> str | None:
        """Why `line` does not follow the plan (None: it does, and it is taken as the last)."""
        txn = line.transaction
        if txn <= self.last:
            return f"transaction {txn} after transaction {self.last}"
        if txn >= len(self.intents):
            return f"transaction {txn} ended before its intent was written"
        if line.intent != self.intents[txn]:
            return f"transaction {txn} says intent {line.intent}, the plan {self.intents[txn]}"
        if line.first_msg_id != self.next_msg_id:
            return (
                f"transaction {txn} starts at msg_id {line.first_msg_id}, not "
                f"{self.next_msg_id} where the previous one ended"
            )
        if not 0 <= line.messages <= self.size:
            return f"transaction {txn} has {line.messages} messages (0..{self.size})"
        self.last, self.next_msg_id = txn, line.first_msg_id + line.messages
        return None


class JavaTransactions(CommandProducer):
    """The runner's `Producing` for a transactional workload on the Java client: the program
    in transactions, its sends in the AckJournal, its transactions in the transaction journal,
    the tally with the transactions by outcome."""

    def __init__(
        self, program: ClientProgram, workload: Workload, plan: TransactionPlan, run_dir: Path
    ):
        super().__init__(program, workload, run_dir)
        self.plan = plan
        self.transactions = TransactionJournal(run_dir / layout.TRANSACTIONS_JOURNAL)
        self.intents: list[Intent] = []
        self.follower = PlanFollower(self.intents, plan.size)
        self._rng = random.Random(plan.seed)

    def start(self) -> None:
        """Before the workload: commit the plan's age_commits offset-only transactions on the
        transactional.id (age_transactional_id), so the workload starts at a high epoch."""
        super().start()
        if self.plan.age_commits:
            age_transactional_id(self.program, self.plan.age_commits, self.run_dir / AGE_LOG)

    def _stdin_feed(self) -> Callable[[IO[bytes]], None]:
        return self._write_intents

    def _write_intents(self, stdin: IO[bytes]) -> None:
        """The plan's intents, one a line, until the program stops reading."""
        with contextlib.suppress(OSError, ValueError):  # the program exited: its pipe closed
            for txn in count():
                intent = self.plan.intent(txn, self._rng)
                self.intents.append(intent)
                stdin.write(f"{intent.value}\n".encode())
                stdin.flush()

    def _other_line(self, line: Line) -> None:
        if not isinstance(line, TransactionEnd):
            return
        if (problem := self.follower.problem(line)) is not None:
            self.reading.violations.append(Violation(f"transaction_end: {problem}", str(line)))
            return
        self.journal.commit()  # its sends' rows first, as the librdkafka recorder journals
        self.transactions.write(
            line.transaction, line.first_msg_id, line.messages, line.intent, line.outcome,
            line.error, line.begin_ts_us, line.end_ts_us,
        )  # fmt: skip

    def end(self) -> MemberEnd:
        """As for any program, with the transactions by outcome."""
        return replace(super().end(), transactions=dict(self.transactions.outcomes))

    def finish(self) -> tuple[str | None, str | None]:
        """As for any program, and the transaction journal closed (its error joins the
        journal's)."""
        journal_error, problem = super().finish()
        if self.process is not None and self.process.stdin is not None:
            with contextlib.suppress(OSError, ValueError):
                self.process.stdin.close()
        if (txn_error := self.transactions.close()) is not None:
            journal_error = f"{journal_error}; {txn_error}" if journal_error else txn_error
        return journal_error, problem


def age_transactional_id(program: ClientProgram, commits: int, log: Path) -> float:
    """Run the Java recorder with --age-transactions `commits` (its stderr appended to `log`)
    and wait for it: the seconds the commits took, from its `aged` line. Raises ClientError
    when it fails, commits fewer or runs past its bound (AGE_MIN_RATE); an interrupt of the
    harness (KeyboardInterrupt) kills it on the way out."""
    argv = dying_with_parent([*program.argv, "--age-transactions", str(commits)])
    bound_s = 60 + commits / AGE_MIN_RATE
    with log.open("ab") as stderr:
        process = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=stderr, stdin=subprocess.DEVNULL,
            env={**os.environ, **program.env}, start_new_session=True,
        )  # fmt: skip
        try:
            out, _ = process.communicate(timeout=bound_s)
        except subprocess.TimeoutExpired:
            raise ClientError(
                f"aging the transactional.id ({commits} commits) ran past {bound_s:.0f} s; "
                f"its log: {log}"
            ) from None
        finally:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    aged = _aged_line(out.decode(errors="replace"))
    if process.returncode != 0 or aged is None or aged.get("transactions") != commits:
        raise ClientError(
            f"aging the transactional.id ({commits} commits) failed (exit "
            f"{process.returncode}, reported {aged}); its log: {log}"
        )
    return float(aged["seconds"])


def _aged_line(stdout: str) -> dict | None:
    """The `aged` object among the program's stdout lines (None: it printed none)."""
    for text in stdout.splitlines():
        with contextlib.suppress(ValueError):
            line = json.loads(text)
            if isinstance(line, dict) and line.get("name") == "aged":
                return line
    return None


def java_transactions(
    client: ClientSpec,
    producer: ProducerSpec,
    workload: Workload,
    plan: TransactionPlan,
    endpoint: tuple[str, str],
    run_dir: Path,
    expected: tuple[str, bool] | None = None,
) -> JavaTransactions:
    """The Java recorder at `client.version` running `workload` in transactions by `plan`;
    `endpoint` is (bootstrap, topic)."""
    bootstrap, topic = endpoint
    program = client_program(
        client, producer, workload, bootstrap, topic, run_dir, expected,
        overrides=java_settings(plan),
    )  # fmt: skip
    program = replace(program, argv=[*program.argv, *java_transactions_argv(plan)])
    return JavaTransactions(program, workload, plan, run_dir)
