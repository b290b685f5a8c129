"""KnownBug.affects against an oracle written here: releases and clients as number tuples."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.judge.known_bugs import KnownBug
from analysis.model.anomalies import CountName
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
