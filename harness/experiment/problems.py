"""How a mistake in an experiment becomes a message: SpecError, and pydantic's errors rewritten
to name the field, the problem and the fix (never a dump of the value: see limits.shown).
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Sequence
from typing import Annotated, Any, get_args, get_origin

from pydantic import BaseModel, ValidationError

from harness.limits import clipped, shown

__all__ = [
    "Problem",
    "RawDocument",
    "SpecError",
    "is_model",
    "pydantic_problems",
    "spec_error",
    "unwrap",
]

Problem = tuple[str, str]  # (field path, reason and fix)
# An experiment document (or a part of one) as a user wrote it, before the model validates it.
RawDocument = dict[str, Any]


class SpecError(ValueError):
    """An experiment a user wrote is invalid; the message names the file, the field and the fix."""

    def __init__(self, message: str, *, source: str = "", problems: Sequence[Problem] = ()):
        super().__init__(message)
        self.source = source
        self.problems = list(problems)


def spec_error(
    source: str, problems: Sequence[Problem], headline: str = "invalid experiment"
) -> SpecError:
    """One SpecError listing every problem, a line each, under `source: headline:`."""
    lines = "\n".join(f"  {path}: {reason}" for path, reason in problems)
    return SpecError(f"{source}: {headline}:\n{lines}", source=source, problems=problems)


def unwrap(annotation: Any) -> Any:
    """Strip Annotated and `X | None` so the underlying field type can be inspected."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            members = [arg for arg in get_args(annotation) if arg is not type(None)]
            if len(members) != 1:
                return annotation
            annotation = members[0]
        else:
            return annotation


def is_model(annotation: Any) -> bool:
    """True when `annotation` is a pydantic model class."""
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _dotted(loc: Sequence[str | int]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            part = clipped(str(part))  # a key can be as long as a user made it
            path += f".{part}" if path else part
    return path


def _model_at(root: type[BaseModel], loc: Sequence[str | int]) -> type[BaseModel] | None:
    """The model class that holds the keys at `loc`, or None when `loc` is not inside a model."""
    model = root
    for part in loc:
        if isinstance(part, int):
            continue
        field_info = model.model_fields.get(part)
        if field_info is None:
            return None
        annotation = unwrap(field_info.annotation)
        if get_origin(annotation) is list:
            annotation = unwrap(get_args(annotation)[0])
        if not is_model(annotation):
            return None
        model = annotation
    return model


def _unknown_key(root: type[BaseModel], loc: Sequence[str | int]) -> str:
    key = str(loc[-1])
    model = _model_at(root, loc[:-1])
    if model is None:
        return f"unknown key {shown(key)}; remove it"
    allowed = list(model.model_fields)
    close = difflib.get_close_matches(key, allowed, n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    return f"unknown key {shown(key)}; {hint}allowed here: {', '.join(allowed)}"


def _explain(root: type[BaseModel], error: Any) -> str:
    loc, kind = tuple(error["loc"]), error["type"]
    if kind == "extra_forbidden":
        return _unknown_key(root, loc)
    if kind == "missing":
        return "required; add this key"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"must be a mapping of keys to values (got {shown(error['input'])})"
    message: str = error["msg"].removeprefix("Value error, ")
    if kind == "value_error":
        return message
    return f"{message} (got {shown(error['input'])})"


def pydantic_problems(error: ValidationError, root: type[BaseModel]) -> list[Problem]:
    """Each error of validating `root` as (dotted field path, reason with the fix)."""
    return [(_dotted(item["loc"]) or "(document)", _explain(root, item)) for item in error.errors()]
