"""The known-bug table: KnownBug.affects against an oracle written here (releases and clients as
number tuples), the rows' ranges, and each row's evidence where its count is judged."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.judge.commits import COMMIT_EVIDENCE
from analysis.judge.duplicates import DUPLICATE_EVIDENCE
from analysis.judge.known_bugs import KNOWN_BUGS, KnownBug, bugs_explaining
from analysis.judge.liveness import LIVENESS_EVIDENCE
from analysis.judge.mechanisms import PARTITION_EVIDENCE
from analysis.judge.transactions import RUN_EVIDENCE
from analysis.model.anomalies import AnomalyName, CountName
from tests.examples import examples

releases = st.tuples(st.integers(0, 5), st.integers(0, 12), st.integers(0, 4))
clients = st.one_of(
    st.none(),
    st.just("librdkafka"),
    releases.map(lambda r: "java " + ".".join(map(str, r))),
)


def text(release: tuple[int, int, int]) -> str:
    return ".".join(map(str, release))


def oracle(release, first, fixed, client_fixed, client, family=None) -> bool:
    """In range [first, fixed); past fixed still affected while a client-side fix is needed
    and the producer is not the Java client at that release or later; a client's bug
    (`family`) never affects another client's producer (None is librdkafka)."""
    if family is not None and (client or "librdkafka").split(" ")[0] != family:
        return False
    if first is not None and release < first:
        return False
    if fixed is None or release < fixed:
        return True
    if client_fixed is None:
        return False
    if client is None or not client.startswith("java "):
        return True
    return tuple(int(p) for p in client.removeprefix("java ").split(".")) < client_fixed


@settings(max_examples=examples(1.0))
@given(
    release=releases,
    first=st.none() | releases,
    fixed=st.none() | releases,
    client_fixed=st.none() | releases,
    client=clients,
    family=st.sampled_from([None, "librdkafka", "java"]),
)
def test_affects_is_the_release_range_and_the_clients_side(
    release, first, fixed, client_fixed, client, family
):
    bug = KnownBug(
        reference="KAFKA-0",
        explains=CountName.LOSS,
        mechanism="",
        fixed_in=None if fixed is None else text(fixed),
        first_affected=None if first is None else text(first),
        client_fixed_in=None if client_fixed is None else text(client_fixed),
        client_family=family,
    )
    expected = oracle(release, first, fixed, client_fixed, client, family)
    assert bug.affects(text(release), client) == expected
    assert not bug.affects(None, client) and not bug.affects("apache/kafka:latest", client)


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
    for bug in KNOWN_BUGS:
        evidence = PARTITION_EVIDENCE if bug.explains == CountName.LOSS else RUN_EVIDENCE
        evidence = LIVENESS_EVIDENCE if bug.reference in polls else evidence
        evidence = DUPLICATE_EVIDENCE if bug.reference in dups else evidence
        evidence = COMMIT_EVIDENCE if bug.reference in commits else evidence
        assert bug.reference in evidence, bug.reference
        assert bug.experiment, f"{bug.reference}: no experiment provokes it"
    loss_refs = {b.reference for b in bugs_explaining(CountName.LOSS)}
    assert set(PARTITION_EVIDENCE) == loss_refs
    assert set(LIVENESS_EVIDENCE) == polls
    assert set(DUPLICATE_EVIDENCE) == dups
    assert set(COMMIT_EVIDENCE) == commits
    others = {b.reference for b in KNOWN_BUGS} - loss_refs - polls - dups - commits
    assert set(RUN_EVIDENCE) == others
