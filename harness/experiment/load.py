"""Loading an experiment: strict YAML in, a validated Experiment (every matrix cell too) out.

Every mistake becomes one SpecError naming the file, the line or field, and the fix: plain
YAML only (no tags, no keys that are lists or mappings, no key twice), then the model, then
each cell of the matrix. Command-line overrides go through the same validation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NoReturn

import yaml
from pydantic import ValidationError

from harness.experiment.matrix import apply_override, expand
from harness.experiment.model import Experiment
from harness.experiment.problems import SpecError, pydantic_problems, spec_error
from harness.limits import shown

__all__ = ["load_experiment", "override", "parse_experiment"]

_YAML_TAG = "tag:yaml.org,2002:"


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses tags, unhashable keys and a key repeated in one mapping."""


class _PlainYamlError(yaml.constructor.ConstructorError):
    """The YAML is well-formed but holds something an experiment file must not."""


def _refuse(loader: _StrictLoader, node: yaml.Node, message: str) -> _PlainYamlError:
    return _PlainYamlError(None, None, message, node.start_mark)


def _construct_unique_mapping(
    loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False
) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == f"{_YAML_TAG}merge":
            continue  # `<<: *anchor` keys may legitimately be overridden by explicit ones
        key = loader.construct_object(key_node, deep=deep)
        try:
            repeated = key in seen
        except TypeError:
            kind = "list" if isinstance(key, list) else "mapping"
            raise _refuse(
                loader, key_node, f"a key is a {kind}; keys must be plain names, e.g. acks:"
            ) from None
        if repeated:
            raise _refuse(
                loader,
                key_node,
                f"duplicate key {shown(key)}: the second would silently replace the first; "
                "keep only one of them",
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


def _construct_tagged(loader: _StrictLoader, node: yaml.Node) -> NoReturn:
    tag = node.tag.replace(_YAML_TAG, "!!", 1)
    raise _refuse(
        loader,
        node,
        f"the YAML tag {shown(tag)} is not allowed: an experiment file holds plain mappings, "
        "lists, strings, numbers and booleans; remove the tag",
    )


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique_mapping
)
_StrictLoader.add_constructor(None, _construct_tagged)  # every tag SafeLoader does not know


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def _refused(source: str, problem: str, where: str = "") -> SpecError:
    """The SpecError `source<where>: problem`; `where` is a `:line:column`, or nothing."""
    return SpecError(f"{source}{where}: {problem}", source=source)


def _yaml_error(source: str, exc: yaml.YAMLError) -> SpecError:
    mark = getattr(exc, "problem_mark", None)
    where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
    problem = _first_line(getattr(exc, "problem", None) or str(exc))
    if isinstance(exc, _PlainYamlError):
        return _refused(source, problem, where)
    if isinstance(exc, yaml.reader.ReaderError):
        return _refused(source, f"{problem}; remove that character")
    context = getattr(exc, "context", None)
    detail = f"{problem} ({context})" if context else problem
    return _refused(
        source,
        f"YAML syntax error: {detail}. Fix the YAML at that line (indentation, a missing ':' or "
        "space after it, an unclosed quote or bracket)",
        where,
    )


def _read(path: str | Path) -> str:
    source = str(path)
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise _refused(
            source,
            "no such file; pass the path of an experiment YAML file (e.g. "
            "experiments/default.yaml) or a shipped experiment's name (kafka-chaos list "
            "experiments)",
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _refused(source, f"cannot read the file ({exc}); pass a UTF-8 YAML file") from None


def _decode(text: str, source: str) -> Any:
    try:
        return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass: no objects
    except yaml.YAMLError as exc:
        raise _yaml_error(source, exc) from None
    except ValueError as exc:  # e.g. an int past Python's 4,300 digits, or 2024-13-45 as a date
        raise _refused(
            source,
            f"YAML could not convert a value ({shown(_first_line(str(exc)))}); write numbers of "
            "sensible size, and quote text that looks like a number or date",
        ) from None
    except RecursionError:
        raise _refused(source, "the YAML is nested too deeply to be an experiment file") from None


def load_experiment(path: str | Path) -> Experiment:
    """Read and validate an experiment file, matrix cells included; raise SpecError if invalid."""
    return parse_experiment(_decode(_read(path), str(path)), str(path))


def parse_experiment(data: Any, source: str = "<dict>") -> Experiment:
    """Validate a decoded experiment document and every matrix cell; raise SpecError if invalid."""
    if data is None:
        raise _refused(source, "the experiment is empty; start from experiments/default.yaml")
    if not isinstance(data, dict):
        raise _refused(
            source,
            "the experiment must be a mapping of keys (name, kafka, topic, producer, workload, "
            f"faults, ...), not a {type(data).__name__}; start from experiments/default.yaml",
        )
    try:
        experiment = Experiment.model_validate(data)
    except ValidationError as exc:
        raise spec_error(source, pydantic_problems(exc, Experiment)) from None
    experiment._source = source
    expand(experiment)  # every cell must be valid before anything runs
    return experiment


def override(experiment: Experiment, path: str, value: Any, origin: str) -> Experiment:
    """`experiment` with the dotted `path` set to `value` (e.g. from the command line `origin`),
    validated as if the file said so; SpecError naming `origin` when the result is invalid."""
    raw = experiment.model_dump(exclude_unset=True)  # unset stays unset (clients.py)
    source = experiment._source
    try:
        apply_override(raw, path, value)
    except ValueError as exc:  # no such field: one line, with the nearest field's name
        reason = f"{exc} (set by {origin})"
        raise SpecError(f"{source}: {reason}", source=source, problems=[(path, reason)]) from None
    try:
        return parse_experiment(raw, source)
    except SpecError as exc:
        problems = [(p, f"{reason} (set by {origin})") for p, reason in exc.problems]
        if not problems:
            raise
        raise spec_error(source, problems) from None
