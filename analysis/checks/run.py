"""The checks of a run, folded into its facts: the registry of checks and the one run function.

Each check (analysis.checks.check.RunCheck) says whether it applies to a run and answers its
facts in one shape; `check_run` reads the run's files once (analysis.checks.history), asks every
check that applies in registry order, and folds their facts (RunFacts.fold). A new check is one
module and its entry in CHECKS; neither the fold nor the result's assembly changes for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from analysis.checks.check import RunCheck, RunFacts, RunInput
from analysis.checks.commits import LostCommitCheck
from analysis.checks.consumers import ConsumerCheck
from analysis.checks.cycles import CycleCheck
from analysis.checks.hanging import HangingTransactionCheck
from analysis.checks.history import RunHistory
from analysis.checks.liveness import LivenessCheck
from analysis.checks.messages.check import MessageCheck
from analysis.checks.offset_reads import OffsetReadsCheck
from analysis.checks.placement import PlacementCheck
from analysis.checks.polls import PollCheck
from analysis.checks.sends import SendOrderCheck
from analysis.checks.timed_out_commits import TimedOutCommitCheck
from analysis.checks.transactions import TransactionCheck

__all__ = ["CHECKS", "check_run", "with_check"]

# The registry, in fold order: the message check first (every run has its sends), then the
# checks over its messages and the run's other journals.
CHECKS: Final[tuple[RunCheck, ...]] = (
    MessageCheck(),
    TransactionCheck(),
    CycleCheck(),
    ConsumerCheck(),
    LivenessCheck(),
    PollCheck(),
    SendOrderCheck(),
    PlacementCheck(),
    LostCommitCheck(),
    OffsetReadsCheck(),
    TimedOutCommitCheck(),
    HangingTransactionCheck(),
)


def check_run(run: RunInput, checks: Sequence[RunCheck] = CHECKS) -> RunFacts:
    """The facts of one run: every check of `checks` that applies, folded in order."""
    history = RunHistory(run)
    facts = RunFacts()
    for check in checks:
        if check.applies(history):
            facts = facts.fold(check.facts(history))
    return facts


def with_check(check: RunCheck, checks: Sequence[RunCheck] = CHECKS) -> tuple[RunCheck, ...]:
    """`checks` with `check` in place of the one of its name (another implementation of it,
    such as the message check's DataFrame engine)."""
    return tuple(check if c.name == check.name else c for c in checks)
