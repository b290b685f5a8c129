"""The cross-run summary: over every repetition of every experiment, per configuration × fault
× Kafka version, how likely a repetition is to lose acknowledged data (with a Wilson interval),
how much it loses, and which single setting changes that.

Pure: built from RunResults and their repetition verdicts, which the one Spark job and the
judge already produced; nothing here reads a run directory.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Final

from analysis.judge.cell import is_count
from analysis.judge.outcomes import CellVerdict
from analysis.model.anomalies import CountName
from analysis.model.results import RunResult
from harness.rundir.config import CellConfig, setting_text

__all__ = [
    "CONFIDENCE_Z",
    "SETTINGS",
    "CrossRunSummary",
    "GroupSummary",
    "LossRateSpread",
    "SettingEffect",
    "WilsonInterval",
    "cross_run_summary",
    "wilson_interval",
]

CONFIDENCE_Z: Final = 1.959964  # two-sided 95 % of the standard normal
# The CellConfig fields that make a configuration; fault_class and kafka_version are axes of
# their own in the summary, and the workload's rate and size are not a setting that changes
# what is promised. The client, the fsync setting and the consumers' and transactions' ways
# are: a kept and a rewound transactional reader, say, must not share a group.
SETTINGS: Final = (
    "acks",
    "min_insync_replicas",
    "unclean_leader_election",
    "enable_idempotence",
    "max_in_flight",
    "replication_factor",
    "partitions",
    "kafka_mode",
    "fsync_each_message",
    "client",
    "consumers",
    "consumer_commit",
    "transactions",
    "txn_reader_rewinds",
)
NOT_RECORDED: Final = "-"


@dataclass(frozen=True)
class WilsonInterval:
    """The Wilson score interval of a binomial proportion (lossy repetitions / repetitions)."""

    low: float
    high: float

    def overlaps(self, other: WilsonInterval) -> bool:
        """True when the two intervals share a point."""
        return self.low <= other.high and other.low <= self.high


def wilson_interval(successes: int, trials: int, z: float = CONFIDENCE_Z) -> WilsonInterval:
    """The Wilson score interval, 0 <= low <= successes/trials <= high <= 1 exactly (low is 0
    only at 0 of n, high is 1 only at n of n); (0, 1) for no trials, where nothing is known.

    Unlike the normal approximation it stays inside [0, 1] and is not empty at 0 of n or n of
    n, which is where chaos results usually sit.
    """
    if trials <= 0:
        return WilsonInterval(0.0, 1.0)
    if not 0 <= successes <= trials:
        raise ValueError(f"{successes} successes of {trials} trials: need 0 <= successes <= trials")
    p = successes / trials
    z2 = z * z
    centre = (p + z2 / (2 * trials)) / (1 + z2 / trials)
    half = z * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials)) / (1 + z2 / trials)
    # In exact arithmetic low <= p <= high, with low = 0 at 0 of n and high = 1 at n of n; in
    # floating point both ends can land 1e-16 on the wrong side, so they are pinned there.
    low = 0.0 if successes == 0 else min(max(0.0, centre - half), p)
    high = 1.0 if successes == trials else max(min(1.0, centre + half), p)
    return WilsonInterval(low, high)


@dataclass(frozen=True)
class LossRateSpread:
    """The loss rate (loss / acked) of the repetitions that acknowledged something."""

    min: float
    median: float
    max: float


# A group's settings: (setting, value) in SETTINGS order, values as _text shows them.
Configuration = tuple[tuple[str, str], ...]
# What groups repetitions: (configuration, fault, Kafka version).
GroupKey = tuple[Configuration, str, str]


@dataclass(frozen=True)
class GroupSummary:
    """One configuration × fault × version over all its repetitions, from any experiment."""

    configuration: Configuration
    fault: str
    kafka_version: str
    experiments: tuple[str, ...]
    repetitions: int
    counted: int  # repetitions with counts (complete reconciliation and something acked)
    lossy: int  # counted repetitions that lost at least one acknowledged message
    loss_probability: float | None  # lossy / counted
    interval: WilsonInterval
    loss_rate: LossRateSpread | None
    verdicts: Mapping[str, int]  # repetition verdict → repetitions

    @property
    def label(self) -> str:
        """The configuration as `setting=value` words, leaving out the settings the runs did not
        record (a run without consumers has no commit mode)."""
        return " ".join(f"{k}={v}" for k, v in self.configuration if v != NOT_RECORDED)


@dataclass(frozen=True)
class SettingEffect:
    """Two groups equal but for one setting whose loss-probability intervals do not overlap."""

    setting: str
    fault: str
    kafka_version: str
    context: tuple[tuple[str, str], ...]  # the other settings, equal in both groups
    values: tuple[str, str]  # the setting's value in the first and the second group
    probabilities: tuple[float, float]
    intervals: tuple[WilsonInterval, WilsonInterval]


@dataclass(frozen=True)
class CrossRunSummary:
    """Every group, and the single settings that change the outcome."""

    groups: tuple[GroupSummary, ...]
    effects: tuple[SettingEffect, ...]
    decisive_settings: tuple[str, ...]  # settings with at least one effect, most effects first


def cross_run_summary(
    results: Sequence[RunResult], cells: Sequence[CellVerdict] = ()
) -> CrossRunSummary:
    """Group every repetition by configuration, fault and Kafka version, and compare groups."""
    verdict_of = {r.run_dir: r.verdict.value for c in cells for r in c.repetitions}
    grouped: dict[GroupKey, list[RunResult]] = defaultdict(list)
    for result in results:
        grouped[_group_key(result.config)].append(result)
    groups = tuple(
        _group(key, members, verdict_of) for key, members in sorted(grouped.items(), key=_order)
    )
    effects = tuple(_effects(groups))
    tally: dict[str, int] = defaultdict(int)
    for effect in effects:
        tally[effect.setting] += 1
    decisive = tuple(sorted(tally, key=lambda s: (-tally[s], SETTINGS.index(s))))
    return CrossRunSummary(groups, effects, decisive)


def _text(value: object) -> str:
    """A setting's value as the summary shows it ("-" when the run did not record it)."""
    return NOT_RECORDED if value is None else setting_text(value)


def _group_key(config: CellConfig) -> GroupKey:
    """(configuration, fault, version) of a repetition's config."""
    configuration = tuple((name, _text(getattr(config, name))) for name in SETTINGS)
    return configuration, _text(config.fault_class), _text(config.kafka_version)


def _order(item: tuple[GroupKey, list[RunResult]]) -> tuple[str, str, Configuration]:
    """Groups by fault, then version, then configuration."""
    (configuration, fault, version), _ = item
    return fault, version, configuration


def _group(key: GroupKey, members: list[RunResult], verdict_of: Mapping[str, str]) -> GroupSummary:
    """The summary of one group's repetitions."""
    configuration, fault, version = key
    counts = [pair for pair in map(_loss_of_acked, members) if pair is not None]
    rates = [loss / acked for loss, acked in counts]
    counted = len(counts)
    # From the integers, not the rates: whether a repetition lost is not a float comparison.
    lossy = sum(1 for loss, _ in counts if loss > 0)
    verdicts: dict[str, int] = defaultdict(int)
    for member in members:
        verdicts[verdict_of.get(member.run_dir, "UNJUDGED")] += 1
    return GroupSummary(
        configuration=configuration,
        fault=fault,
        kafka_version=version,
        experiments=tuple(sorted({m.experiment for m in members})),
        repetitions=len(members),
        counted=counted,
        lossy=lossy,
        loss_probability=lossy / counted if counted else None,
        interval=wilson_interval(lossy, counted),
        loss_rate=LossRateSpread(min(rates), statistics.median(rates), max(rates))
        if rates
        else None,
        verdicts=dict(sorted(verdicts.items())),
    )


def _loss_of_acked(result: RunResult) -> tuple[int, int] | None:
    """(loss, acked) of a repetition with counts and something acked; None otherwise, and for
    counts that are not whole numbers within 0 <= loss <= acked (a malformed results.json)."""
    loss = result.loss
    acked = None if result.counts is None else result.counts.get(CountName.ACKED)
    if not (is_count(loss) and is_count(acked)) or not loss <= acked or acked == 0:
        return None
    return loss, acked


def _effects(groups: Sequence[GroupSummary]) -> list[SettingEffect]:
    """Every pair of counted groups (same fault and version) that differ in exactly one setting
    and whose intervals do not overlap: that setting alone changed the outcome."""
    effects = []
    for a, b in combinations([g for g in groups if g.counted], 2):
        if (a.fault, a.kafka_version) != (b.fault, b.kafka_version):
            continue
        differing = [
            i
            for i, (x, y) in enumerate(zip(a.configuration, b.configuration, strict=True))
            if x != y
        ]
        if len(differing) != 1 or a.interval.overlaps(b.interval):
            continue
        index = differing[0]
        context = tuple(kv for i, kv in enumerate(a.configuration) if i != index)
        effects.append(
            SettingEffect(
                setting=a.configuration[index][0],
                fault=a.fault,
                kafka_version=a.kafka_version,
                context=context,
                values=(a.configuration[index][1], b.configuration[index][1]),
                probabilities=(a.loss_probability or 0.0, b.loss_probability or 0.0),
                intervals=(a.interval, b.interval),
            )
        )
    return effects
