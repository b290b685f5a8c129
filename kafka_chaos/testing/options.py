"""What a test asks of its cluster and topic: the `kafka_chaos` marker and the
`--kafka-chaos-*` command-line options (with their ini twins), merged into one ChaosOptions.

Pure: no Docker, no Kafka client. Each option is a field of the experiment model
(harness/experiment/model.py, which holds the defaults and the checks); an option left out
keeps the experiment's default, and the experiment's validation judges the values (see
`document`, and `option_of` to name the option a problem is about).
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Final, Literal

from harness.experiment.problems import RawDocument
from harness.limits import MAX_NAME, shown
from kafka_chaos.testing.errors import ChaosUsageError

__all__ = [
    "CLI_OPTIONS",
    "MARKER",
    "OPTION_PATHS",
    "ChaosOptions",
    "MarkerArgs",
    "experiment_name",
    "flag_of",
    "ini_of",
    "option_of",
    "resolve_options",
]

MARKER: Final = "kafka_chaos"
Kind = Literal["text", "whole", "flag", "number", "mapping"]
Scalar = str | int | float | bool
# A config mapping (broker or topic settings) kept hashable: sorted (key, value) pairs.
Settings = tuple[tuple[str, Scalar], ...]


@dataclass(frozen=True)
class ChaosOptions:
    """A test's cluster and topic as the marker and options ask for them; None: the
    experiment's default (Kafka 4.3.1 or KCHAOS_KAFKA_VERSION, 3 brokers, its version's mode,
    a topic of 3 partitions with 3 replicas and min.insync.replicas=2, seed 42)."""

    version: str | None = None  # Kafka release of the locally built broker image
    image: str | None = None  # a prebuilt broker image instead, e.g. apache/kafka:4.3.1
    mode: str | None = None  # kraft, kraft-dedicated or zookeeper
    brokers: int | None = None
    zookeeper_nodes: int | None = None  # zookeeper mode: 1 or 3 servers
    broker_config: Settings | None = None  # server.properties settings of every broker
    partitions: int | None = None
    replication_factor: int | None = None
    min_insync_replicas: int | None = None
    unclean_leader_election: bool | None = None
    topic_config: Settings | None = None  # other topic settings, e.g. retention.ms
    seed: int | None = None  # seeds the choice among followers (target `follower`, `random`)
    final_heal_timeout_s: float | None = None  # judge(): how long to wait for a full ISR

    def document(self, name: str) -> RawDocument:
        """The experiment document (as an experiment file would say it) named `name`, holding
        the options that were given."""
        doc: RawDocument = {"name": name}
        for option in fields(self):
            value = getattr(self, option.name)
            if value is None:
                continue
            if KINDS[option.name] == "mapping":
                value = dict(value)
            *sections, key = OPTION_PATHS[option.name].split(".")
            target = doc
            for section in sections:
                target = target.setdefault(section, {})
            target[key] = value
        return doc


# Each option: the experiment field it sets, and its kind.
OPTIONS: Final[dict[str, tuple[str, Kind]]] = {
    "version": ("kafka.version", "text"),
    "image": ("kafka.image", "text"),
    "mode": ("kafka.mode", "text"),
    "brokers": ("kafka.brokers", "whole"),
    "zookeeper_nodes": ("kafka.zookeeper_nodes", "whole"),
    "broker_config": ("kafka.broker_config", "mapping"),
    "partitions": ("topic.partitions", "whole"),
    "replication_factor": ("topic.replication_factor", "whole"),
    "min_insync_replicas": ("topic.min_insync_replicas", "whole"),
    "unclean_leader_election": ("topic.unclean_leader_election", "flag"),
    "topic_config": ("topic.config", "mapping"),
    "seed": ("seed", "whole"),
    "final_heal_timeout_s": ("faults.final_heal_timeout_s", "number"),
}
OPTION_PATHS: Final[dict[str, str]] = {option: path for option, (path, _) in OPTIONS.items()}
KINDS: Final[dict[str, Kind]] = {option: kind for option, (_, kind) in OPTIONS.items()}
# The options the command line and the ini file also set (for the whole session).
CLI_OPTIONS: Final[dict[str, str]] = {
    "version": "Kafka release of the broker image, e.g. 3.9.1 (default 4.3.1)",
    "image": "prebuilt broker image instead of the locally built one",
    "mode": "kraft, kraft-dedicated or zookeeper (default: the version's)",
    "brokers": "brokers in the cluster, 3 to 5 (default 3)",
}
_WHOLE = re.compile(r"^[+-]?[0-9]+$")


def flag_of(option: str) -> str:
    """The command-line flag of an option: --kafka-chaos-<option, dashed>."""
    return f"--kafka-chaos-{option.replace('_', '-')}"


def ini_of(option: str) -> str:
    """The ini key of an option: kafka_chaos_<option>."""
    return f"kafka_chaos_{option}"


# The marker's arguments: its positional arguments and its keywords.
MarkerArgs = tuple[Sequence[Any], Mapping[str, Any]]


def resolve_options(
    command_line: Mapping[str, str | None], markers: Sequence[MarkerArgs]
) -> ChaosOptions:
    """The options in force for one test: the command line's (or ini's) text values, then the
    `kafka_chaos` markers from the farthest (module) to the closest (the test), each
    overriding what came before; a keyword given None counts as not given. ChaosUsageError
    names an unknown option or a value of the wrong kind, and where it was given."""
    values: dict[str, Any] = {}
    for option, text in command_line.items():
        if text is not None and text.strip():
            values[option] = _from_text(option, text.strip())
    for args, kwargs in reversed(markers):
        if args:
            raise ChaosUsageError(
                f"@pytest.mark.{MARKER} takes keywords only (got {shown(tuple(args))}); "
                f'write e.g. @pytest.mark.{MARKER}(version="3.9.1", brokers=3)'
            )
        for option, value in kwargs.items():
            _known(option)
            if value is not None:
                values[option] = _from_marker(option, value)
    return ChaosOptions(**values)


def _known(option: str) -> None:
    if option in KINDS:
        return
    close = difflib.get_close_matches(option, KINDS, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise ChaosUsageError(
        f"@pytest.mark.{MARKER}: unknown option {shown(option)}; {hint}it takes {', '.join(KINDS)}"
    )


def _from_text(option: str, text: str) -> Any:
    """A command-line or ini value: text, or a whole number for the numeric options."""
    if KINDS[option] != "whole":
        return text
    if not _WHOLE.match(text):
        raise ChaosUsageError(
            f"{flag_of(option)} (ini {ini_of(option)}): {shown(text)} is not a whole number"
        )
    return int(text)


def _from_marker(option: str, value: Any) -> Any:
    """A marker keyword's value, checked for its kind (the experiment checks its range)."""
    kind = KINDS[option]
    where = f"@pytest.mark.{MARKER}({option}=...)"
    if kind == "text":
        if not isinstance(value, str) or not value.strip():
            example = '"3.9.1"' if option == "version" else '"..."'
            raise ChaosUsageError(
                f"{where}: must be a non-empty string (got {shown(value)}); "
                f"write it quoted, e.g. {option}={example}"
            )
        return value.strip()
    if kind == "whole":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ChaosUsageError(f"{where}: must be a whole number (got {shown(value)})")
        return value
    if kind == "flag":
        if not isinstance(value, bool):
            raise ChaosUsageError(f"{where}: must be True or False (got {shown(value)})")
        return value
    if kind == "number":
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise ChaosUsageError(f"{where}: must be a finite number (got {shown(value)})")
        return value
    return _settings(where, value)


def _settings(where: str, value: Any) -> Settings:
    """A mapping of setting names to scalars, as sorted pairs."""
    if not isinstance(value, Mapping):
        raise ChaosUsageError(
            f"{where}: must be a mapping of setting names to values (got {shown(value)}), "
            'e.g. {"retention.ms": 60000}'
        )
    pairs = []
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, Scalar):
            raise ChaosUsageError(
                f"{where}: {shown(key)}: {shown(item)}: names must be strings and values "
                "strings, numbers or booleans"
            )
        pairs.append((key, item))
    return tuple(sorted(pairs))


def option_of(path: str) -> str | None:
    """The option that sets the experiment field at `path` (or a field inside it), if any."""
    for option, field_path in OPTION_PATHS.items():
        if path == field_path or path.startswith(f"{field_path}."):
            return option
    return None


_UNSAFE = re.compile(r"[^a-z0-9_-]+")


def experiment_name(test_name: str) -> str:
    """An experiment name (lowercase letters, digits, '-' and '_', at most MAX_NAME
    characters) from a test's name, e.g. test_acks[all-3] -> test_acks-all-3."""
    name = _UNSAFE.sub("-", test_name.lower()).strip("-")[:MAX_NAME].rstrip("-")
    return name or "test"
