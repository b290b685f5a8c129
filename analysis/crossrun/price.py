"""The price of safety of a cell: its repetitions' availability figures folded."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from analysis.model.availability import Availability


@dataclass(frozen=True)
class CellPrice:
    """The price of safety over a cell's measured repetitions (those with an Availability).

    Each figure is None when no repetition was measured (or, for the heal figure, none healed
    during its workload).
    """

    measured: int  # repetitions with an Availability
    repetitions: int  # all repetitions of the cell
    longest_partition_gap_s: float | None  # max over repetitions and partitions
    longest_gap_s: float | None  # max over repetitions of the all-partition gap
    failed: int | None  # sum over repetitions
    indeterminate: int | None  # sum over repetitions
    # max over repetitions and heals during the workload of HealRecovery.every_partition_s
    first_ack_after_heal_s: float | None
    # heals during the workload after which some partition never acknowledged again
    heals_without_ack: int = 0
    unmeasured: tuple[str, ...] = ()  # why the others were not

    def as_json(self) -> dict[str, object]:
        """The report.json form."""
        return {**asdict(self), "unmeasured": list(self.unmeasured)}


def cell_price(
    availabilities: Sequence[Availability | None], problems: Sequence[str] = ()
) -> CellPrice:
    """Fold the repetitions' figures: maxima of the gaps and heal times, sums of the sends."""
    measured = [a for a in availabilities if a is not None]
    if not measured:
        return CellPrice(0, len(availabilities), None, None, None, None, None, 0, tuple(problems))
    worst = [a.longest_partition_gap for a in measured]
    heals = [h for a in measured for h in a.heals if h.during_workload]
    recovered = [h.every_partition_s for h in heals if h.every_partition_s is not None]
    return CellPrice(
        measured=len(measured),
        repetitions=len(availabilities),
        longest_partition_gap_s=_max(p.longest_gap.seconds for p in worst if p is not None),
        longest_gap_s=_max(a.longest_gap.seconds for a in measured if a.longest_gap),
        failed=sum(a.failed for a in measured),
        indeterminate=sum(a.indeterminate for a in measured),
        first_ack_after_heal_s=_max(recovered),
        heals_without_ack=len(heals) - len(recovered),
        unmeasured=tuple(problems),
    )


def _max(values: Iterable[float]) -> float | None:
    """The largest value; None for none."""
    return max(values, default=None)
