"""The corpus as the seeder writes it, as rows: each row, and each batch read as records,
is the :class:`~benchd.store.protocol.Record` :meth:`Namespace.record` makes."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from benchd.store.namespace import Namespace, RecordRows

fixture_ids = st.one_of(
    st.text(max_size=20),
    st.sampled_from(["#hashed", "#", "x" * 140, "x" * 111, "x" * 112, "x" * 113]),
    st.integers(),  # a fixture id that is no string
)
namespaces = st.sampled_from(["benchd-eval", "n" * 64, "n" * 65])  # the last: hashed prefix


class _Plan:
    def __init__(self, namespace: str) -> None:
        self.namespace = namespace


class _Store:
    def __init__(self, namespace: str) -> None:
        self.plan = _Plan(namespace)


@settings(max_examples=300, deadline=None)
@given(namespaces, st.lists(fixture_ids, max_size=30), st.integers(1, 7))
def test_rows_and_their_batches_are_the_records_the_namespace_makes(
    namespace: str, ids: list[Any], size: int
) -> None:
    ns = Namespace(_Store(namespace))  # type: ignore[arg-type]
    memories = [{"id": fid, "content": f"c{n}"} for n, fid in enumerate(ids)]
    ns.own(tuple(str(m["id"]) for m in memories))
    records = list(ns.records(memories))
    rows = list(ns.rows(memories))
    assert rows == [(r.store_id, r.fixture_id, r.memory) for r in records]
    assert all(r.mark == {"namespace": namespace, "fixture_id": r.fixture_id} for r in records)
    batches = list(ns.batches(iter(rows), size))
    assert all(isinstance(b, RecordRows) and 0 < len(b) <= size for b in batches)
    assert [r for b in batches for r in b] == records
    assert [b[n] for b in batches for n in range(len(b))] == records
    assert [r for b in batches for r in b[:]] == records
