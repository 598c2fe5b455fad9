"""What a listing keeps of each record: fingerprints (their fast paths equal to the general
case), and none while nothing will compare them (``uncompared``)."""

from __future__ import annotations

import pytest

from benchd.store.listing import _blake, fingerprint, text_fingerprint, uncompared


class _Store:
    def __init__(self) -> None:
        self.compares = True
        self.seen: list[bool] = []


@pytest.mark.anyio
async def test_the_store_compares_nothing_while_the_listing_runs_and_again_after() -> None:
    store = _Store()

    async def listing() -> str:
        store.seen.append(store.compares)
        return "listed"

    assert await uncompared(store, listing) == "listed"
    assert store.seen == [False]
    assert store.compares is True


@pytest.mark.anyio
async def test_a_failed_listing_leaves_the_store_comparing() -> None:
    store = _Store()

    async def listing() -> str:
        raise RuntimeError("the page did not come")

    with pytest.raises(RuntimeError):
        await uncompared(store, listing)
    assert store.compares is True


@pytest.mark.anyio
async def test_a_store_without_the_switch_is_listed_as_it_is() -> None:
    class Plain:
        pass

    plain = Plain()

    async def listing() -> int:
        return 3

    assert await uncompared(plain, listing) == 3
    assert not hasattr(plain, "compares")


@pytest.mark.parametrize("text", ["", "k", "benchd:ns:key", "é\u2028\ud800", "s3:abc"])
def test_one_texts_fingerprint_is_the_general_cases(text: str) -> None:
    general = _blake("".join(f"s{len(v)}:{v}" for v in (text,)))
    assert text_fingerprint(text) == general == fingerprint(text)
    assert fingerprint(text, None) != fingerprint(text)
