"""What the attribution found: the place of each missing acknowledged message (the types;
analysis.checks.attribution searches the kept segments). Places are defined in checks/attribution's
docstring."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Final

MAX_EXAMPLES: Final = 20
SEGMENT_SUFFIX: Final = ".log"  # Kafka's name for a segment's record file
NOT_TRUNCATION: Final = (
    "a message that only a replica held, and that replica later truncated, counts as on no "
    "broker's disk: "
    "the final logs cannot show it was ever on a disk"
)


class Place(StrEnum):
    """Where a missing acknowledged message was found in the kept segments."""

    ON_NO_DISK = "on_no_disk"
    ON_DISK_NOT_SERVED = "on_disk_not_served"
    SEGMENTS_UNAVAILABLE = "segments_unavailable"
    NOT_EXAMINED = "not_examined"


@dataclass(frozen=True)
class MissingMessage:
    """An acknowledged message the read-back lacks, with where it was acknowledged (msg_id None:
    the journal rows without one, which the checker counts as one message)."""

    msg_id: int | None
    partition: int | None
    offset: int | None


@dataclass(frozen=True)
class Holding:
    """One broker's log record of a missing message."""

    broker: int
    partition: int
    offset: int
    beyond_high_watermark: bool | None  # None: the read-back recorded no high watermark


@dataclass(frozen=True)
class PlacedMessage:
    """An example: a missing message, its place, and the log records that still hold it."""

    message: MissingMessage
    place: Place
    holders: tuple[Holding, ...]


@dataclass(frozen=True)
class Attribution:
    """Counts per place (summing to the loss), examples, and what limits the evidence."""

    counts: dict[str, int]
    examples: tuple[PlacedMessage, ...]
    note: str
    beyond_served: int = 0  # on_disk_not_served held only at or past the high watermark

    def as_dict(self) -> dict[str, object]:
        """The results.json form."""
        return {
            "counts": dict(self.counts),
            "examples": [
                {
                    **asdict(ex.message),
                    "place": str(ex.place),
                    "holders": [asdict(h) for h in ex.holders],
                }
                for ex in self.examples
            ],
            "note": self.note,
            "beyond_served": self.beyond_served,
        }
