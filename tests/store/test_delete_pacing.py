"""Deletes are spaced to the probe's share of its key's write budget (#27), counted as they
leave for a real reference store on loopback.

A cleanup used to send one ``DELETE`` per record, ``delete_concurrency`` in
flight, as fast as the store answered: against a per-key write limit (the
real server's 60 a minute) the whole budget went in one burst and the store's
429s did the pacing, for the heartbeat and the key's other probes too. Now a
cleanup sends one window's share of the budget at once and the rest at the
share's rate: by the time ``t`` after the listing that cleared them, at most
``share × (window + t)`` deletes have left. Bounded by counts, the bound is
exact (a slow box only sends later); the window is cut to 1 s here so the
spaced part shows in a few seconds.
"""

from __future__ import annotations

import time

import httpx
import pytest
from fake_store import FakeStore
from listing_support import listed_in

from benchd.config.secrets import Secret
from benchd.kinds.zengram import ZengramConfig, ZengramTarget
from benchd.refstore.testing import started_refstore
from benchd.store import pacing
from benchd.store.lease import LeaseHolder

pytestmark = pytest.mark.anyio
NS = "benchd-delete-pacing"
MEMORIES = [{"id": f"d{i}", "content": f"paced delete note {i}"} for i in range(13)]
RATE = 4.0  # deletes a second: 240 writes a minute, this probe's share
WINDOW_S = 1.0  # ... counted in 1 s windows: 4 deletes at once, the other 9 spaced


class _Sent(FakeStore):
    """Passes every request to the store and notes when each left, by method."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[str, float]] = []

    async def answer(self, request: httpx.Request) -> httpx.Response:
        self.sent.append((request.method, time.monotonic()))
        return await self.forward(request)


async def _cleanup_sends(rate: float | None) -> list[tuple[str, float]]:
    """Seed the corpus, then clean it up at ``rate``; the requests the cleanup sent."""
    sent = _Sent()
    with started_refstore() as store:
        settings = ZengramConfig(
            url=store.url, namespace=NS, cleanup="after", searchable_timeout_s=0.0
        )
        target = ZengramTarget(
            settings,
            Secret(store.api_key, "test"),
            connect=sent,
            lease=LeaseHolder(instance="ci", ttl_s=600.0),
            write_rate=lambda: rate,
        )
        try:
            await target.seed(MEMORIES)
            sent.sent.clear()
            assert await target.cleanup([m["id"] for m in MEMORIES]) == len(MEMORIES)
            assert await listed_in(target) != {}  # the sentinel stays
            assert target.leftover_records == 1  # ... and only the sentinel
        finally:
            await target.aclose()
    return sent.sent


async def test_a_cleanup_keeps_within_its_share_of_the_write_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pacing, "WINDOW_S", WINDOW_S)
    sent = await _cleanup_sends(RATE)
    first = next(i for i, (method, _) in enumerate(sent) if method == "DELETE")
    # the listing that cleared the deletes left before the first delete's turn began
    cleared = max(t for method, t in sent[:first] if method == "GET")
    deletes = [t for method, t in sent if method == "DELETE"]
    assert len(deletes) == len(MEMORIES)
    for n, at in enumerate(deletes, start=1):  # n deletes have left by ``at``
        allowed = RATE * (WINDOW_S + at - cleared)
        assert n <= allowed, f"{n} deletes {at - cleared:.3f}s after the listing: {allowed:.2f}"

