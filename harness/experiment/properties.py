"""A user's own client and topic settings, as Java property files (`producer.properties`,
`topic.properties`) and `--set key=value`: read, then mapped onto an experiment's fields.

A setting the harness models has its field (acks onto producer.acks, min.insync.replicas onto
topic.min_insync_replicas, ...), so the cell is judged by the file's value; any other goes
into producer.config or topic.config as written, where validation checks it as it checks the
file's own (a key the client does not know is refused with the nearest name). Connection and
serialization settings are the harness's: they are left out, and said so.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.experiment.fields import PRODUCER_KEY_FIELDS, TOPIC_KEY_FIELDS
from harness.rundir.provenance import SettingFrom

__all__ = ["Setting", "harness_keys", "producer_settings", "read_properties", "topic_settings"]

# The experiment paths of the settings the file models as fields, by their client names.
PRODUCER_FIELDS = {key: f"producer.{field}" for key, field in PRODUCER_KEY_FIELDS.items()}
TOPIC_FIELDS = {key: f"topic.{field}" for key, field in TOPIC_KEY_FIELDS.items()}
# Where the cluster is and how records are encoded: the harness sets these itself.
HARNESS_KEYS = frozenset(
    {"bootstrap.servers", "metadata.broker.list", "key.serializer", "value.serializer",
     "client.id", "transactional.id"}
)  # fmt: skip
_SEPARATOR = re.compile(r"\s*[=:]\s*|\s+")


@dataclass(frozen=True)
class Setting:
    """One setting to apply: the experiment path it goes to, its value, and where it came from
    (a property file and its key, or `--set` without one)."""

    path: str
    value: Any
    source: str
    key: str | None = None

    @property
    def origin(self) -> str:
        """Where it came from, as problems name it: `producer.properties: acks`, `--set PATH`."""
        if self.key is None:
            return f"{self.source} {self.path}"
        return f"{self.source}: {self.key}"

    def recorded(self) -> SettingFrom:
        """The setting as provenance.json records it (what the report shows)."""
        value = json.dumps(self.value, default=str)
        return SettingFrom(field=self.path, value=value, source=self.source, key=self.key)


def read_properties(path: Path) -> dict[str, str]:
    """A Java property file's key-value pairs (comments `#` or `!`, `key=value`, `key: value`
    or `key value`, lines continued with a trailing backslash); OSError when unreadable."""
    pairs: dict[str, str] = {}
    pending = ""
    for raw in path.read_text().splitlines():
        line = pending + raw.lstrip()
        pending = ""
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        if not line or line[0] in "#!":
            continue
        match = _SEPARATOR.search(line)
        key, value = (line, "") if match is None else (line[: match.start()], line[match.end() :])
        pairs[key] = value.strip()
    return pairs


def harness_keys(pairs: dict[str, str]) -> list[str]:
    """The keys of `pairs` that the harness sets itself (left out when applied)."""
    return sorted(key for key in pairs if key in HARNESS_KEYS)


def producer_settings(pairs: dict[str, str], origin: str) -> list[Setting]:
    """A producer property file's settings as experiment paths: the modelled ones onto their
    fields, the rest into producer.config, the harness's own left out."""
    return _mapped(pairs, PRODUCER_FIELDS, "producer.config", origin)


def topic_settings(pairs: dict[str, str], origin: str) -> list[Setting]:
    """A topic property file's settings as experiment paths (topic.config for the rest)."""
    return _mapped(pairs, TOPIC_FIELDS, "topic.config", origin)


def _mapped(pairs: dict[str, str], fields: dict[str, str], rest: str, origin: str) -> list[Setting]:
    settings = []
    for key, value in pairs.items():
        if key in HARNESS_KEYS:
            continue
        path = fields.get(key, f"{rest}.{key}")
        settings.append(Setting(path, _typed(value), origin, key))
    return settings


def _typed(value: str) -> Any:
    """A property's text as the experiment file would hold it: numbers and true/false typed,
    `all` and other words kept as text (validation then checks them per field)."""
    lowered = value.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for parse in (int, float):  # 3 is an int, 0.5 and 1e3 floats
        try:
            return parse(value)
        except ValueError:
            pass
    return value
