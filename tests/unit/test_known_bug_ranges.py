"""The known-bug table: KnownBug.affects against an oracle written here (releases and clients as
number tuples), the rows' ranges, and each row's evidence where its count is judged."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.judge.commits import COMMIT_EVIDENCE
from analysis.judge.duplicates import DUPLICATE_EVIDENCE
from analysis.judge.known_bugs import KNOWN_BUGS, KnownBug, bugs_explaining, references_in
from analysis.judge.liveness import LIVENESS_EVIDENCE
from analysis.judge.mechanisms import PARTITION_EVIDENCE
from analysis.judge.outcomes import Verdict
from analysis.judge.placement import PLACEMENT_EVIDENCE
from analysis.judge.transactions import RUN_EVIDENCE, transaction_findings
from analysis.model.anomalies import AnomalyName, CountName
from analysis.model.evidence import RunEvidence
from analysis.model.results import Example
from harness.rundir import layout
from harness.rundir.config import CellConfig
from harness.rundir.transactions import TRANSACTION_SCHEMA
from tests.examples import examples

releases = st.tuples(st.integers(0, 5), st.integers(0, 12), st.integers(0, 4))
FAMILIES = ("java", "franz-go", "sarama")
clients = st.one_of(
    st.none(),
    st.just("librdkafka"),
    st.tuples(st.sampled_from(FAMILIES), releases).map(lambda fr: f"{fr[0]} {text(fr[1])}"),
)
also = st.lists(st.tuples(st.sampled_from(FAMILIES), releases), max_size=2).map(tuple)


def text(release: tuple[int, int, int]) -> str:
    return ".".join(map(str, release))


def of(client: str | None) -> tuple[str, tuple[int, ...] | None]:
    """A client string's family and release as numbers (None: no release)."""
    kind, _, version = (client or "librdkafka").partition(" ")
    return kind, tuple(int(p) for p in version.split(".")) if version else None


def oracle(
    release,
    first,
    fixed,
    client_fixed,
    client,
    family=None,
    also_fixed=(),
    still_in=(),
    backported=(),
) -> bool:
    """In range [first, fixed); past fixed (or with no server fix at all) still affected while
    a client-side fix exists and the producer lacks it: it is not the row's family (Java for a
    server's bug) at client_fixed or later, nor another family at its release in also_fixed;
    with no client-side fix, affected exactly when no server fix exists either. A client's bug
    (`family`) never affects another client's producer (None is librdkafka)."""
    kind, version = of(client)
    if family is not None and kind != family:
        return False
    if first is not None and release < first:
        return False
    for backport in backported:  # a line of releases (x.y, or 0.x.y) carries it from there on
        line = 2 if backport[0] >= 1 else 3
        if release[:line] == backport[:line] and release >= backport:
            return False
    if fixed is not None and release < fixed:
        return True
    if release in still_in:  # a release past the fix that lacks it
        return True
    fixes = [(family or "java", client_fixed)] if client_fixed is not None else []
    fixes += list(also_fixed)
    if not fixes:
        return fixed is None
    return not any(kind == f and version is not None and version >= r for f, r in fixes)


def legacy(release, first, fixed, client_fixed, client, family=None) -> bool:
    """KnownBug.affects before client fixes of other families than Java (2026-12-05): past
    fixed, only a Java client at client_fixed or later was protected, and a row with no server
    fix affected every release from `first` on."""
    kind, version = of(client)
    if family is not None and kind != family:
        return False
    if first is not None and release < first:
        return False
    if fixed is None or release < fixed:
        return True
    if client_fixed is None:
        return False
    return kind != "java" or version is None or version < client_fixed


def row(first, fixed, client_fixed, family, also_fixed=(), still_in=(), backported=()) -> KnownBug:
    return KnownBug(
        reference="KAFKA-0",
        explains=CountName.LOSS,
        mechanism="",
        fixed_in=None if fixed is None else text(fixed),
        first_affected=None if first is None else text(first),
        client_fixed_in=None if client_fixed is None else text(client_fixed),
        client_family=family,
        also_fixed_in=tuple((f, text(r)) for f, r in also_fixed),
        still_in=tuple(text(r) for r in still_in),
        backported_in=tuple(text(r) for r in backported),
    )


@settings(max_examples=examples(1.0))
@given(
    release=releases,
    first=st.none() | releases,
    fixed=st.none() | releases,
    client_fixed=st.none() | releases,
    client=clients,
    family=st.sampled_from([None, "librdkafka", *FAMILIES]),
    also_fixed=also,
    still_in=st.lists(releases, max_size=2),
    backported=st.lists(releases, max_size=2),
)
def test_affects_is_the_release_range_and_the_clients_side(
    release, first, fixed, client_fixed, client, family, also_fixed, still_in, backported
):
    bug = row(first, fixed, client_fixed, family, also_fixed, still_in, backported)
    expected = oracle(
        release, first, fixed, client_fixed, client, family, also_fixed, still_in, backported
    )
    assert bug.affects(text(release), client) == expected
    assert not bug.affects(None, client) and not bug.affects("apache/kafka:latest", client)


@settings(max_examples=examples(1.0))
@given(
    release=releases,
    first=st.none() | releases,
    fixed=releases,
    client_fixed=st.none() | releases,
    client=clients,
    family=st.sampled_from([None, "librdkafka", *FAMILIES]),
)
def test_rows_with_a_server_fix_and_no_other_familys_fix_are_judged_as_before(
    release, first, fixed, client_fixed, client, family
):
    """Every row the table had before client fixes of other families (a server's fix, or
    none and no client fix) keeps its range for every client."""
    bug = row(first, fixed, client_fixed, family)
    expected = legacy(release, first, fixed, client_fixed, client, family)
    assert bug.affects(text(release), client) == expected
    open_row = row(first, None, None, family)
    assert open_row.affects(text(release), client) == legacy(
        release, first, None, None, client, family
    )


def test_known_bug_ranges():
    hw, failover, last_replica, last_known = bugs_explaining(CountName.LOSS)
    assert last_known.affects("4.1.0") and last_known.affects("9.9.9")
    assert not last_known.affects("4.0.0") and not last_known.affects("3.9.1")
    assert last_replica.affects("3.9.1") and not last_replica.affects("4.1.0")
    assert hw.affects("0.10.2.2") and not hw.affects("0.11.0.0") and not hw.affects("4.3.1")
    assert failover.affects("0.11.0.3") and failover.affects("1.1.1")
    assert not failover.affects("2.0.0") and not failover.affects("0.10.2.2")
    assert not hw.affects("apache/kafka:latest") and not hw.affects(None)


def test_every_row_of_the_known_bug_table_has_its_evidence_where_its_count_is_judged():
    polls = {b.reference for b in bugs_explaining(AnomalyName.POLL_SKIP)}
    dups = {b.reference for b in bugs_explaining(AnomalyName.DUPLICATED)}
    commits = {b.reference for b in bugs_explaining(AnomalyName.COMMIT_LOST)}
    placed = {b.reference for b in bugs_explaining(AnomalyName.MISPLACED)}
    for bug in KNOWN_BUGS:
        evidence = PARTITION_EVIDENCE if bug.explains == CountName.LOSS else RUN_EVIDENCE
        evidence = LIVENESS_EVIDENCE if bug.reference in polls else evidence
        evidence = DUPLICATE_EVIDENCE if bug.reference in dups else evidence
        evidence = COMMIT_EVIDENCE if bug.reference in commits else evidence
        evidence = PLACEMENT_EVIDENCE if bug.reference in placed else evidence
        assert bug.reference in evidence, bug.reference
        assert bug.experiment, f"{bug.reference}: no experiment provokes it"
    loss_refs = {b.reference for b in bugs_explaining(CountName.LOSS)}
    assert set(PARTITION_EVIDENCE) == loss_refs
    assert set(LIVENESS_EVIDENCE) == polls
    assert set(DUPLICATE_EVIDENCE) == dups
    assert set(COMMIT_EVIDENCE) == commits
    assert set(PLACEMENT_EVIDENCE) == placed
    others = {b.reference for b in KNOWN_BUGS} - loss_refs - polls - dups - commits - placed
    assert set(RUN_EVIDENCE) == others


def test_franz_gos_end_txn_bug_is_bounded_by_the_clients_release():
    [bug] = [b for b in KNOWN_BUGS if b.reference == "franz-go@6ecd2f9f"]
    assert bug.explains == AnomalyName.ABORTED_READ and bug.experiment
    # A release the run did not record ("franz-go") cannot show the fix either.
    for client in ("franz-go 1.21.5", "franz-go 1.19.0", "franz-go 1.21.5.1", "franz-go"):
        assert bug.affects("4.3.1", client) and bug.affects("4.0.0", client), client
    for client in ("franz-go 1.21.6", "franz-go 1.22.3", "franz-go 2.0.0"):
        assert not bug.affects("4.3.1", client), client
    for client in (None, "librdkafka", "java 3.8.0", "sarama 1.61.1", "command franz-go"):
        assert not bug.affects("4.3.1", client), client
    assert not bug.affects("3.9.1", "franz-go 1.21.5")  # transaction version 2 only (4.0 on)
    assert bug.fixed_where() == "fixed in franz-go 1.21.6"
    assert bug.reason("4.3.1", "franz-go 1.21.5").startswith(
        "known bug franz-go@6ecd2f9f of Kafka 4.3.1 with franz-go 1.21.5 (fixed in franz-go 1.21.6)"
    )


def test_kafka_17754_spares_franz_go_from_its_full_kip_890_release():
    rows = [b for b in KNOWN_BUGS if b.reference == "KAFKA-17754"]
    assert len(rows) == 4
    for bug in rows:
        assert bug.affects("4.3.1", "franz-go 1.19.2") and bug.affects("4.3.1", "franz-go 1.18.1")
        assert not bug.affects("4.3.1", "franz-go 1.19.3")
        assert not bug.affects("4.3.1", "franz-go 1.22.3")
        assert bug.affects("3.8.1", "franz-go 1.22.3")  # the server's side is missing
        assert bug.affects("4.3.1", None) and bug.affects("4.3.1", "sarama 1.61.1")
        assert bug.affects("4.3.1", "java 3.8.0") and not bug.affects("4.3.1", "java 4.0.0")
        assert bug.fixed_where() == (
            "fixed in 4.0.0 with the Java client 4.0.0 or later (or franz-go 1.19.3 or later)"
        )


def transactions_run(tmp_path: Path, rows: list[dict]) -> RunEvidence:
    """A run directory holding only transactions.parquet with `rows`."""
    base = {"messages": 6, "begin_ts_us": 1, "end_ts_us": 2}
    table = pa.Table.from_pylist(
        [{**base, "first_msg_id": 6 * r["txn"], **r} for r in rows], schema=TRANSACTION_SCHEMA
    )
    pq.write_table(table, tmp_path / layout.TRANSACTIONS)
    return RunEvidence(run_dir=tmp_path)


def test_franz_gos_evidence_is_an_abort_that_failed_and_was_retried_on_the_same_client(
    tmp_path: Path,
):
    timed_out = "abort: DeadlineExceeded: context deadline exceeded"
    events = transactions_run(
        tmp_path,
        [
            {"txn": 3, "intent": "abort", "outcome": "unknown", "error": timed_out},
            {"txn": 4, "intent": "commit", "outcome": "committed", "error": None},
            {
                "txn": 5,
                "intent": "abort",
                "outcome": "unknown",
                "error": f"{timed_out}; on timeout: reinit",
            },
            {"txn": 6, "intent": "abort", "outcome": "aborted", "error": None},
            {
                "txn": 7,
                "intent": "abort",
                "outcome": "unknown",
                "error": f"commit: X: y; {timed_out}",
            },
        ],
    )
    shown = RUN_EVIDENCE["franz-go@6ecd2f9f"]
    evidence = shown(events, [Example(msg_id=18, txn=3)])
    assert "transaction 3 was only ever to be aborted" in evidence and timed_out in evidence
    for txn in (4, 5, 6, 7, 8, None):  # a commit, a new client, a definite abort, none
        assert shown(events, [Example(msg_id=1, txn=txn)]) == "", txn
    assert shown(events, [Example(txn=5), Example(txn=3)]).startswith("transaction 3")
    assert shown(RunEvidence(run_dir=tmp_path / "none"), [Example(txn=3)]) == ""


def test_kafka_19012_affects_the_java_producers_from_2_8_0_before_4_1_2():
    [bug] = [b for b in KNOWN_BUGS if b.reference == "KAFKA-19012"]
    assert bug.explains == AnomalyName.MISPLACED
    for client in ("java 2.8.0", "java 3.9.1", "java 4.1.1"):
        assert bug.affects("4.3.1", client) and bug.affects("3.8.1", client), client
    for client in ("java 2.7.2", "java 4.1.2", "java 4.3.1", "librdkafka", None, "franz-go 1.22.3"):
        assert not bug.affects("4.3.1", client), client


def test_kafka_20785_affects_clients_of_transaction_version_2_on_4_0_to_4_3_1():
    [bug] = [b for b in KNOWN_BUGS if b.reference == "KAFKA-20785"]
    assert bug.explains == AnomalyName.COMMIT_INVALID_STATE and bug.experiment
    for client in ("java 4.0.0", "java 4.3.1", "franz-go 1.19.3", "franz-go 1.22.3"):
        assert bug.affects("4.3.1", client) and bug.affects("4.0.0", client), client
        assert not bug.affects("4.3.2", client) and not bug.affects("4.4.1", client), client
        assert bug.affects("4.4.0", client), client  # released without the fix
        assert not bug.affects("3.9.1", client), client  # no transaction version 2
    # Clients of transaction version 1 get PRODUCER_FENCED whatever the release.
    for client in ("java 3.9.1", "franz-go 1.19.2", None, "librdkafka", "sarama 1.61.1"):
        assert not bug.affects("4.3.1", client), client
    assert bug.fixed_where() == "fixed in 4.3.2, not in 4.4.0"


def test_kafka_20785s_evidence_is_a_refused_commit_with_its_times():
    shown = RUN_EVIDENCE["KAFKA-20785"]
    evidence = shown(RunEvidence.coerce([]), [Example(txn=7, from_us=1_000_000, to_us=6_500_000)])
    assert evidence.startswith("transaction 7 was open 5.5 s") and "past its timeout" in evidence
    assert shown(RunEvidence.coerce([]), [Example(txn=7)]) == ""
    assert shown(RunEvidence.coerce([]), []) == ""


def unclean_run(tmp_path: Path, logged: bool) -> RunEvidence:
    """A run directory with spec.json's topic and a controller log, which names an unclean
    election of chaos-1 when `logged` (and of chaos-10, another partition, always)."""
    tmp_path.mkdir()
    (tmp_path / layout.SPEC).write_text(json.dumps({"topic": {"name": "chaos", "partitions": 3}}))
    logs = tmp_path / layout.BROKER_LOGS
    logs.mkdir()
    line = "INFO [QuorumController id=101] UNCLEAN partition change for {} with topic ID x\n"
    text = line.format("chaos-10") + (line.format("chaos-1") if logged else "")
    (logs / "controller-101.log").write_text(text)
    return RunEvidence(run_dir=tmp_path)


def test_kafka_20716s_evidence_is_an_unclean_election_of_the_topic(tmp_path: Path):
    shown = RUN_EVIDENCE["KAFKA-20716"]
    evidence = shown(unclean_run(tmp_path / "a", logged=True), ())
    assert evidence.startswith("p1 was elected uncleanly") and "chaos-1 " in evidence
    assert shown(unclean_run(tmp_path / "b", logged=False), ()) == ""
    assert shown(RunEvidence(run_dir=tmp_path / "none"), ()) == ""


def test_hidden_commits_are_kafka_20716_after_an_unclean_election_else_a_violation(
    tmp_path: Path,
):
    config = CellConfig(kafka_version="4.3.1", transactions=True, unclean_leader_election=True)
    counts = {CountName.TXN_COMMITTED: 4, CountName.TXN_COMMITTED_HIDDEN: 27}
    for logged, verdict in ((True, Verdict.KNOWN_BUG), (False, Verdict.VIOLATION)):
        events = unclean_run(tmp_path / str(logged), logged)
        findings = transaction_findings(config, counts, events, {}, loss_is_violation=False)
        [hidden] = [f for f in findings if "hidden commits: 27" in f.detail]
        assert hidden.verdict == verdict, hidden
        assert ("KAFKA-20716" in hidden.detail) == logged


def test_a_backport_ends_the_bug_on_its_own_line():
    """KAFKA-20634's fix is in 4.3.1 and, backported, in 4.2.2 (the jars say so)."""
    [bug] = [b for b in KNOWN_BUGS if b.reference == "KAFKA-20634"]
    affected = {v: bug.affects(v) for v in ("3.9.1", "4.0.0", "4.2.0", "4.2.2", "4.2.3", "4.3.0")}
    assert affected == {
        "3.9.1": False, "4.0.0": True, "4.2.0": True, "4.2.2": False, "4.2.3": False,
        "4.3.0": True,
    }  # fmt: skip
    assert not bug.affects("4.3.1") and not bug.affects("4.4.0")
    assert "4.2.2" in bug.fixed_where()


@given(
    st.lists(st.sampled_from(KNOWN_BUGS), max_size=4),
    st.sampled_from(["0.10.2.2", "3.9.1", "4.3.1"]),
    st.sampled_from(["", "the Java client 3.8.0"]),
    st.text(max_size=20),
)
def test_the_references_read_back_from_findings_are_the_rows_that_wrote_them(
    bugs: list[KnownBug], version: str, client: str, before: str
) -> None:
    """Oracle: the rows whose reasons were written. A reference with spaces ("KIP-966 part 2")
    and one that begins another ("KIP-966") are told apart, wherever the reason sits."""
    reasons = [before + bug.reason(version, client) for bug in bugs]
    assert references_in(reasons) == {bug.reference for bug in bugs}
