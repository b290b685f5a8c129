"""The report's typed views, each formatted value spelled out: counts and rates, the
configuration line, the one-line outcome, the price of safety, the cross-run summary's rows,
provenance lines, and a repetition's sentences (sensitivity, attribution, client, members)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.crossrun.price import CellPrice
from analysis.crossrun.summary import (
    CrossRunSummary,
    GroupSummary,
    LossRateSpread,
    SettingEffect,
    WilsonInterval,
)
from analysis.judge.outcomes import CountStats, Verdict
from analysis.model.attribution import Attribution, Place
from analysis.model.results import Sensitivity
from analysis.report import views
from analysis.report.cells import attribution_view, client_text, members_text, sensitivity_text
from analysis.report.matrix import MatrixValue, price_texts
from analysis.report.provenance import provenance_views
from analysis.report.summary_view import summary_json, summary_view
from harness.rundir.config import CellConfig
from harness.rundir.provenance import BrokerImageUsed, ExperimentProvenance, Provenance
from tests.unit.report_runs import AP, CP, judge_all, result


@pytest.mark.parametrize(
    ("stat", "counted", "parts", "text"),
    [
        (None, 3, ("—", ""), "—"),
        (CountStats(12, 12, 12, 12), 1, ("12", ""), "12"),
        (CountStats(1234.0, 1000, 1468, 2468), 2, ("1,234", "1,000–1,468"), "1,234 (1,000–1,468)"),
        (CountStats(1.5, 0, 3, 3), 2, ("1.5", "0–3"), "1.5 (0–3)"),
        (CountStats(1.5, 0, 3, 3), 1, ("1.5", ""), "1.5"),  # one counted: no range
        (CountStats(2.0, 2, 2, 4), 2, ("2", ""), "2"),  # agreeing repetitions: no range
        (CountStats(1234.25, 1000, 1468, 1), 4, ("1,234.2", "1,000–1,468"), None),
    ],
)
def test_a_count_is_its_mean_with_the_range_when_repetitions_disagree(
    stat: CountStats | None, counted: int, parts: tuple[str, str], text: str | None
) -> None:
    assert views.stat_parts(stat, counted) == parts
    if text is not None:
        assert views.with_range(*views.stat_parts(stat, counted)) == text


def test_a_rate_is_a_percentage_and_none_is_a_dash() -> None:
    assert views.format_rate(None) == "—"
    assert views.format_rate(0.0) == "0 %"
    assert views.format_rate(0.000789) == "0.0789 %"
    assert views.format_rate(1.0) == "100 %"


def test_the_configuration_line_names_the_settings_that_decide_the_guarantee() -> None:
    config = CellConfig.read({**CP, "kafka_mode": "zookeeper", "fsync_each_message": True})
    assert views.config_parts(config) == [
        "acks=all",
        "min.insync=2",
        "unclean=off",
        "idempotence=on",
        "in-flight=5",
        "RF=3",
        "partitions=2",
        "fault=leader-kill",
        "Kafka=3.9.0",
        "mode=zookeeper",
        "fsync=each message",
    ]
    unclean = CellConfig.read({"unclean_leader_election": True, "fsync_each_message": False})
    assert views.config_summary(unclean) == "unclean=on"
    assert views.config_summary(CellConfig.read({})) == ""
    assert views.config_summary(CellConfig.read({"acks": "1", "partitions": 6})) == (
        "acks=1 · partitions=6"
    )


def _cells(*verdicts: Verdict) -> list[Any]:
    (cell,) = judge_all([result("c", CP, 0)], {})
    return [replace(cell, verdict=v) for v in verdicts]


@pytest.mark.parametrize(
    ("verdicts", "sentence"),
    [
        ((), "Inconclusive: no results to judge"),
        (
            (Verdict.PASS,),
            "The documented guarantees held in all 1 cells. No acknowledged message was lost.",
        ),
        (
            (Verdict.PASS, Verdict.VIOLATION, Verdict.VIOLATION, Verdict.UNKNOWN),
            "Failed (--fail-on violation,unknown): 2 of 4 cells violate the documented "
            "guarantees; 1 of 4 cells could not be judged. No acknowledged message was lost.",
        ),
        (
            (Verdict.PASS, Verdict.UNKNOWN, Verdict.UNKNOWN),
            "Inconclusive: 2 of 3 cells could not be judged. No acknowledged message was lost.",
        ),
        (
            (Verdict.KNOWN_BUG, Verdict.PASS, Verdict.EXPECTED_LOSS),
            "The documented guarantees held in 2 of 3 cells; 1 show a known bug of their Kafka "
            "release or client (not failing: not named in --fail-on). No acknowledged message "
            "was lost.",
        ),
        (
            (Verdict.NOT_PROVOKED, Verdict.EXPECTED_LOSS),
            "The documented guarantees held in all 2 cells. No acknowledged message was lost.",
        ),
    ],
)
def test_the_outcome_sentence_follows_the_exit_code(
    verdicts: tuple[Verdict, ...], sentence: str
) -> None:
    assert views.verdict_summary(_cells(*verdicts)) == sentence


def _lossy(cell: Any, loss: int) -> Any:
    """The cell with `loss` acknowledged messages counted lost over its repetitions."""
    counts = {**cell.stats.counts, "loss": CountStats(loss, loss, loss, loss)}
    return replace(cell, stats=replace(cell.stats, counts=counts))


def test_the_headline_says_loss_the_documentation_allows_is_loss() -> None:
    lossy, clean = _cells(Verdict.EXPECTED_LOSS, Verdict.PASS)
    sentence = views.verdict_summary([_lossy(lossy, 1200), clean])
    assert sentence == (
        "The documented guarantees held in all 2 cells. Acknowledged messages were lost in 1 of "
        "2 cells (1,200 messages; all where the documentation allows it)."
    )


def test_a_verdict_named_in_fail_on_fails_the_headline_with_the_flag() -> None:
    cells = _cells(Verdict.NOT_PROVOKED, Verdict.PASS)
    gate = frozenset({Verdict.VIOLATION, Verdict.NOT_PROVOKED})
    assert views.verdict_summary(cells, gate).startswith(
        "Failed (--fail-on violation,not-provoked): 1 of 2 cells provoked no loss where loss "
        "is allowed (faults too weak)."
    )


@settings(max_examples=200, deadline=None)
@given(
    verdicts=st.lists(st.sampled_from(list(Verdict)), max_size=6),
    losses=st.lists(st.integers(0, 5), min_size=6, max_size=6),
    gate=st.frozensets(st.sampled_from([v for v in Verdict if v != Verdict.PASS]), min_size=1),
)
def test_the_headline_agrees_with_the_exit_code_and_the_loss(
    verdicts: list[Verdict], losses: list[int], gate: frozenset[Verdict]
) -> None:
    """Oracle: the first words follow exit_code under the gate; loss is said iff some cell
    counted a lost message, with their sum."""
    cells = [_lossy(c, n) for c, n in zip(_cells(*verdicts), losses, strict=False)]
    sentence = views.verdict_summary(cells, gate)
    code = views.exit_code(cells, fail_on=gate)
    opening = {0: "The documented guarantees held", 1: "Failed (", 2: "Inconclusive: "}[code]
    assert sentence.startswith(opening)
    total = sum(losses[: len(cells)])
    if cells:
        said = f"({total:,} message;" if total == 1 else f"({total:,} messages;"
        assert (said in sentence) == (total > 0)
        assert ("No acknowledged message was lost" in sentence) == (total == 0)


def test_every_verdict_is_counted_in_order() -> None:
    counts = views.verdict_counts(_cells(Verdict.PASS, Verdict.UNKNOWN, Verdict.PASS))
    assert list(counts.items()) == [
        ("PASS", 2),
        ("VIOLATION", 0),
        ("EXPECTED-LOSS", 0),
        ("KNOWN-BUG", 0),
        ("NOT-PROVOKED", 0),
        ("UNKNOWN", 1),
    ]


def test_a_cell_id_and_a_verdict_class_are_safe_in_html() -> None:
    (cell,) = judge_all([{**result("a b/c--d ü", CP, 0), "experiment": "-x.y"}], {})
    assert views.slug(cell) == "cell-x-y-a-b-c--d"
    assert views.css_class(Verdict.EXPECTED_LOSS) == "v-expected-loss"
    assert views.css_class(Verdict.PASS) == "v-pass"


def _price(**changes: Any) -> CellPrice:
    base: dict[str, Any] = {
        "measured": 2,
        "repetitions": 2,
        "longest_partition_gap_s": 1234.56,
        "longest_gap_s": 0.04,
        "failed": 1234,
        "indeterminate": 0,
        "first_ack_after_heal_s": 2.25,
    }
    return CellPrice(**(base | changes))


def test_the_price_columns_say_what_was_measured() -> None:
    assert price_texts(_price()) == (
        MatrixValue("1,234.6", "", ""),
        MatrixValue("0.0", "", ""),
        MatrixValue("1,234", "", "notable"),
        MatrixValue("2.2", "", ""),
    )
    assert price_texts(
        _price(
            measured=1,
            repetitions=3,
            unmeasured=("r1", "r2"),
            failed=0,
            indeterminate=1500,
            heals_without_ack=2,
        )
    ) == (
        MatrixValue("1,234.6", "1 of 3 reps", ""),
        MatrixValue("0.0", "", ""),
        MatrixValue("0", "1,500 indeterminate", ""),
        MatrixValue("2.2", "2 heals with no ack after", "notable"),
    )
    assert price_texts(
        _price(
            measured=0,
            unmeasured=("a", "b"),
            longest_partition_gap_s=None,
            longest_gap_s=None,
            failed=None,
            indeterminate=None,
            first_ack_after_heal_s=None,
            heals_without_ack=1,
        )
    ) == (
        MatrixValue("—", "0 of 2 reps", ""),
        MatrixValue("—", "", ""),
        MatrixValue("—", "", ""),
        MatrixValue("never", "1 heal with no ack after", "notable"),
    )
    assert price_texts(_price(first_ack_after_heal_s=None))[3] == MatrixValue("—", "", "")


def _group(**changes: Any) -> GroupSummary:
    base: dict[str, Any] = {
        "configuration": (("acks", "1"), ("min_insync_replicas", "1")),
        "fault": "leader-kill",
        "kafka_version": "3.9.0",
        "experiments": ("a",),
        "repetitions": 5,
        "counted": 5,
        "lossy": 2,
        "loss_probability": 0.4,
        "interval": WilsonInterval(0.1176, 0.7693),
        "loss_rate": LossRateSpread(0.0, 0.00123456, 0.5),
        "verdicts": {"PASS": 3, "EXPECTED-LOSS": 2},
    }
    return GroupSummary(**(base | changes))


def test_a_summary_row_formats_the_group() -> None:
    effect = SettingEffect(
        setting="acks",
        fault="leader-kill",
        kafka_version="3.9.0",
        context=(("min_insync_replicas", "1"), ("partitions", "2")),
        values=("1", "all"),
        probabilities=(0.4, 0.0),
        intervals=(WilsonInterval(0.1176, 0.7693), WilsonInterval(0.0, 0.4345)),
    )
    summary = CrossRunSummary(
        groups=(
            _group(),
            _group(counted=3, lossy=0, loss_probability=0.0, loss_rate=None, verdicts={}),
            _group(counted=0, lossy=0, loss_probability=None, interval=WilsonInterval(0, 1)),
        ),
        effects=(effect,),
        decisive_settings=(),
    )
    view = summary_view(summary)
    first, partial, none = view.rows
    assert (first.configuration, first.fault, first.kafka_version) == (
        "acks=1 min_insync_replicas=1",
        "leader-kill",
        "3.9.0",
    )
    assert (first.repetitions, first.lossy, first.probability, first.interval) == (
        "5",
        "2",
        "2/5 = 40 %",
        "11.8 % – 76.9 %",
    )
    assert first.loss_rate == "0 % / 0.123 % / 50 %"
    assert first.verdicts == "3 PASS, 2 EXPECTED-LOSS"
    assert (partial.repetitions, partial.probability, partial.loss_rate, partial.verdicts) == (
        "3/5",
        "0/3 = 0 %",
        "-",
        "",
    )
    assert (none.repetitions, none.probability, none.interval) == ("0/5", "-", "-")
    assert view.effects == (
        "acks 1 → all: loss probability 40 % [11.8 %–76.9 %] → 0 % [0 %–43.5 %] under "
        "leader-kill, Kafka 3.9.0 (min_insync_replicas=1 partitions=2)",
    )
    assert view.decisive == (
        "no single setting changed the outcome beyond the 95 % intervals "
        "(more repetitions, `repetitions` in the experiment file, narrow them)"
    )
    decided = CrossRunSummary(groups=(), effects=(), decisive_settings=("acks", "min.insync"))
    assert summary_view(decided).decisive == ("settings that change the outcome: acks, min.insync")
    data = summary_json(summary)
    assert data["confidence"] == 0.95
    assert data["groups"][0]["configuration"] == {"acks": "1", "min_insync_replicas": "1"}
    assert data["groups"][0]["interval"] == {"low": 0.1176, "high": 0.7693}
    assert data["groups"][0]["lossy"] == 2
    assert data["effects"][0]["context"] == {"min_insync_replicas": "1", "partitions": "2"}
    assert data["effects"][0]["values"] == ("1", "all")
    assert data["decisive_settings"] == list(summary.decisive_settings)


def test_provenance_says_not_recorded_for_what_a_run_left_out() -> None:
    sparse = Provenance(
        experiment="x",
        git_revision=None,
        command_line=(),
        seed=7,
        images=(
            BrokerImageUsed(tag="t2", image_id=None, kafka_version="4.0.0"),
            BrokerImageUsed(tag="", image_id="sha256:1", kafka_version=None),
            BrokerImageUsed(tag="t3", image_id="sha256:2", kafka_version="3.9.0"),
        ),
        confluent_kafka_version=None,
        librdkafka_version=None,
        cores=None,
        memory_bytes=None,
        started_at_us=1,
    )
    (view,) = provenance_views([ExperimentProvenance("root", sparse)])
    assert view.root == "root"
    assert view.lines == (
        ("git revision", "not recorded"),
        ("command line", "not recorded"),
        ("seed", "7 (repetition r runs with seed + r)"),
        ("image", "t2, not recorded, t3"),
        ("image id", "not recorded, sha256:1, sha256:2"),
        ("Kafka version", "3.9.0, 4.0.0, not recorded"),
        ("confluent-kafka", "not recorded"),
        ("librdkafka", "not recorded"),
        ("cores", "not recorded"),
        ("memory", "not recorded"),
    )
    no_images = sparse.model_copy(update={"images": (), "memory_bytes": 3 * 2**29, "cores": 0})
    (view,) = provenance_views([ExperimentProvenance("r", no_images)])
    shown = dict(view.lines)
    assert (shown["image"], shown["image id"], shown["Kafka version"]) == ("not recorded",) * 3
    assert (shown["memory"], shown["cores"]) == ("1.5 GiB", "0")


def test_a_provenance_that_cannot_be_shown_says_why_in_its_place() -> None:
    broken = Provenance.model_construct(images=None, git_revision="g", command_line=("a",))
    (view,) = provenance_views([ExperimentProvenance("root", broken)])
    ((label, text),) = view.lines
    assert label == "provenance"
    assert text.startswith("the provenance of root failed: AttributeError: ")
    assert text.endswith("(the rest of the report stands)")


def test_the_sensitivity_sentence() -> None:
    assert sensitivity_text(None) is None
    assert sensitivity_text(Sensitivity(5, 5, True)) == (
        "sensitivity check passed: 5 of 5 acknowledged records hidden from a copy of the "
        "read-back were reported missing"
    )
    assert sensitivity_text(Sensitivity(5, 3, False)) == (
        "sensitivity check FAILED: 3 of 5 acknowledged records hidden from a copy of the "
        "read-back were reported missing"
    )
    assert sensitivity_text(Sensitivity(0, 0, None)) == (
        "sensitivity check does not apply: the read-back holds no healthy acknowledged record "
        "to hide"
    )


def test_the_attribution_sentence_names_each_place_with_a_count() -> None:
    counts = {
        Place.ON_NO_DISK: 1200,
        Place.ON_DISK_NOT_SERVED: 3,
        Place.SEGMENTS_UNAVAILABLE: 0,
        Place.NOT_EXAMINED: 2,
    }
    view = attribution_view(Attribution(counts=counts, examples=(), note="n", beyond_served=2))
    assert view is not None
    assert view.text == (
        "where the 1,205 missing acknowledged messages are: 1,200 on no broker's disk (Kafka "
        "lost them); 3 on a broker's disk, yet not read back; 2 not examined (beyond the "
        "bound); 2 of those on disk only at or past the high watermark"
    )
    assert view.note == "n"
    unavailable = {Place.SEGMENTS_UNAVAILABLE: 1}
    view = attribution_view(Attribution(counts=unavailable, examples=(), note="", beyond_served=0))
    assert view is not None and view.text == (
        "where the 1 missing acknowledged messages are: 1 cannot say (segments not kept or not "
        "readable)"
    )
    nothing = Attribution(counts=dict.fromkeys(Place, 0), examples=(), note="", beyond_served=0)
    assert attribution_view(nothing) is None
    assert attribution_view(None) is None


def test_the_client_and_member_sentences_list_the_durability_settings_first() -> None:
    client = {
        "type": "client_config",
        "ts_us": 1,
        "client": "java 3.8.0",
        "config": {
            "linger.ms": "5",
            "zzz": "1",
            "acks": "all",
            "retries": "3",
            "enable.idempotence": "true",
            "max.in.flight.requests.per.connection": "5",
            "delivery.timeout.ms": "120000",
            "request.timeout.ms": "30000",
        },
        "idempotent": True,
    }
    assert client_text([client]) == (
        "java 3.8.0 ran with acks=all, enable.idempotence=true, retries=3, "
        "max.in.flight.requests.per.connection=5, delivery.timeout.ms=120000, "
        "request.timeout.ms=30000, linger.ms=5 (idempotent: True)"
    )
    bare = {**client, "config": {"zzz": "1"}, "idempotent": None}
    assert client_text([bare]) == "java 3.8.0 ran with no settings recorded"
    assert client_text([]) is None
    group = {
        "type": "consumers",
        "ts_us": 1,
        "client": "librdkafka",
        "members": 2,
        "config": {
            "group.protocol": "consumer",
            "isolation.level": "read_committed",
            "other": "x",
            "enable.auto.commit": "false",
            "auto.commit.interval.ms": "5000",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": "6000",
            "max.poll.interval.ms": "300000",
        },
    }
    assert members_text([group]) == (
        "the group's members (librdkafka) ran with isolation.level=read_committed, "
        "enable.auto.commit=false, auto.commit.interval.ms=5000, auto.offset.reset=earliest, "
        "session.timeout.ms=6000, max.poll.interval.ms=300000, group.protocol=consumer"
    )
    assert members_text([{**group, "config": {}}]) is None
    assert members_text([]) is None


def test_the_ap_cell_label_and_config_read_as_in_the_matrix() -> None:
    (cell,) = judge_all([result("ap", AP, 0)], {})
    assert views.config_summary(cell.config).startswith("acks=1 · min.insync=1 · unclean=off")


def test_a_cell_id_keeps_capitals_and_every_letter_it_can() -> None:
    """An HTML id keeps upper-case letters as they are, and trims only dashes from its ends,
    never a letter such as the X that begins or ends the name."""
    raw = {**result("Leader-KILL X", CP, 0), "experiment": "Xp"}
    (cell,) = judge_all([raw], {})
    assert views.slug(cell) == "cell-Xp-Leader-KILL-X"


def test_a_provenance_that_cannot_be_shown_still_names_its_root() -> None:
    """A root whose provenance cannot be shown keeps its root (the reports head its table
    with it) beside the reason."""
    broken = Provenance.model_construct(images=None, git_revision="g", command_line=("a",))
    (view,) = provenance_views([ExperimentProvenance("runs/chaos/ts", broken)])
    assert view.root == "runs/chaos/ts"
    assert view.lines[0][1].startswith("the provenance of runs/chaos/ts failed: AttributeError")


def test_one_repetition_per_group_says_no_effect_can_be_shown_and_the_remedy() -> None:
    single = CrossRunSummary(
        groups=(_group(repetitions=1, counted=1), _group(repetitions=1, counted=1, fault="x")),
        effects=(),
        decisive_settings=(),
    )
    assert summary_view(single).decisive == (
        "one repetition per configuration cannot show whether a setting changes the outcome: "
        "raise `repetitions` in the experiment file"
    )
