"""The configuration matrix: dotted-path overrides, axes, and their expansion into cells.

An axis is a list of values for one dotted path, or a mapping of named variants, each a
mapping of dotted paths to values. `expand` takes the cartesian product (first axis slowest),
validates every resolved cell and names it after its axis values, so a cell's name says what
differs in it. Two axes may not set the same key, nor one a key inside what another sets.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import itertools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_origin

from pydantic import BaseModel, ValidationError

from harness.experiment.model import Experiment
from harness.experiment.problems import (
    Problem,
    RawDocument,
    SpecError,
    is_model,
    pydantic_problems,
    spec_error,
    unwrap,
)
from harness.experiment.rules import rule_problems
from harness.limits import MAX_NAME, clipped, shown

__all__ = ["Cell", "apply_override", "expand"]

CELL_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9=._-]")
_CELL_NAME_MAX = MAX_NAME  # a directory name; longer names end in a digest of the full one


@dataclass(frozen=True)
class Cell:
    """One point of the matrix: its name, its axis values and the resolved experiment."""

    name: str
    axes: dict[str, str]
    spec: Experiment
    index: int


@dataclass(frozen=True)
class _OverrideTarget:
    """Where a dotted override path lands in the experiment."""

    fields: tuple[str, ...]  # model fields from the top down to the overridden one
    kind: Literal["section", "map", "value"]
    key: str | None = None  # key inside a free-form config map; None = the whole field


_NOT_OVERRIDABLE = ("name", "matrix")


def _resolve_override(path: str) -> _OverrideTarget:
    """Map a dotted path onto the model; raise ValueError saying why it does not exist."""
    parts = path.split(".")
    if parts[0] in _NOT_OVERRIDABLE:
        raise ValueError(
            f"'{parts[0]}' cannot be overridden (by the matrix or --set): edit the file"
        )
    model: type[BaseModel] = Experiment
    for depth, part in enumerate(parts):
        walked = tuple(parts[: depth + 1])
        if part not in model.model_fields:
            here = ".".join(parts[:depth]) or "the top level"
            close = difflib.get_close_matches(part, list(model.model_fields), n=1)
            hint = (
                f"did you mean '{'.'.join((*parts[:depth], close[0]))}'?"
                if close
                else f"fields of {here}: {', '.join(model.model_fields)}"
            )
            raise ValueError(f"'{path}' does not exist: {here} has no '{part}'; {hint}")
        annotation = unwrap(model.model_fields[part].annotation)
        rest = parts[depth + 1 :]
        if is_model(annotation):
            if not rest:
                return _OverrideTarget(walked, "section")
            model = annotation
        elif get_origin(annotation) is dict:
            # Config maps hold dotted keys themselves: the rest of the path is one key.
            return _OverrideTarget(walked, "map", ".".join(rest) or None)
        elif rest:
            raise ValueError(
                f"'{path}' does not exist: '{'.'.join(walked)}' is a single value "
                "(lists are overridden as a whole)"
            )
        else:
            return _OverrideTarget(walked, "value")
    raise AssertionError(f"unreachable: {path}")


def _merged(base: RawDocument, update: RawDocument) -> RawDocument:
    out = dict(base)
    for key, value in update.items():
        both_maps = isinstance(out.get(key), dict) and isinstance(value, dict)
        out[key] = _merged(out[key], value) if both_maps else value
    return out


def apply_override(raw: RawDocument, path: str, value: Any) -> None:
    """Set `path` in the raw experiment dict; a mapping given for a section is merged into it."""
    target = _resolve_override(path)
    node = raw
    for name in target.fields[:-1]:
        if not isinstance(node.get(name), dict):
            node[name] = {}
        node = node[name]
    last, value = target.fields[-1], copy.deepcopy(value)
    if target.kind == "map" and target.key is not None:
        node[last] = {**(node.get(last) or {}), target.key: value}
    elif target.kind == "section" and isinstance(value, dict) and isinstance(node.get(last), dict):
        node[last] = _merged(node[last], value)
    else:
        node[last] = value


def _value_at(data: RawDocument, path: str) -> Any:
    node: Any = data
    for name in _place(path):
        node = node.get(name) if isinstance(node, dict) else None
    return node


@dataclass(frozen=True)
class _Choice:
    """One value of one matrix axis: a list value, or a named variant's overrides."""

    axis: str
    variant: str | None  # None for a list axis, which is named after its resolved value
    overrides: tuple[tuple[str, Any], ...]
    position: int

    @property
    def origin(self) -> str:
        if self.variant is None:
            return f"matrix axis '{self.axis}', value {shown(self.overrides[0][1])}"
        return f"matrix axis '{self.axis}', variant '{self.variant}'"


class _MatrixProblem(ValueError):
    def __init__(self, where: str, message: str):
        super().__init__(message)
        self.where = where


def _checked_path(where: str, path: str) -> str:
    try:
        _resolve_override(path)
    except ValueError as exc:
        raise _MatrixProblem(where, f"override path {exc}") from None
    return path


def _axis_choices(axis: str, values: Any) -> list[_Choice]:
    where = f"matrix.{axis}"
    if isinstance(values, list):
        if not values:
            raise _MatrixProblem(where, "needs at least one value")
        _checked_path(where, axis)
        return [_Choice(axis, None, ((axis, value),), i) for i, value in enumerate(values)]
    if not isinstance(values, dict) or not values:
        raise _MatrixProblem(
            where,
            f"must be a list of values for the dotted path '{axis}', or a mapping of named "
            "variants, each a mapping of dotted paths to values",
        )
    choices = []
    for position, (variant, overrides) in enumerate(values.items()):
        overrides = {} if overrides is None else overrides
        if not isinstance(overrides, dict):
            raise _MatrixProblem(
                f"{where}.{variant}",
                "a variant is a mapping of dotted paths to values, e.g. producer.acks: all",
            )
        paths = [_checked_path(f"{where}.{variant}", str(path)) for path in overrides]
        pairs = tuple(zip(paths, overrides.values(), strict=True))
        choices.append(_Choice(axis, str(variant), pairs, position))
    return choices


def _long_names(matrix: RawDocument) -> Iterator[Problem]:
    """Axis and variant names past MAX_NAME: they make up cell (directory) names."""
    why = f"use at most {MAX_NAME} (it becomes part of cell names, which name directories)"
    for axis, values in matrix.items():
        if len(str(axis)) > MAX_NAME:
            yield "matrix", f"axis name {shown(str(axis))} is {len(str(axis))} characters; {why}"
        variants = values if isinstance(values, dict) else {}
        for variant in variants:
            if len(str(variant)) > MAX_NAME:
                where = f"matrix.{clipped(str(axis))}"
                yield (
                    where,
                    f"variant {shown(str(variant))} is {len(str(variant))} characters; {why}",
                )


def _axis_paths(axis: str, values: Any) -> list[str]:
    """The dotted paths an axis sets, whether or not they exist."""
    if not isinstance(values, dict):
        return [axis]
    overrides = [paths for paths in values.values() if isinstance(paths, dict)]
    return list(dict.fromkeys(str(path) for paths in overrides for path in paths))


def _place(path: str) -> tuple[str, ...]:
    """The path as model fields plus, inside a config map, one key (which may hold dots)."""
    try:
        target = _resolve_override(path)
    except ValueError:
        return tuple(path.split("."))  # a wrong path is reported by itself; compare its parts
    return target.fields if target.key is None else (*target.fields, target.key)


def _overlap(first: str, second: str) -> bool:
    """True when two paths set the same key, or one sets a key inside the other."""
    a, b = _place(first), _place(second)
    return a[: len(b)] == b or b[: len(a)] == a


def _overlapping_axes(matrix: RawDocument) -> Iterator[Problem]:
    """Two axes setting one key: in every cell the later would silently replace the earlier."""
    paths = {str(axis): _axis_paths(str(axis), values) for axis, values in matrix.items()}
    for (earlier, mine), (later, theirs) in itertools.combinations(paths.items(), 2):
        clash = next(((p, q) for p in mine for q in theirs if _overlap(p, q)), None)
        if clash is None:
            continue
        first, second = shown(earlier), shown(later)
        what = (
            f"matrix axes {first} and {second} both set {shown(clash[0])}"
            if clash[0] == clash[1]
            else f"matrix axis {first} sets {shown(clash[0])} and matrix axis {second} sets "
            f"{shown(clash[1])}, one inside the other"
        )
        yield (
            f"matrix.{later}",
            f"{what}; in every cell the later axis would silently replace the earlier's value. "
            "Set each key in one axis only (one axis of named variants can set several keys)",
        )


def _parse_matrix(matrix: RawDocument) -> tuple[list[list[_Choice]], list[Problem]]:
    axes: list[list[_Choice]] = []
    problems: list[Problem] = list(_long_names(matrix))
    for axis, values in matrix.items():
        try:
            axes.append(_axis_choices(str(axis), values))
        except _MatrixProblem as exc:
            problems.append((exc.where, str(exc)))
    problems += _overlapping_axes(matrix)
    return axes, problems


def _short_axis_name(choice: _Choice) -> str:
    # A key inside a config map (retention.ms) is one component even though it holds dots.
    return choice.axis if choice.variant is not None else _place(choice.axis)[-1]


def _shown_axis_names(axes: list[list[_Choice]]) -> dict[str, str]:
    """Name list axes by their last path component, unless two axes would then share a name."""
    short = {choices[0].axis: _short_axis_name(choices[0]) for choices in axes}
    taken = list(short.values())
    return {axis: name if taken.count(name) == 1 else axis for axis, name in short.items()}


def _label(value: Any, position: int) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, str | int | float):
        return str(value)
    if isinstance(value, dict) and isinstance(value.get("kind"), str) and not value.get("argv"):
        # A client (librdkafka, java:3.8.0) reads as its kind and version.
        return "-".join(str(part) for part in (value["kind"], value.get("version")) if part)
    return f"v{position + 1}"  # structured values have no short form; named variants read better


def _choice_label(choice: _Choice, resolved: RawDocument | None) -> str:
    if choice.variant is not None:
        return choice.variant
    # Name after the validated value so 1, "1" and -1 / "all" read as Kafka spells them.
    value = choice.overrides[0][1] if resolved is None else _value_at(resolved, choice.axis)
    return _label(value, choice.position)


def _cell_name(labels: dict[str, str], axis_names: dict[str, str]) -> str:
    if not labels:
        return "base"
    name = "__".join(f"{axis_names[axis]}={label}" for axis, label in labels.items())
    name = CELL_NAME_UNSAFE.sub("-", name)
    if len(name) > _CELL_NAME_MAX:
        digest = hashlib.sha1(name.encode()).hexdigest()[:12]
        name = f"{name[: _CELL_NAME_MAX - 13]}-{digest}"
    return name


def _origin_of(path: str, reason: str, combo: Sequence[_Choice]) -> str | None:
    """The matrix choice that set the field a problem is about, else one its reason names."""
    dotted = re.sub(r"\[(\d+)\]", r".\1", path)
    overrides = [(override, choice) for choice in combo for override, _ in choice.overrides]
    direct = [
        choice.origin
        for override, choice in overrides
        if dotted == override
        or dotted.startswith(f"{override}.")
        or override.startswith(f"{dotted}.")
    ]
    # Rules across fields name the other field in the reason, e.g. "requires producer.acks".
    named = [
        choice.origin
        for override, choice in overrides
        if re.search(rf"(?<![\w.]){re.escape(override)}(?!\w)", reason)
    ]
    origins = direct or named
    return origins[-1] if origins else None  # the last override applied is the one in force


def _attributed(problems: list[Problem], combo: Sequence[_Choice]) -> list[Problem]:
    """Append which matrix axis set the field a problem is about, when an override did."""
    out = []
    for path, reason in problems:
        origin = _origin_of(path, reason, combo)
        out.append((path, f"{reason} (set by {origin})" if origin else reason))
    return out


def _resolve_cell(
    base: RawDocument, combo: Sequence[_Choice]
) -> tuple[Experiment | None, list[Problem]]:
    raw = copy.deepcopy(base)
    for choice in combo:
        for path, value in choice.overrides:
            apply_override(raw, path, value)
    try:
        spec = Experiment.model_validate(raw)
    except ValidationError as exc:
        return None, pydantic_problems(exc, Experiment)
    return spec, rule_problems(spec)


_MAX_REPORTED_CELLS = 5


def _cells_error(
    source: str, failures: list[tuple[str, dict[str, str], list[Problem]]]
) -> SpecError:
    if len(failures) == 1 and not failures[0][1]:
        return spec_error(source, failures[0][2])
    blocks: list[str] = []
    problems: list[Problem] = []
    for name, axes, cell_problems in failures[:_MAX_REPORTED_CELLS]:
        values = ", ".join(f"{clipped(axis)}={clipped(label)}" for axis, label in axes.items())
        lines = "\n".join(f"    {path}: {reason}" for path, reason in cell_problems)
        blocks.append(f"  matrix cell '{name}' ({values}):\n{lines}")
        problems += cell_problems
    if len(failures) > _MAX_REPORTED_CELLS:
        blocks.append(f"  ... and {len(failures) - _MAX_REPORTED_CELLS} more invalid cells")
    message = f"{source}: invalid matrix cells:\n" + "\n".join(blocks)
    return SpecError(message, source=source, problems=problems)


def _duplicate_names(cells: list[Cell]) -> Iterator[Problem]:
    first: dict[str, Cell] = {}
    for cell in cells:
        if cell.name in first:
            reason = (
                f"two cells are named '{cell.name}' ({cell.axes}): a list axis repeats a value "
                "(-1 and all are both acks=all) or two values differ only in characters outside "
                "[A-Za-z0-9=._-]; remove or rename one"
            )
            yield "matrix", reason
        first.setdefault(cell.name, cell)


def expand(experiment: Experiment) -> list[Cell]:
    """Resolve the matrix into validated cells in cartesian order (first axis slowest)."""
    source = experiment._source
    axes, problems = _parse_matrix(experiment.matrix)
    if problems:
        raise spec_error(source, problems, "invalid matrix")
    # Unset fields stay unset in every cell: a Java client keeps its own defaults for them.
    base = experiment.model_dump(exclude={"matrix"}, exclude_unset=True)
    axis_names = _shown_axis_names(axes)
    cells: list[Cell] = []
    failures = []
    for index, combo in enumerate(itertools.product(*axes)):
        spec, problems = _resolve_cell(base, combo)
        resolved = None if spec is None else spec.model_dump()
        labels = {choice.axis: _choice_label(choice, resolved) for choice in combo}
        name = _cell_name(labels, axis_names)
        if spec is None or problems:
            failures.append((name, labels, _attributed(problems, combo)))
            continue
        spec._source = source
        cells.append(Cell(name=name, axes=labels, spec=spec, index=index))
    if failures:
        raise _cells_error(source, failures)
    duplicates = list(_duplicate_names(cells))
    if duplicates:
        raise spec_error(source, duplicates, "invalid matrix")
    return cells
