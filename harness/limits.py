"""Strict numbers and the upper bounds of an experiment file, each bound with its reason.

Shared by the experiment model (spec.py) and every fault type's parameter model, so a number
means the same everywhere: never a YAML `true`, never inf or nan, never beyond a stated limit.
Imports nothing of the harness: fault modules and the analysis load it without Docker.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field

__all__ = [
    "MAX_DURATION_S",
    "MAX_NAME",
    "MAX_PARTITIONS",
    "MAX_RATE",
    "MAX_REPETITIONS",
    "WHY_DURATION",
    "at_least",
    "at_most",
    "clipped",
    "number",
    "optional_number",
    "optional_param_number",
    "optional_whole",
    "param_number",
    "shown",
    "whole",
]

MAX_SHOWN = 80  # characters of a user's value quoted back in a message: one line at most
MAX_DURATION_S = 7 * 24 * 3600
MAX_REPETITIONS = 10_000
MAX_PARTITIONS = 10_000
MAX_RATE = 1_000_000
MAX_NAME = 100

WHY_DURATION = (
    "7 days, the longest run the harness supports (a longer value is usually milliseconds "
    "written as seconds; split a soak test into several runs)"
)


def clipped(text: str) -> str:
    """`text` cut to MAX_SHOWN characters, for text a message repeats without quotes."""
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 3] + "..."


def shown(value: Any) -> str:
    """`value` as a message quotes it: its repr, cut to MAX_SHOWN characters."""
    try:
        text = repr(value)
    except ValueError:  # Python refuses to print ints of more than 4,300 digits
        return "(a number too long to print)"
    return clipped(text)


def _looks_numeric(value: Any) -> bool:
    """True for text that reads as a finite number: "5", or 1e3, which YAML 1.1 keeps as text."""
    if not isinstance(value, str):
        return False
    try:
        return math.isfinite(float(value))
    except ValueError:
        return False


def _strict_number(value: Any) -> Any:
    if value is None:
        return value  # whether null is allowed is the field's type to say
    if _looks_numeric(value):
        # YAML 1.1 reads 1e3 (no dot) as text; taking text as a number would hide typos.
        raise ValueError(
            f"must be a number (got the text {shown(value)}; YAML reads a number with an "
            "exponent only with a dot and a sign, e.g. 1.0e+3, and never in quotes)"
        )
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"must be a number (got {shown(value)})")
    if not math.isfinite(value):
        raise ValueError(f"must be a finite number (got {shown(value)})")
    return value


def _strict_whole(value: Any) -> Any:
    if value is None:
        return value
    if _looks_numeric(value):
        raise ValueError(f"must be a whole number, without quotes (got the text {shown(value)})")
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"must be a whole number (got {shown(value)})")
    return value


def at_most(limit: float, why: str, unit: str = "") -> AfterValidator:
    """A validator refusing values above `limit`; the message gives the limit and `why`."""
    shown_limit = f"{int(limit):,}" if float(limit).is_integer() else f"{limit:,}"
    suffix = f" {unit}" if unit else ""

    def check(value: Any) -> Any:
        if value is not None and value > limit:
            raise ValueError(f"must be at most {shown_limit}{suffix}: {why} (got {shown(value)})")
        return value

    return AfterValidator(check)


def at_least(limit: float, *, exclusive: bool = False) -> AfterValidator:
    """A lower bound that lets null through (pydantic's ge/gt cannot apply to `X | None`)."""
    word = "greater than" if exclusive else "at least"

    def check(value: Any) -> Any:
        if value is not None and (value <= limit if exclusive else value < limit):
            raise ValueError(f"must be {word} {limit:g} (got {shown(value)})")
        return value

    return AfterValidator(check)


# The validator sits outside `| None` so a bad value gets one error, not one per union member.
# Pydantic's Field(ge=..., gt=...) adds the lower bound where a field is declared.
number = Annotated[float, BeforeValidator(_strict_number)]
whole = Annotated[int, BeforeValidator(_strict_whole)]
optional_number = Annotated[float | None, BeforeValidator(_strict_number)]
# Fault params keep a number as written (30 stays 30 in spec.json, as it always was).
param_number = Annotated[int | float, BeforeValidator(_strict_number)]
optional_param_number = Annotated[int | float | None, BeforeValidator(_strict_number)]
# Seconds a fault waits for one admin action (a reassignment, a voter change) to complete; each
# field adds what it waits for with Field(description=...).
admin_wait_s = Annotated[
    param_number, Field(gt=0), at_most(600, "10 minutes, longer than any shipped workload", "s")
]
optional_whole = Annotated[int | None, BeforeValidator(_strict_whole)]
