"""A listing kept by corpus position says exactly what a dict of its records says.

:class:`~benchd.store.idtable.ListedTable` and :class:`IdSet` replace a
dict and a set of 10^6 store ids (docs/load.md); every decision the flow
takes from them (what is benchd's, what is held, what a cleanup deletes)
must be the one it took from the dict. These tests generate whole
sequences of listed records — benchd's ids of the corpus, of another
corpus, foreign ids, sentinels, records with leases, marks under another
id, repeated ids — and compare each answer with the dict's.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from benchd.store.idtable import IdSet, ListedRows, ListedTable, SeenIds
from benchd.store.lease import Holder
from benchd.store.listing import Listing, digest, fingerprint
from benchd.store.namespace import Namespace
from benchd.store.owned import OwnedIds, legacy_sentinel_id, owned_id, sentinel_id, sentinel_text
from benchd.store.protocol import Listed

NS = "benchd-eval"
CORPUS = [f"m{i}" for i in range(12)] + ["#hashed", "x" * 140]  # two ids owned_id hashes
OWNED = OwnedIds(NS, CORPUS)
HOLDER = Holder("h", 1, "t", heartbeat=1.0, ttl_s=60.0, fixture_hash="f")

ids = st.one_of(
    st.sampled_from([owned_id(NS, f) for f in CORPUS]),  # benchd's copies of the corpus
    st.sampled_from([owned_id(NS, "old-1"), owned_id("other-ns", "m1"), "m1", "m2", "srv-9"]),
    st.sampled_from([sentinel_id(NS), legacy_sentinel_id(NS)]),
)
kept = st.one_of(st.none(), st.binary(min_size=24, max_size=24), st.binary(max_size=8))
created = st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False))


@st.composite
def listed(draw: Any) -> Listed:
    sid = draw(ids)
    written_as = draw(
        st.sampled_from([None, sid, owned_id(NS, "m3"), owned_id(NS, "gone"), "m4"])
    )
    text_digest = draw(st.sampled_from([None, None, digest(sentinel_text(NS)), "f" * 64]))
    lease = draw(st.sampled_from([None, None, HOLDER]))
    return Listed(sid, written_as, text_digest, lease, draw(kept), draw(created))


def _table(records: list[Listed]) -> tuple[ListedTable, dict[str, Listed]]:
    table, plain = ListedTable(OWNED), {}
    for record in records:
        table.add(record)
        plain[record.id] = record
    return table, plain


@settings(max_examples=300, deadline=None)
@given(st.lists(listed(), max_size=40))
def test_a_table_reads_like_the_dict_of_the_same_records(records: list[Listed]) -> None:
    table, plain = _table(records)
    assert dict(table) == plain
    assert len(table) == len(plain) and set(table) == set(plain)
    for sid in {*plain, owned_id(NS, "m0"), "nope"}:
        assert (sid in table) == (sid in plain)
        assert table.get(sid) == plain.get(sid)
    assert dict(table.copy()) == plain


@settings(max_examples=300, deadline=None)
@given(st.lists(listed(), max_size=40), st.lists(listed(), max_size=5))
def test_a_listing_over_a_table_decides_what_the_listing_over_the_dict_decides(
    records: list[Listed], read_back: list[Listed]
) -> None:
    table, plain = _table(records)
    fast, slow = Listing(table, OWNED), Listing(plain, OWNED)
    assert dict(fast.claimed) == dict(slow.claimed)
    assert fast.sentinels == slow.sentinels
    assert set(fast.held) == set(slow.held) and len(fast.held) == len(slow.held)
    assert fast.foreign == slow.foreign and len(fast) == len(slow)
    assert fast.lease == slow.lease
    assert sorted(fast.legacy()) == sorted(slow.legacy())
    for fid in [*CORPUS, "old-1", "nope"]:
        assert fast.claims(fid) == slow.claims(fid)
        assert fast.fixture_listed(fid) == slow.fixture_listed(fid)
    extra = {r.id: r for r in read_back}
    assert dict(fast.merged(extra).claimed) == dict(slow.merged(extra).claimed)
    assert dict(fast.claimed) == dict(Listing(plain, OWNED).claimed)  # merged left it alone


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), ids), max_size=40),
    st.lists(listed(), max_size=30),
)
def test_held_ids_beside_a_new_listing_are_the_sets_answer(
    changes: list[tuple[bool, str]], records: list[Listed]
) -> None:
    """What the flow holds after a listing: the ids it claims, and the held ones it does not
    claim (a sent batch the listing does not show yet, the sentinel)."""
    held, plain = IdSet(OWNED), set[str]()
    for add, sid in changes:
        (held.add if add else held.discard)(sid)
        (plain.add if add else plain.discard)(sid)
        assert (sid in held) == (sid in plain)
    assert set(held) == plain and len(held) == len(plain)
    table, by_id = _table(records)
    claimed = Listing(by_id, OWNED).claimed
    expected = set(claimed) | (plain - claimed.keys())
    assert set(Listing(table, OWNED).held_beside(held)) == expected
    assert set(Listing(by_id, OWNED).held_beside(held)) == expected
    # held under an earlier corpus's positions: the same ids
    other = OwnedIds(NS, list(reversed(CORPUS)))
    assert set(Listing(table, OWNED).held_beside(IdSet(other, plain))) == expected


prefix = OWNED.prefix
odd_ids = st.one_of(
    ids,
    st.sampled_from(
        [prefix, prefix + "#", prefix + "#abc", prefix + "x" * 140, prefix + "m1 ", "benchd:"]
    ),
    st.builds(lambda tail: prefix + tail, st.text(max_size=130)),  # any length, '#' or not
    st.text(max_size=20),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(odd_ids, max_size=40), st.lists(st.tuples(st.booleans(), odd_ids), max_size=10))
def test_ids_looked_up_in_one_loop_find_what_each_looked_up_alone_finds(
    store_ids: list[str], before: list[tuple[bool, str]]
) -> None:
    """``indexes`` and the bulk ``update`` it serves say what ``index`` and ``add`` say one
    id at a time, for benchd's ids, hashed ones, over-long ones and any other string."""
    assert OWNED.indexes(store_ids) == [OWNED.index(s) for s in store_ids]
    assert OWNED.indexes(iter(store_ids)) == [OWNED.index(s) for s in store_ids]
    bulk, one_by_one = IdSet(OWNED), IdSet(OWNED)
    for add, sid in before:
        for held in (bulk, one_by_one):
            (held.add if add else held.discard)(sid)
    bulk.update(s for s in store_ids)
    for sid in store_ids:
        one_by_one.add(sid)
    assert set(bulk) == set(one_by_one) and len(bulk) == len(one_by_one)
    assert set(IdSet(OWNED, store_ids)) == set(store_ids)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.sampled_from([f"id-{i}" for i in range(60)]), max_size=8)))
def test_seen_ids_tell_a_page_with_nothing_new_as_a_set_would(pages: list[list[str]]) -> None:
    seen, plain = SeenIds(merge_at=4), set[str]()  # merged into the sorted array often
    for page in pages:
        assert seen.add_new(page) == (not plain.issuperset(page))
        plain.update(page)
        assert len(seen) == len(plain)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 2999), max_size=120), max_size=40),
    st.lists(st.integers(0, 3999), max_size=50),
)
def test_seen_ids_merged_often_and_filtered_still_answer_as_a_set_would(
    pages: list[list[int]], probes: list[int]
) -> None:
    """Many merges (each recent hash put in its place in the array, the filter set anew as
    the array grows): every page's answer, the count and the array are the set's."""
    seen, plain = SeenIds(merge_at=16), set[str]()
    for numbers in pages:
        page = [f"id-{n}" for n in numbers]
        assert seen.add_new(page) == (not plain.issuperset(page))
        plain.update(page)
        assert len(seen) == len(plain)
    held = [] if seen._sorted is None else seen._sorted.tolist()
    assert held == sorted(held) and len(set(held)) == len(held)
    assert set(held) | seen._recent == {hash(i) for i in plain}
    if seen._sorted is not None:
        import numpy as np

        wanted = np.array([hash(f"id-{n}") for n in probes], dtype=np.int64)
        assert seen._in_sorted(wanted).tolist() == [h in set(held) for h in wanted.tolist()]


def test_a_table_of_the_corpus_keeps_no_object_per_record() -> None:
    owned = OwnedIds(NS, [f"doc-{i}" for i in range(1000)])
    table = ListedTable(owned)
    for i in range(1000):
        sid = owned_id(NS, f"doc-{i}")
        table.add(Listed(sid, sid, kept=fingerprint(f"t{i}", "event"), created_s=float(i)))
    assert len(table) == 1000 and not table.extras
    assert table[owned_id(NS, "doc-7")].created_s == 7.0
    assert table.position(owned_id(NS, "doc-7")) == 7


@st.composite
def row(draw: Any) -> tuple[str, str | None, Holder | None, bytes | None, float | None]:
    """A listed record as a kind gives it in rows: no digest; a date may be NaN."""
    record = draw(listed())
    moment = draw(st.one_of(st.just(record.created_s), st.just(float("nan"))))
    return record.id, record.written_as, record.lease, record.kept, moment


@settings(max_examples=300, deadline=None)
@given(st.lists(row(), max_size=40), st.lists(listed(), max_size=5))
def test_rows_added_at_once_keep_what_their_records_added_one_by_one_keep(
    rows: list[tuple[str, str | None, Holder | None, bytes | None, float | None]],
    before: list[Listed],
) -> None:
    page = ListedRows()
    for one in rows:
        page.append(one)
    records = [Listed(sid, wa, None, lease, kept, at) for sid, wa, lease, kept, at in rows]
    assert len(page) == len(records) and list(page) == records and page[1:3] == records[1:3]
    fast, slow = _table(before)[0], _table(before)[0]  # a listing's earlier pages
    fast.add_all(page)
    for record in records:
        slow.add(record)
    assert dict(fast) == dict(slow) == {**{r.id: r for r in before}, **{r.id: r for r in records}}
    assert fast.extras == slow.extras and fast.by_position == slow.by_position
    assert fast.listed_flags() == slow.listed_flags()


class _Plan:
    namespace = NS


class _Store:
    plan = _Plan()


@settings(max_examples=200, deadline=None)
@given(st.lists(listed(), max_size=40), st.dictionaries(st.sampled_from(CORPUS), ids, max_size=3))
def test_a_corpus_record_finds_its_listed_copy_as_a_lookup_by_its_server_id_does(
    records: list[Listed], assigned: dict[str, str]
) -> None:
    """What the seeded corpus's records carry (the listing's copy of each) is the listing's
    record under the fixture memory's server id, whether or not the store assigned it."""
    ns = Namespace(_Store())  # type: ignore[arg-type]
    ns.owned = OWNED
    ns.server_ids = dict(assigned)
    table, plain = _table(records)
    for fid in [*CORPUS, "not-in-corpus"]:
        record = ns.record({"id": fid}, Listing(table, OWNED))
        assert record.listed == plain.get(ns.server_id(fid))
        assert record.listed == ns.record({"id": fid}, Listing(plain, OWNED)).listed


@settings(max_examples=300, deadline=None)
@given(
    st.lists(listed(), max_size=40),
    st.lists(listed(), max_size=5),
    st.booleans(),
    st.lists(st.sampled_from(CORPUS), max_size=3),
)
def test_the_ids_a_verify_finds_missing_are_those_asked_one_by_one(
    records: list[Listed], read_back: list[Listed], merged: bool, twice: list[str]
) -> None:
    """Only the positions a listing's table does not list are asked: the same ids missing,
    in the same order, as asking each of the corpus (one repeated: each asked)."""
    for corpus in (CORPUS, [*CORPUS, *twice]):
        ns = Namespace(_Store())  # type: ignore[arg-type]
        ids = tuple(corpus)
        ns.own(ids)
        table, plain = ListedTable(ns.owned), {}
        for record in records:
            table.add(record)
            plain[record.id] = record
        listing = Listing(table, ns.owned)
        if merged:
            listing = listing.merged({r.id: r for r in read_back})
        found = ns.learn(listing)
        expected = [f for f in ids if not found(f)]
        assert ns.not_found(ids, found, listing) == expected
        assert ns.not_found(list(ids), found, listing) == expected
        slow = Listing(plain if not merged else dict(listing.records), ns.owned)
        assert ns.not_found(ids, ns.learn(slow), slow) == expected


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from([NS, "n" * 64, "n" * 65]),
    st.lists(
        st.one_of(st.text(max_size=8), st.builds(lambda n: "x" * n, st.integers(0, 130))),
        max_size=20,
    ),
)
def test_the_ids_owned_id_hashes_are_mapped_back(namespace: str, fixture_ids: list[str]) -> None:
    """Exactly the fixture ids ``owned_id`` hashes (long, or starting with '#') are mapped
    back from their hashed ids; every owned id finds its fixture id's last position."""
    owned = OwnedIds(namespace, fixture_ids)
    prefix = owned.prefix
    assert owned._hashed == {
        owned_id(namespace, f): f for f in fixture_ids if owned_id(namespace, f) != prefix + f
    }
    for fid in fixture_ids:
        assert owned.index(owned_id(namespace, fid)) == max(
            n for n, f in enumerate(fixture_ids) if f == fid
        )


@settings(max_examples=300, deadline=None)
@given(
    st.lists(listed(), max_size=40),
    st.lists(st.one_of(st.none(), st.binary(min_size=24, max_size=24)), max_size=14),
    st.integers(min_value=0, max_value=len(CORPUS)),
    st.booleans(),
)
def test_the_kept_bytes_compared_at_once_are_those_compared_one_by_one(
    records: list[Listed], wanted: list[bytes | None], start: int, copy_listed: bool
) -> None:
    """A position is equal where the dict holds benchd's id for it with ``kept`` equal to
    the wanted bytes and the table keeps it by position; ``copy_listed`` makes the wanted
    bytes those listed (the run compared in one piece)."""
    table, plain = _table(records)
    wanted = wanted[: len(CORPUS) - start]
    if copy_listed:
        wanted = [
            (plain[s].kept if (s := OWNED.store_id_at(start + n)) in plain else w)
            for n, w in enumerate(wanted)
        ]
    same = table.kept_equal(start, wanted)
    assert len(same) == len(wanted)
    for n, want in enumerate(wanted):
        at = start + n
        sid = OWNED.store_id_at(at)
        listed = plain.get(sid)
        expected = (
            table.position(sid) == at
            and listed is not None
            and want is not None
            and listed.kept == want
        )
        assert same[n] == expected, (n, listed, want)
