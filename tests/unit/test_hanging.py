"""The hanging-transaction check (analysis.checks.hanging) against an oracle written here, over
generated sampled ends and fault windows, its bound, and its judgement."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.checks.hanging import MARKER_SLACK_US, hanging, hanging_bound_us, holds
from analysis.checks.liveness import UNKNOWN, Ends
from analysis.judge.outcomes import Verdict
from analysis.judge.transactions import transaction_findings
from analysis.model.anomalies import AnomalyName, CountName
from analysis.model.evidence import RunEvidence
from analysis.model.results import Example
from harness.rundir.config import CellConfig
from harness.rundir.spec import RunSpec

S = 1_000_000

# One sample: seconds since the previous one, then the last stable offset and the high
# watermark (UNKNOWN: the sample did not give it), drawn small so that holds repeat.
sample = st.tuples(
    st.integers(1, 4),
    st.sampled_from((UNKNOWN, 0, 1, 2)),
    st.sampled_from((UNKNOWN, 0, 1, 2, 3)),
)
partitions = st.dictionaries(st.integers(0, 3), st.lists(sample, max_size=30), max_size=3)
faults = st.lists(
    st.tuples(st.integers(0, 60), st.integers(0, 20)).map(lambda w: (w[0] * S, (w[0] + w[1]) * S)),
    max_size=3,
)


def ends_of(generated) -> dict[int, Ends]:
    result = {}
    for p, rows in generated.items():
        ts = np.cumsum([gap for gap, _, _ in rows]).astype(np.int64) * S
        lso = np.asarray([lso for _, lso, _ in rows], dtype=np.int64)
        hw = np.asarray([hw for _, _, hw in rows], dtype=np.int64)
        result[p] = Ends(ts, hw, lso)
    return result


def free_us(begin: int, end: int, windows) -> int:
    """Microseconds of [begin, end) outside every window, second by second (the generated
    times are whole seconds)."""
    return sum(
        S for t in range(begin // S, end // S) if not any(lo <= t * S < hi for lo, hi in windows)
    )


def oracle(generated, windows, bound_us: int) -> list[dict]:
    """Per partition, the longest stretch of consecutive samples with one last stable offset
    below a known high watermark whose span outside the faults exceeds the bound."""
    found = []
    for p, rows in sorted(generated.items()):
        times = np.cumsum([gap for gap, _, _ in rows]).tolist()
        held = [lso != UNKNOWN and hw != UNKNOWN and lso < hw for _, lso, hw in rows]
        best = None
        for i in range(len(rows)):
            if not held[i] or (i and held[i - 1] and rows[i - 1][1] == rows[i][1]):
                continue  # not the first sample of a stretch
            j = i
            while j + 1 < len(rows) and held[j + 1] and rows[j + 1][1] == rows[i][1]:
                j += 1
            span = free_us(times[i] * S, times[j] * S, windows)
            if span > bound_us and (best is None or span > best[0]):
                best = (span, rows[i][1], times[i] * S, times[j] * S)
        if best is not None:
            found.append({"partition": p, "offset": best[1], "from_us": best[2], "to_us": best[3]})
    return found


@settings(max_examples=300, deadline=None)
@given(partitions, faults, st.integers(0, 30))
def test_the_check_finds_what_the_oracle_finds(generated, windows, bound_s):
    found = hanging(holds(ends_of(generated), tuple(windows)), bound_s * S)
    assert found == oracle(generated, windows, bound_s * S)


def test_the_bound_is_the_timeout_and_a_sweep():
    spec = RunSpec(workload={"transactions": {"timeout_ms": 10_000}})
    assert hanging_bound_us(spec) == (10_000 + 10_000) * 1000 + MARKER_SLACK_US
    setting = "transaction.abort.timed.out.transaction.cleanup.interval.ms"
    swept = RunSpec(
        workload={"transactions": {"timeout_ms": 10_000}},
        kafka={"broker_config": {setting: 1000}},
    )
    assert hanging_bound_us(swept) == (10_000 + 1000) * 1000 + MARKER_SLACK_US
    assert hanging_bound_us(RunSpec()) is None


def judged(tmp_path, version: str, aged: int, unclean: bool = False) -> list:
    (tmp_path / "spec.json").write_text(
        json.dumps({"workload": {"transactions": {"timeout_ms": 10_000, "age_commits": aged}}})
    )
    config = CellConfig(
        kafka_version=version,
        client="java 4.3.1",
        transactions=True,
        unclean_leader_election=unclean,
    )
    counts = {CountName.TXN_COMMITTED: 3, AnomalyName.TXN_HANGING: 1}
    examples = {AnomalyName.TXN_HANGING: [Example(partition=1, offset=5, from_us=0, to_us=31 * S)]}
    events = RunEvidence(tmp_path, RunEvidence.coerce([]).events)
    findings = transaction_findings(config, counts, events, examples, loss_is_violation=True)
    return [f for f in findings if f.anomaly == AnomalyName.TXN_HANGING]


def test_a_hanging_transaction_is_kafka_20090_near_the_epoch_limit_before_4_3(tmp_path):
    [known] = judged(tmp_path, "4.2.0", 32_765)
    assert known.verdict == Verdict.KNOWN_BUG and "KAFKA-20090" in known.detail
    assert "p1 held at offset 5 for 31 s" in known.detail


def test_a_hanging_transaction_is_a_violation_elsewhere(tmp_path):
    for version, aged in (("4.3.1", 32_765), ("4.2.0", 0)):
        [finding] = judged(tmp_path, version, aged)
        assert finding.verdict == Verdict.VIOLATION, (version, aged)
        assert "proactively aborting" in finding.detail


def test_a_hanging_transaction_under_unclean_election_is_unknown(tmp_path):
    [finding] = judged(tmp_path, "4.3.1", 0, unclean=True)
    assert finding.verdict == Verdict.UNKNOWN and "KAFKA-7408" in finding.detail
