"""Broken experiment files a user may write: each refused with a clear, short message.

One table of files, each with the fragments its message must hold: strict numbers, upper
bounds with their reasons, Kafka versions, names, overlapping matrix axes, YAML that is not
plain data. Every message must stay readable: no line longer than a terminal can show.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.experiment.load import load_experiment
from harness.experiment.matrix import expand
from harness.experiment.plan import schedule_for
from harness.experiment.problems import SpecError

HEAD = "name: t\nworkload: {rate: 100, duration_s: 30}\n"
STEP = "{at_s: 5, fault: kill, target: leader, duration_s: 5}"
CUT = "{at_s: 5, fault: partition, target: leader, duration_s: 5}"
LONG_TEXT = "x" * 4000
LONG_LIST = "[" + ", ".join(["1"] * 2000) + "]"
MAX_LINE = 400  # characters: a problem line with its path, explanation and a quoted value

BROKEN: dict[str, tuple[str, tuple[str, ...]]] = {
    # strict numbers
    "bool duration": (
        "name: t\nworkload: {rate: 100, duration_s: true}\n",
        ("workload.duration_s", "must be a number (got True)"),
    ),
    "inf rate": ("name: t\nworkload: {rate: .inf, duration_s: 30}\n", ("workload.rate", "finite")),
    "nan rate": ("name: t\nworkload: {rate: .nan, duration_s: 30}\n", ("workload.rate", "finite")),
    "exponent without a dot is text": (
        "name: t\nworkload: {rate: 1e300, duration_s: 30}\n",
        ("workload.rate", "got the text '1e300'", "1.0e+3"),
    ),
    "absurd float rate": (
        "name: t\nworkload: {rate: 1.0e+300, duration_s: 30}\n",
        ("workload.rate", "at most 1,000,000 messages/s", "fall behind"),
    ),
    "float partitions": (
        HEAD + "topic: {partitions: 1.0e+300}\n",
        ("topic.partitions", "must be a whole number"),
    ),
    "bool seed": (HEAD + "seed: true\n", ("seed", "whole number")),
    "bool brokers": (HEAD + "kafka: {brokers: true}\n", ("kafka.brokers", "whole number")),
    "bool repetitions": (HEAD + "repetitions: true\n", ("repetitions", "whole number")),
    "quoted number": (HEAD + "topic: {partitions: '3'}\n", ("topic.partitions", "quotes")),
    "bool fault param": (
        HEAD + "faults: {schedule: [{at_s: 5, fault: loss, target: leader, duration_s: 5, "
        "params: {percent: true}}]}\n",
        ("faults.schedule[0].params", "params.percent", "must be a number (got True)"),
    ),
    "inf in a config map": (
        HEAD + "topic: {config: {retention.ms: .inf}}\n",
        ("topic.config", "'retention.ms' must be a finite number"),
    ),
    # upper bounds, each with its reason
    "3-year duration": (
        "name: t\nworkload: {rate: 100, duration_s: 94608000}\n",
        ("workload.duration_s", "at most 604,800 s", "7 days"),
    ),
    "count for longer than a week": (
        "name: t\nworkload: {rate: 1, duration_s: null, count: 1000000000}\n",
        ("workload.count", "at most 604,800 s"),
    ),
    "10^9 repetitions": (
        HEAD + "repetitions: 1000000000\n",
        ("repetitions", "at most 10,000", "fresh cluster"),
    ),
    "10^6 partitions": (
        HEAD + "topic: {partitions: 1000000}\n",
        ("topic.partitions", "at most 10,000", "read-back"),
    ),
    "rate above 10^6": (
        "name: t\nworkload: {rate: 2000000, duration_s: 30}\n",
        ("workload.rate", "at most 1,000,000"),
    ),
    "fault lasting 1e299 s": (
        HEAD
        + "faults: {schedule: [{at_s: 5, fault: kill, target: leader, duration_s: 1.0e+299}]}\n",
        ("faults.schedule[0].duration_s", "at most 604,800 s"),
    ),
    "fault starting after the workload": (
        HEAD + "faults: {schedule: [{at_s: 40, fault: kill, target: leader, duration_s: 5}]}\n",
        ("faults.schedule[0]", "ends at 45 s", "workload ends at 30 s"),
    ),
    "fault beyond a count-bound workload": (
        "name: t\nworkload: {rate: 10, duration_s: null, count: 100}\n"
        "faults: {schedule: [{at_s: 8, fault: kill, target: leader, duration_s: 5}]}\n",
        ("faults.schedule[0]", "ends at 13 s", "workload.count / rate"),
    ),
    "fault param past its bound": (
        HEAD + "faults: {schedule: [{at_s: 5, fault: power-loss, target: all, duration_s: 5, "
        "params: {window_s: 1.0e+299}}]}\n",
        ("params.window_s", "at most 604,800 s"),
    ),
    "generator gap of 1e299 s": (
        HEAD + "faults: {generate: {mean_interval_s: 1.0e+299, faults: [kill], targets: [leader], "
        "duration_s: [1, 2]}}\n",
        ("faults.generate.mean_interval_s", "at most 604,800 s"),
    ),
    # versions, images and names
    "banana version": (HEAD + "kafka: {version: banana}\n", ("kafka.version", "Kafka release")),
    "two-part version": (HEAD + "kafka: {version: '4.3'}\n", ("kafka.version", "4.3.1")),
    "version with a suffix": (HEAD + "kafka: {version: 4.3.1-rc1}\n", ("kafka.version",)),
    "empty image": (HEAD + "kafka: {image: ''}\n", ("kafka.image", "empty")),
    "blank image": (HEAD + "kafka: {image: '  '}\n", ("kafka.image", "empty")),
    "300-character name": (
        "name: " + "a" * 300 + "\nworkload: {rate: 100, duration_s: 30}\n",
        ("name: is 300 characters long", "at most 100"),
    ),
    "long axis name": (
        HEAD + f"matrix: {{{'a' * 150}: {{v: {{producer.acks: all}}}}}}\n",
        ("axis name", "150 characters", "at most 100"),
    ),
    "long variant name": (
        HEAD + f"matrix: {{config: {{{'v' * 150}: {{producer.acks: all}}}}}}\n",
        ("matrix.config: variant", "150 characters"),
    ),
    # two matrix axes setting one key
    "two axes set faults.schedule": (
        HEAD + f"matrix:\n  fault: {{kill: {{faults.schedule: [{STEP}]}}}}\n"
        f"  target: {{leader: {{faults.schedule: [{CUT}]}}}}\n",
        ("matrix.target", "axes 'fault' and 'target' both set 'faults.schedule'", "silently"),
    ),
    "an axis sets a key inside another's": (
        HEAD + f"matrix:\n  fault: {{kill: {{faults.schedule: [{STEP}]}}}}\n"
        "  faults.schedule.0.target: [leader, follower]\n",
        ("axis 'fault' sets 'faults.schedule'", "'faults.schedule.0.target'", "one inside"),
    ),
    "an axis sets a section another axis changes": (
        HEAD + f"matrix:\n  faults: [{{schedule: [{STEP}]}}]\n"
        f"  fault: {{kill: {{faults.schedule: [{STEP}]}}}}\n",
        ("axis 'faults' sets 'faults'", "axis 'fault' sets 'faults.schedule'"),
    ),
    "a list axis and a variant set one key": (
        HEAD + "matrix:\n  producer.acks: ['1', all]\n  config: {cp: {producer.acks: all}}\n",
        ("both set 'producer.acks'",),
    ),
    # YAML that is not plain data
    "python tag": (
        "name: !!python/object/apply:os.system [echo hi]\n",
        ("1:7:", "YAML tag '!!python/object/apply:os.system' is not allowed", "remove the tag"),
    ),
    "custom tag": (HEAD + "seed: !seed 4\n", ("3:7:", "YAML tag '!seed'")),
    "unhashable key": ("name: t\n? [a, b]\n: 1\n", ("2:3:", "a key is a list", "plain names")),
    "unhashable flow key": (
        "name: t\nproducer: {[a]: 1}\n",
        ("2:12:", "a key is a list", "plain names"),
    ),
    "duplicate key": ("name: t\nname: u\n", ("2:1:", "duplicate key 'name'", "keep only one")),
    "an int of 5,000 digits": (HEAD + "seed: " + "9" * 5000 + "\n", ("YAML could not convert",)),
    # values that would be dumped whole
    "4 KB name": (f"name: {LONG_TEXT}\n", ("name: is 4000 characters long",)),
    "4 KB acks": (HEAD + f"producer: {{acks: {LONG_TEXT}}}\n", ("producer.acks", "...")),
    "4 KB fault": (
        HEAD + f"faults: {{schedule: [{{at_s: 1, fault: {LONG_TEXT}, target: leader, "
        "duration_s: 2}]}\n",
        ("faults.schedule[0].fault", "unknown fault", "..."),
    ),
    "a fault given as a list": (
        HEAD + "faults: {schedule: [{at_s: 1, fault: [kill], target: leader, duration_s: 2}]}\n",
        ("faults.schedule[0].fault", "valid string"),
    ),
    "a matrix variant's fault given as a mapping": (
        HEAD + f"faults: {{schedule: [{STEP}]}}\n"
        "matrix: {fault: {odd: {faults.schedule: [{at_s: 5, fault: {a: 1}, target: leader, "
        "duration_s: 5}]}}}\n",
        ("cell 'fault=odd'", "faults.schedule[0].fault", "valid string", "variant 'odd'"),
    ),
    "4 KB target": (
        HEAD + f"faults: {{schedule: [{{at_s: 1, fault: kill, target: {LONG_TEXT}, "
        "duration_s: 2}]}\n",
        ("faults.schedule[0].target", "unknown target", "..."),
    ),
    "2,000-item config value": (
        HEAD + f"topic: {{config: {{retention.ms: {LONG_LIST}}}}}\n",
        ("topic.config", "string, number or boolean", "..."),
    ),
    # Keys past 1,024 characters need YAML's explicit `? key` form.
    "4 KB config key": (
        HEAD + f"topic:\n  config:\n    ? {'bad key ' * 500}\n    : 1\n",
        ("not a config key", "..."),
    ),
    "4 KB unknown key": (HEAD + f"? {LONG_TEXT}\n: 1\n", ("unknown key", "...")),
    "2,000-item workload": (f"name: t\nworkload: {LONG_LIST}\n", ("workload", "mapping", "...")),
    "4 KB partition mode": (
        HEAD + f"faults: {{schedule: [{{at_s: 1, fault: partition, target: leader, "
        f"duration_s: 2, params: {{mode: {LONG_TEXT}}}}}]}}\n",
        ("params.mode", "..."),
    ),
    "4 KB matrix value": (
        HEAD + f"matrix: {{producer.acks: [{LONG_TEXT}]}}\n",
        ("producer.acks", "..."),
    ),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_broken_file_is_refused_with_a_short_clear_message(tmp_path: Path, case: str):
    text, fragments = BROKEN[case]
    path = tmp_path / "broken.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as caught:
        expand(load_experiment(path))
    message = str(caught.value)
    assert message.startswith(str(path)), message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in:\n{message}"
    longest = max(message.splitlines(), key=len)
    assert len(longest) <= MAX_LINE, f"a {len(longest)}-character line:\n{longest}"
    assert "indentation" not in message or "syntax error" in message


@pytest.mark.parametrize("version", ["0.10.2.2", "2.8.1", "3.9.0", "4.3.1"])
def test_kafka_releases_are_accepted(tmp_path: Path, version: str):
    path = tmp_path / "ok.yaml"
    path.write_text(HEAD + f"kafka: {{version: '{version}'}}\n")
    assert load_experiment(path).kafka.version == version


@pytest.mark.parametrize(
    "matrix",
    [
        # Different keys of one config map, though one key's name starts with the other's.
        "  topic.config.retention: [a]\n  topic.config.retention.ms: [1000]\n",
        "  producer.acks: ['1', all]\n  topic.min_insync_replicas: [1, 2]\n",
        "  config: {ap: {producer.acks: '1'}}\n  fault: {kill: {faults.schedule: []}}\n",
    ],
)
def test_axes_on_different_keys_are_accepted(tmp_path: Path, matrix: str):
    path = tmp_path / "ok.yaml"
    path.write_text(HEAD + "matrix:\n" + matrix)
    assert len(expand(load_experiment(path))) >= 1


def test_the_limits_themselves_are_accepted(tmp_path: Path):
    path = tmp_path / "edge.yaml"
    path.write_text(
        "name: " + "a" * 100 + "\n"
        "workload: {rate: 1000000, duration_s: 604800}\n"
        "topic: {partitions: 10000}\nrepetitions: 10000\n"
    )
    spec = load_experiment(path)
    assert (spec.workload.rate, spec.workload.duration_s) == (1_000_000, 604_800)
    assert (spec.topic.partitions, spec.repetitions) == (10_000, 10_000)


def test_cell_names_stay_within_the_name_limit(tmp_path: Path):
    path = tmp_path / "long.yaml"
    path.write_text(HEAD + f"matrix: {{description: [{'d' * 90}, {'e' * 90}]}}\n")
    names = [cell.name for cell in expand(load_experiment(path))]
    assert len(set(names)) == 2
    assert all(len(name) <= 100 and re.fullmatch(r"[A-Za-z0-9=._-]+", name) for name in names)


def test_faults_after_the_workload_extend_the_schedule(tmp_path: Path):
    path = tmp_path / "x.yaml"
    head = "name: t\nworkload: {rate: 10, duration_s: 10}\n"
    step = "{at_s: 15, fault: kill, target: leader, duration_s: 5}"
    path.write_text(head + f"faults: {{after_workload_s: 20, schedule: [{step}]}}\n")
    assert load_experiment(path).faults.after_workload_s == 20
    path.write_text(head + f"faults: {{after_workload_s: 8, schedule: [{step}]}}\n")
    with pytest.raises(SpecError, match="schedule ends at 18 s"):
        expand(load_experiment(path))
    generated = "{mean_interval_s: 3, faults: [kill], targets: [leader], duration_s: [1, 2]}"
    path.write_text(head + f"faults: {{after_workload_s: 5, generate: {generated}}}\n")
    (cell,) = expand(load_experiment(path))  # a generated one draws over the window too
    assert all((s.end_s or 0) < 15 for seed in range(10) for s in schedule_for(cell, seed))
    assert any((s.end_s or 0) > 10 for seed in range(10) for s in schedule_for(cell, seed))
