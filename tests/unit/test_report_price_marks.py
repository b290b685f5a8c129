"""The price of safety on the timeline, at its edges: a one-partition stall shorter than a
second is still marked, and a heal that happened outside the workload does not stop the heals
after it from being drawn. Read back from the figure timeline_svg draws."""

from __future__ import annotations

from dataclasses import replace

from analysis.model.availability import Gap, HealRecovery, PartitionAvailability
from tests.unit.report_runs import us
from tests.unit.test_report_charts import _availability, _drawn, _plain


def test_a_partition_stall_shorter_than_a_second_is_marked() -> None:
    short = _availability(
        partitions=(PartitionAvailability(0, 5, 0, 0, Gap(us(2), us(2.5), 2.0, 2.5)),),
        heals=(),
    )
    top, _ = _drawn(replace(_plain([{}] * 5), availability=short), []).axes
    (bar,) = [p for p in top.patches if p.get_zorder() == 4]
    assert (bar.get_x(), bar.get_x() + bar.get_width()) == (2.0, 2.5)
    (label,) = top.texts
    assert (label.get_text(), label.get_position()) == (" p0 stall 0.5 s", (2.0, 0.05))


def test_a_heal_outside_the_workload_leaves_the_later_heals_marked() -> None:
    heals = (
        HealRecovery(1, "pause", us(-2), -2.0, False, 0.5, {0: 0.5}),  # before the first send
        HealRecovery(2, "pause", us(4), 4.0, True, 1.5, {0: 1.5}),
        HealRecovery(3, "pause", us(6), 6.0, True, None, {0: None}),  # never recovered
        HealRecovery(4, "pause", us(8), 8.0, True, 0.25, {0: 0.25}),
    )
    top, _ = _drawn(replace(_plain([{}] * 12), availability=_availability(heals=heals)), []).axes
    drawn = [(list(line.get_xdata()), line.get_marker()) for line in top.lines]
    assert drawn == [([4.0, 5.5], "None"), ([5.5], "v"), ([8.0, 8.25], "None"), ([8.25], "v")]
