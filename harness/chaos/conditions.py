"""`after:` conditions of a fault step: what must hold in the cluster before the step acts.

A condition is clauses joined by ` and `, each optionally negated with `not `; alternatives of
such clauses may be joined by ` or ` (`and` binds tighter: `A and B or C` holds when A and B
do, or C does):

- `isr_size([P]) <op> N`: partition P's ISR has <op> N members (op: == != < <= > >=);
- `leader_changed([P])`: P's leader differs from what it was when the previous step finished;
- `leader_is(@name[, P])`: P's leader is one of the nodes bound to `name`;
- `in_isr(@name[, P])`: every node bound to `name` is in P's ISR;
- `has_leader([P])`: P has a leader;
- `registered(@name)`: every broker bound to `name` is in the cluster metadata (it came back);
- `high_watermark([P]) <op> N`: P's high watermark (ListOffsets, read only for a condition
  that asks) compares so with N: `>= 1` once P holds a committed message;
- `after_s(X)`: X seconds have passed since the previous step finished.

P defaults to the step's partition (a number, or the one a bound node led). Parsing is pure
(the experiment's validation uses it); evaluation reads a `ClusterView`, one metadata
snapshot the nemesis takes while it polls.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

__all__ = ["ClusterView", "Condition", "ConditionError", "parse_condition"]

CONDITION_HELP: Final = (
    "write clauses joined by ' and ' (alternatives by ' or '), each optionally preceded by "
    "'not ': isr_size([P]) == N "
    "(or != < <= > >=), leader_changed([P]), leader_is(@name[, P]), in_isr(@name[, P]), "
    "has_leader([P]), registered(@name), high_watermark([P]) >= N, after_s(X); P defaults to "
    "the step's partition"
)
_OPS: Final[dict[str, Callable[[int, int], bool]]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
}
_CLAUSE = re.compile(
    r"^(?P<neg>not\s+)?(?P<fn>[a-z_]+)\s*\((?P<args>[^()]*)\)\s*"
    r"(?:(?P<op>==|!=|<=|>=|<|>)\s*(?P<value>[0-9]+))?$"
)
_NAME_ARG = re.compile(r"^@([a-z][a-z0-9_]*)$")
# function → (takes a @name first, takes a partition, needs a comparison)
_SIGNATURES: Final = {
    "isr_size": (False, True, True),
    "leader_changed": (False, True, False),
    "leader_is": (True, True, False),
    "in_isr": (True, True, False),
    "has_leader": (False, True, False),
    "registered": (True, False, False),
    "high_watermark": (False, True, True),
    "after_s": (False, False, False),
}


class ConditionError(ValueError):
    """A condition that does not parse; the message says what is wrong and the syntax."""


@dataclass(frozen=True)
class ClusterView:
    """What conditions are evaluated against: one metadata snapshot and the nemesis' memory."""

    leaders: Mapping[int, int | None]  # partition → leader (None: no leader)
    isrs: Mapping[int, Sequence[int]]  # partition → ISR broker ids
    brokers: frozenset[int]  # brokers in the metadata now
    bindings: Mapping[str, Sequence[int]]  # `as:` name → the broker ids it resolved to
    leaders_before: Mapping[int, int | None]  # leaders when the previous step finished
    since_previous_s: float  # seconds since the previous step finished
    answered: bool = True  # False: no broker answered; only after_s can be decided
    # partition → high watermark, read only for a condition that calls it;
    # a partition whose leader did not answer is absent
    high_watermarks: Mapping[int, int] = field(default_factory=dict)

    @classmethod
    def unanswered(
        cls, bindings: Mapping[str, Sequence[int]], since_previous_s: float
    ) -> ClusterView:
        """A view when no broker answers the metadata request: time is all that is known."""
        return cls({}, {}, frozenset(), bindings, {}, since_previous_s, answered=False)


@dataclass(frozen=True)
class Clause:
    """One clause: a function, its @name and partition (None: the step's), and a comparison."""

    fn: str
    negated: bool = False
    name: str | None = None
    partition: int | None = None
    op: str | None = None
    value: float | None = None  # the compared number, or after_s's seconds

    def text(self) -> str:
        """The clause as the file would write it."""
        args = [f"@{self.name}"] if self.name else []
        if self.partition is not None:
            args.append(str(self.partition))
        if self.fn == "after_s":
            args.append(f"{self.value:g}")
        compared = f" {self.op} {self.value:g}" if self.op else ""
        return f"{'not ' if self.negated else ''}{self.fn}({', '.join(args)}){compared}"

    def holds(self, view: ClusterView, default_partition: int) -> bool:
        """True when the clause holds in `view` (partition None: `default_partition`)."""
        if not view.answered and self.fn != "after_s":
            return False  # unknown, whichever way it is negated: keep waiting
        p = default_partition if self.partition is None else self.partition
        nodes = set(view.bindings.get(self.name, ())) if self.name else set()
        if self.fn == "high_watermark" and p not in view.high_watermarks:
            return False  # unknown (its leader did not say), whichever way it is negated
        if self.fn in ("isr_size", "high_watermark"):
            assert self.op is not None and self.value is not None
            size = len(view.isrs.get(p, ())) if self.fn == "isr_size" else view.high_watermarks[p]
            result = _OPS[self.op](size, int(self.value))
        elif self.fn == "leader_changed":
            result = view.leaders.get(p) != view.leaders_before.get(p)
        elif self.fn == "leader_is":
            result = view.leaders.get(p) in nodes
        elif self.fn == "in_isr":
            result = bool(nodes) and nodes <= set(view.isrs.get(p, ()))
        elif self.fn == "has_leader":
            result = view.leaders.get(p) is not None
        elif self.fn == "registered":
            result = bool(nodes) and nodes <= view.brokers
        else:  # after_s
            result = view.since_previous_s >= (self.value or 0.0)
        return result != self.negated


@dataclass(frozen=True)
class Condition:
    """Alternatives, each of clauses that must all hold; `text` is what the file said."""

    text: str
    alternatives: tuple[tuple[Clause, ...], ...] = field(default_factory=tuple)

    @property
    def clauses(self) -> tuple[Clause, ...]:
        """Every clause of every alternative, in order."""
        return tuple(c for alternative in self.alternatives for c in alternative)

    @property
    def names(self) -> tuple[str, ...]:
        """The `@name`s the condition reads, in order."""
        return tuple(c.name for c in self.clauses if c.name)

    def calls(self, fn: str) -> bool:
        """Whether a clause calls `fn`: `leader_changed` (the nemesis keeps the leaders when a
        step finishes), `high_watermark` (it sends a ListOffsets with each reading)."""
        return any(c.fn == fn for c in self.clauses)

    @property
    def partitions(self) -> tuple[int, ...]:
        """The partitions the condition names explicitly."""
        return tuple(c.partition for c in self.clauses if c.partition is not None)

    def unmet(self, view: ClusterView, default_partition: int) -> list[str]:
        """The clauses that do not hold in `view`, of every alternative ([] when one holds)."""
        missing: list[str] = []
        for alternative in self.alternatives:
            unmet = [c.text() for c in alternative if not c.holds(view, default_partition)]
            if not unmet:
                return []
            missing += unmet
        return missing


def parse_condition(text: str) -> Condition:
    """Parse an `after:` condition; ConditionError naming the bad clause and the syntax."""
    alternatives = [
        [part.strip() for part in re.split(r"\s+and(?:\s+|$)", alternative.strip())]
        for alternative in re.split(r"\s+or(?:\s+|$)", text.strip())
    ]
    if not text.strip() or any(not part for clauses in alternatives for part in clauses):
        raise ConditionError(f"empty condition or clause in {text!r}; {CONDITION_HELP}")
    parsed = tuple(tuple(_parse_clause(part) for part in clauses) for clauses in alternatives)
    return Condition(text.strip(), parsed)


def _parse_clause(text: str) -> Clause:
    match = _CLAUSE.match(text)
    if not match or match["fn"] not in _SIGNATURES:
        raise ConditionError(f"cannot read {text!r}; {CONDITION_HELP}")
    fn = match["fn"]
    takes_name, takes_partition, compares = _SIGNATURES[fn]
    args = [a.strip() for a in match["args"].split(",")] if match["args"].strip() else []
    if compares != (match["op"] is not None):
        need = "needs a comparison such as '== 1'" if compares else "takes no comparison"
        raise ConditionError(f"{text!r}: {fn} {need}; {CONDITION_HELP}")
    name = None
    if takes_name:
        if not args or not (named := _NAME_ARG.match(args[0])):
            raise ConditionError(f"{text!r}: {fn} takes a bound name first, e.g. @old_leader")
        name, args = named.group(1), args[1:]
    if fn == "after_s":
        return Clause(fn, bool(match["neg"]), value=_seconds(text, args))
    partition = _partition(text, fn, args)
    if partition is not None and not takes_partition:
        raise ConditionError(f"{text!r}: {fn} takes no partition")
    value = float(match["value"]) if match["value"] is not None else None
    return Clause(fn, bool(match["neg"]), name, partition, match["op"], value)


def _partition(text: str, fn: str, args: list[str]) -> int | None:
    """The clause's partition number; None when left out (the step's partition)."""
    if len(args) > 1:
        raise ConditionError(f"{text!r}: {fn} takes at most one partition")
    if not args:
        return None
    if not args[0].isdigit():
        raise ConditionError(f"{text!r}: the partition must be a number (got {args[0]!r})")
    return int(args[0])


def _seconds(text: str, args: list[str]) -> float:
    try:
        (raw,) = args
        seconds = float(raw)
    except ValueError:
        raise ConditionError(f"{text!r}: after_s takes one number of seconds") from None
    if not 0 <= seconds <= 86_400:
        raise ConditionError(f"{text!r}: after_s takes 0..86400 seconds")
    return seconds
