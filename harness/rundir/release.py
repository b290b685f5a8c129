"""An Apache Kafka release number: the version a run records (spec.json's kafka_version) and
every version fact (harness.platform.versions) and known bug (analysis.judge.known_bugs) is
keyed on."""

from __future__ import annotations

import re
from dataclasses import dataclass

_VERSION = re.compile(r"^\d+(\.\d+){2,3}$")


class VersionError(ValueError):
    """A version string the harness cannot use; the message names the fix."""


@dataclass(frozen=True, order=True)
class KafkaVersion:
    """An Apache Kafka release number, ordered as releases are (0.10.2.2 < 0.11.0.3 < 4.3.1)."""

    key: tuple[int, int, int, int]  # padded to four parts, so 3.3 == 3.3.0 when ordering
    text: str

    @classmethod
    def parse(cls, text: str) -> KafkaVersion:
        """The release `text` names (e.g. "0.10.2.2", "3.9.1"); VersionError if malformed."""
        text = str(text).strip()
        if not _VERSION.match(text):
            raise VersionError(
                f"{text!r} is not an Apache Kafka release number. Fix: write it as on Maven "
                f"Central, e.g. 0.10.2.2, 2.8.2 or 4.3.1."
            )
        parts = tuple(int(part) for part in text.split("."))
        return cls((*parts, 0, 0, 0, 0)[:4], text)  # type: ignore[arg-type]

    def __str__(self) -> str:
        return self.text
