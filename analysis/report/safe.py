"""Jepsen's check-safe, applied to the report: a part that fails shows its error in place.

A chart, a section or a whole rendering that raises becomes a `PartFailure`, which renders as
a visible note naming the part and the error, and the rest of the report is still written.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, TypeVar

from markupsafe import Markup, escape

__all__ = ["PartFailure", "safely", "safely_from"]

T = TypeVar("T")
S = TypeVar("S")
log = logging.getLogger("kafka_chaos.report")


@dataclass(frozen=True)
class PartFailure:
    """A part of the report that could not be built: which one, and the error; `unwritten` is
    the file it left unwritten (not even a note saying so), None when it is shown in place."""

    failed: ClassVar[bool] = True  # templates test `x.failed`; views never have it set
    part: str
    error: str
    unwritten: Path | None = None

    def __str__(self) -> str:
        if self.unwritten is not None:
            return f"{self.part} could not be written to {self.unwritten} ({self.error})"
        return f"{self.part} failed: {self.error} (the rest of the report stands)"

    def __html__(self) -> str:
        return Markup('<p class="part-failed">{}</p>').format(escape(str(self)))


def safely(part: str, build: Callable[[], T], unwritten: Path | None = None) -> T | PartFailure:
    """build(), or the PartFailure naming `part` and the error when it raises (and `unwritten`,
    the file build() was to write)."""
    try:
        return build()
    except Exception as exc:
        log.exception("report part %s failed", part)
        return PartFailure(part, f"{type(exc).__name__}: {exc}", unwritten)


def safely_from(
    part: str, source: S | PartFailure | None, build: Callable[[S], T]
) -> T | PartFailure | None:
    """build(source) made safely, for a source that may itself be missing (None, passed on) or
    have failed (its PartFailure, passed on)."""
    if source is None or isinstance(source, PartFailure):
        return source
    return safely(part, lambda: build(source))
