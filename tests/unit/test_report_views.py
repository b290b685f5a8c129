"""The report's typed views, each formatted value spelled out: counts and rates, the
configuration line, the one-line outcome, the price of safety, the cross-run summary's rows,
provenance lines, and a repetition's sentences (sensitivity, attribution, client, members)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

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
from harness.rundir.provenance import BrokerImageUsed, Provenance, RunProvenance
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
        assert views.format_stat(stat, counted) == text


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
        ((Verdict.PASS,), "All 1 cells are consistent with the documented guarantees"),
        (
            (Verdict.PASS, Verdict.VIOLATION, Verdict.VIOLATION, Verdict.UNKNOWN),
            "2 of 4 cells violate the documented guarantees",
        ),
        (
            (Verdict.PASS, Verdict.UNKNOWN, Verdict.UNKNOWN),
            "Inconclusive: 2 of 3 cells could not be judged",
        ),
        (
            (Verdict.KNOWN_BUG, Verdict.PASS, Verdict.EXPECTED_LOSS),
            "1 of 3 cells show a known loss bug of their Kafka release; the others are "
            "consistent with the documented guarantees",
        ),
        (
            (Verdict.NOT_PROVOKED, Verdict.EXPECTED_LOSS),
            "All 2 cells are consistent with the documented guarantees",
        ),
    ],
)
def test_the_outcome_sentence_follows_the_exit_code(
    verdicts: tuple[Verdict, ...], sentence: str
) -> None:
    assert views.verdict_summary(_cells(*verdicts)) == sentence


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
        "(more repetitions narrow them)"
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
    (view,) = provenance_views([RunProvenance("root", sparse)])
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
    (view,) = provenance_views([RunProvenance("r", no_images)])
    shown = dict(view.lines)
    assert (shown["image"], shown["image id"], shown["Kafka version"]) == ("not recorded",) * 3
    assert (shown["memory"], shown["cores"]) == ("1.5 GiB", "0")


def test_a_provenance_that_cannot_be_shown_says_why_in_its_place() -> None:
    broken = Provenance.model_construct(images=None, git_revision="g", command_line=("a",))
    (view,) = provenance_views([RunProvenance("root", broken)])
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


# ---------------------------------------------------------------------------------------------
# A repetition's price of safety, the matrix row, the cell's view


def _priced_run(availability: Any, **changes: Any) -> Any:
    from tests.unit.results_json import typed

    return replace(typed(result("c", CP, 0)), availability=availability, **changes)


def test_the_price_sentence_reads_times_on_the_timelines_clock() -> None:
    from analysis.model.availability import (
        Availability,
        FaultLatency,
        Gap,
        HealRecovery,
        Latency,
        PartitionAvailability,
    )
    from analysis.report.matrix import availability_text
    from tests.unit.report_runs import us

    availability = Availability(
        workload_start_us=us(0),
        workload_end_us=us(20),
        window_from_events=True,
        ok=10,
        failed=1234,
        indeterminate=5678,
        failed_without_partition=0,
        indeterminate_without_partition=0,
        longest_gap=Gap(us(3), us(5.5), 3.0, 5.5),
        partitions=(
            PartitionAvailability(0, 5, 0, 0, Gap(us(2), us(3), 2.0, 3.0)),
            PartitionAvailability(1, 5, 0, 0, Gap(us(6), us(9.55), 6.0, 9.55)),
        ),
        heals=(
            HealRecovery(1, "pause", us(4), 4.0, True, 0.25, {0: 0.25, 1: 2.5}),
            HealRecovery(2, "pause", us(7), 7.0, True, 0.5, {0: 0.5, 1: None}),
            HealRecovery(3, "pause", us(8), 8.0, True, None, {0: None, 1: None}),
            HealRecovery(4, "pause", us(30), 30.0, False, 0.1, {0: 0.1, 1: 0.2}),
        ),
        fault_latency=(
            FaultLatency(1, "pause", us(2), us(4), Latency(3, 1234.4, 5678.6)),
            FaultLatency(2, "kill", us(6), us(7), Latency(0, None, None)),
        ),
        latency_outside_faults=Latency(9, 4.0, 12.0),
    )
    run = _priced_run(availability)
    assert availability_text(run, []) == (
        "price of safety: longest stall of one partition 3.5 s (partition 1, t=6.0–9.6 s); "
        "no partition acknowledged anything for 2.5 s (t=3.0–5.5 s); 1,234 failed and 5,678 "
        "indeterminate sends; after the heal at t=4.0 s the first ack came after 0.2 s, every "
        "partition after 2.5 s; after the heal at t=7.0 s the first ack came after 0.5 s, some "
        "partition never again before the workload ended; after the heal at t=8.0 s no send was "
        "acknowledged before the workload ended; sends during pause (fault 1) acked in p50 1,234 "
        "ms, p99 5,679 ms; outside every fault in p50 4 ms, p99 12 ms"
    )
    quiet = replace(
        availability,
        longest_gap=None,
        partitions=(),
        heals=(),
        latency_outside_faults=Latency(0, None, None),
    )
    assert availability_text(_priced_run(quiet), []) == (
        "price of safety: 1,234 failed and 5,678 indeterminate sends; sends during pause (fault "
        "1) acked in p50 1,234 ms, p99 5,679 ms"
    )
    no_outside = replace(quiet, latency_outside_faults=None)
    assert availability_text(_priced_run(no_outside), []) == (
        "price of safety: 1,234 failed and 5,678 indeterminate sends"
    )
    # Without a timeline the clock starts at the first event.
    untimed = _priced_run(quiet, timeline=())
    events = [{"type": "phase", "ts_us": us(2)}, {"type": "phase", "ts_us": us(1)}]
    text = availability_text(
        replace(untimed, availability=replace(quiet, heals=availability.heals[:1])), events
    )
    assert "after the heal at t=3.0 s the first ack" in (text or "")
    assert availability_text(None, []) is None
    unmeasured = _priced_run(None, availability_error="AvailabilityError: x")
    assert availability_text(unmeasured, []) == "price of safety not measured: AvailabilityError: x"
    assert availability_text(_priced_run(None), []) == "price of safety not measured: no figures"


def test_a_matrix_row_flags_loss_and_anomalies_by_how_serious() -> None:
    from analysis.report.matrix import MATRIX_COUNTS, matrix_row

    raws = [result("c", AP, 0, lost=2, moved=1), result("c", AP, 1, lost=4, moved=0)]
    (cell,) = judge_all(raws, {})
    row = matrix_row(cell)
    by_name = dict(zip(MATRIX_COUNTS, row.values, strict=True))
    assert by_name["sent"] == MatrixValue("2,000", "", "")
    assert by_name["acked"] == MatrixValue("1,900", "", "")
    assert by_name["loss"] == MatrixValue("3", "2–4", "serious")
    assert by_name["lost"] == MatrixValue("3", "2–4", "serious")
    assert by_name["moved"] == MatrixValue("0.5", "0–1", "notable")
    assert by_name["unseen"] == MatrixValue("0", "", "")
    assert (row.slug, row.cell, row.experiment) == ("cell-chaos-c", "c", "chaos")
    assert row.config == tuple(views.config_parts(cell.config))
    assert (row.loss_rate, row.repetitions, row.verdict, row.css) == (
        "0.158 %",
        2,
        cell.verdict.value,
        views.css_class(cell.verdict),
    )
    assert row.price == ()
    priced_row = matrix_row(cell, {})
    assert priced_row.price == (
        MatrixValue("—", "0 of 2 reps", ""),
        MatrixValue("—", "", ""),
        MatrixValue("—", "", ""),
        MatrixValue("—", "", ""),
    )
    bare = {**result("b", AP, 0), "counts": None, "status": "incomplete"}
    (unknown,) = judge_all([bare], {})
    assert {v.text for v in matrix_row(unknown).values} == {"—"}
    assert {v.level for v in matrix_row(unknown).values} == {""}


def test_the_price_of_a_cell_says_why_each_repetition_was_not_measured() -> None:
    from analysis.report.matrix import price_of
    from tests.unit.results_json import typed

    raws = [result("c", CP, rep) for rep in range(3)]
    (cell,) = judge_all(raws, {})
    results = {
        raws[0]["run_dir"]: replace(typed(raws[0]), availability_error="AvailabilityError: a"),
        raws[1]["run_dir"]: typed(raws[1]),
    }
    price = price_of(cell, results)
    assert price.unmeasured == (
        "repetition 0: AvailabilityError: a",
        "repetition 1: not measured",
        "repetition 2: not measured",
    )
    assert (price.measured, price.repetitions) == (0, 3)


def test_a_fault_window_is_labelled_with_what_was_done_to_whom() -> None:
    from analysis.report.marks import FaultWindow, fault_windows

    def start(fault_id: int, ts: int | None, nodes: list[int], **more: Any) -> dict[str, Any]:
        event = {"type": "fault_start", "fault_id": fault_id, "nodes": nodes, "detail": {}}
        return event | ({"ts_us": ts} if ts is not None else {}) | more

    events = [
        start(2, 50, [1, 3], fault="kill", target="followers"),
        {"type": "fault_end", "fault_id": 2, "ts_us": 70, "fault": "kill"},
        start(1, 10, [2], fault="pause", target="leader"),
        start(3, None, []),
        {"type": "fault_end", "fault_id": 3, "fault": "x"},
    ]
    assert fault_windows(events) == [
        FaultWindow("", "", (), 0, 0),
        FaultWindow("pause", "leader", (2,), 10, None),
        FaultWindow("kill", "followers", (1, 3), 50, 70),
    ]
    labels = [w.label for w in fault_windows(events)]
    assert labels == ["", "pause leader (node 2)", "kill followers (nodes 1, 3)"]
    assert FaultWindow("kill", "", (4,), 0, None).label == "kill  (node 4)"
    assert FaultWindow("partition", "all", (), 0, None).label == "partition all"


def test_a_failed_part_reads_as_a_note_in_text_and_html() -> None:
    from pathlib import Path

    from analysis.report.safe import PartFailure, safely

    failure = safely("the chart <x>", lambda: 1 / 0)
    assert failure == PartFailure("the chart <x>", "ZeroDivisionError: division by zero")
    assert str(failure) == (
        "the chart <x> failed: ZeroDivisionError: division by zero (the rest of the report stands)"
    )
    assert failure.__html__() == (
        '<p class="part-failed">the chart &lt;x&gt; failed: ZeroDivisionError: division by zero '
        "(the rest of the report stands)</p>"
    )
    assert failure.failed is True
    unwritten = safely("report.md", lambda: 1 / 0, Path("/r/report.md"))
    assert str(unwritten) == (
        "report.md could not be written to /r/report.md (ZeroDivisionError: division by zero)"
    )
    assert safely("fine", lambda: "built") == "built"


def test_a_cells_view_shows_each_repetition_with_its_examples_and_guarantee() -> None:
    from analysis.judge.guarantees import ALLOWED, FORBIDDEN
    from analysis.model.results import Example
    from analysis.report.cells import GuaranteeView, cell_view, guarantee_view
    from tests.unit.report_runs import events_with_fault_and_leader_change
    from tests.unit.results_json import typed

    raws = [
        {**result("c", AP, 0, lost=2), "timeline": []},
        {**result("c", AP, 1), "timeline": []},
    ]
    events = {r["run_dir"]: events_with_fault_and_leader_change() for r in raws}
    (cell,) = judge_all(raws, events)
    results = {r["run_dir"]: typed(r) for r in raws}
    many = tuple(Example(msg_id=i, partition=None, offset=None) for i in range(25))
    first = results[raws[0]["run_dir"]]
    examples = {
        "unseen": many,
        "lost": first.examples["lost"],
        "offset_divergent": (
            Example(msg_id=9, partition=1, offset=2, readback_msg_id_at_offset=3),
        ),
        "duplicated": (Example(msg_id=5, partition=0, offset=1),),
    }
    results[raws[0]["run_dir"]] = replace(first, examples=examples)
    view = cell_view(cell, results, events)
    assert (view.slug, view.cell, view.experiment, view.verdict) == (
        "cell-chaos-c",
        "c",
        "chaos",
        cell.verdict.value,
    )
    assert view.config == views.config_summary(cell.config)
    assert view.css == views.css_class(cell.verdict)
    assert view.reasons == cell.reasons
    lost_rep, clean_rep = view.repetitions
    assert (lost_rep.repetition, lost_rep.run_dir) == (0, raws[0]["run_dir"])
    assert lost_rep.verdict == cell.repetitions[0].verdict.value
    assert lost_rep.css == views.css_class(cell.repetitions[0].verdict)
    assert view.repetitions[1].css == views.css_class(cell.repetitions[1].verdict)
    assert lost_rep.reasons == cell.repetitions[0].reasons
    assert lost_rep.faults == ("kill leader (node 1)",)
    assert lost_rep.timeline is None and not lost_rep.timeline_skipped  # no timeline recorded
    assert lost_rep.sensitivity is not None and lost_rep.sensitivity.startswith(
        "sensitivity check passed: 5 of 5"
    )
    assert lost_rep.attribution is not None and lost_rep.attribution.text.startswith(
        "where the 2 missing acknowledged messages are: 1 on no broker's disk"
    )
    assert lost_rep.availability == "price of safety not measured: no figures"
    assert (lost_rep.client, lost_rep.members) == (None, None)
    rows = [(r.cls, r.msg_id, r.partition, r.offset, r.readback) for r in lost_rep.examples]
    assert rows == [
        ("lost", 1000, 0, 500, "—"),
        ("lost", 1001, 0, 501, "—"),
        *[("unseen", i, "—", "—", "—") for i in range(20)],
        ("offset-divergent", 9, 1, 2, 3),
    ]
    assert clean_rep.examples == () and clean_rep.attribution is None
    assert guarantee_view(None) is None
    assert cell.guarantee is not None
    g = replace(cell.guarantee, loss=FORBIDDEN, duplicates=ALLOWED, order="guaranteed")
    assert guarantee_view(g) == GuaranteeView(
        chips=(
            ("loss", FORBIDDEN, True),
            ("duplicates", ALLOWED, False),
            ("order", "guaranteed", True),
        ),
        citations=(g.citation, g.duplicates_citation, g.order_citation),
    )
    loose = replace(g, loss=ALLOWED, duplicates=FORBIDDEN, order="not-guaranteed")
    assert [chip[2] for chip in guarantee_view(loose).chips] == [False, True, False]


def test_a_cell_draws_the_repetitions_not_passing_then_the_most_lossy() -> None:
    from analysis.judge.outcomes import Verdict as V
    from analysis.report.cells import _worth_drawing
    from tests.unit.results_json import typed

    raws = [result("c", AP, rep, lost=[0, 0, 7, 0, 3, 0, 9, 0][rep]) for rep in range(8)]
    (cell,) = judge_all(raws, {})
    verdicts = [V.PASS, V.PASS, V.PASS, V.VIOLATION, V.PASS, V.PASS, V.PASS, V.PASS]
    reps = tuple(replace(r, verdict=v) for r, v in zip(cell.repetitions, verdicts, strict=True))
    cell = replace(cell, repetitions=reps)
    results = {r["run_dir"]: typed(r) for r in raws}
    drawn = _worth_drawing(cell, results)
    assert drawn == {raws[i]["run_dir"] for i in (3, 6, 2, 4, 0)}
    assert _worth_drawing(cell, {}) == {raws[i]["run_dir"] for i in (3, 0, 1, 2, 4)}


def test_a_failed_part_is_logged_with_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from analysis.report.safe import safely

    with caplog.at_level(logging.ERROR, logger="kafka_chaos.report"):
        safely("the chart", lambda: 1 / 0)
    (record,) = caplog.records
    assert record.getMessage() == "report part the chart failed"
    assert record.exc_info is not None and record.exc_info[0] is ZeroDivisionError
