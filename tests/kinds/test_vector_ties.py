"""Vector kinds order tied scores by id, reading past the cut until the tie closes."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest

from benchd.embed.config import EmbedConfig
from benchd.kinds.vectors import Scored, VectorStore, embed_stage, tie_ordered
from benchd.store.target import SearchQuery

pytestmark = pytest.mark.anyio


class ShuffledTies:
    """Three distinct scores, then 30 records tied at 0 answered in a new order every call."""

    where = "a store"

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)
        self.asked: list[int] = []

    async def search(self, vector: Sequence[float], limit: int) -> list[Scored]:
        self.asked.append(limit)
        tied = [(f"id-{i:02d}", 0.0) for i in range(30)]
        self.random.shuffle(tied)
        return ([("top-a", 0.9), ("top-b", 0.5), ("top-c", 0.2), *tied])[:limit]

    async def aclose(self) -> None:
        return None


def store(io: Any, tmp: str) -> VectorStore:
    return VectorStore(io, embed_stage(EmbedConfig(model="hash:8", cache_dir=tmp)), "x")


async def test_tied_scores_come_back_in_one_order_whatever_order_the_store_used(
    tmp_path: Any,
) -> None:
    answers = []
    for seed in range(5):
        io = ShuffledTies(seed)
        s = store(io, str(tmp_path))
        s.seeded([object()] * 33)  # type: ignore[list-item]
        # as the flow asks it (NamespaceFlow.asked): k = 10 and room for the sentinel
        answers.append((await s.search(SearchQuery(q="q", limit=11))).ids)
        assert io.asked == [22, 44]  # the tie at the cut ran past 22: read on, once
        await s.aclose()
    assert all(a == answers[0] for a in answers)
    assert answers[0][:3] == ["top-a", "top-b", "top-c"]
    assert answers[0][3:] == [f"id-{i:02d}" for i in range(8)]


def test_tie_ordered_keeps_scores_and_orders_only_within_a_tie() -> None:
    hits = [("b", 0.9), ("a", 0.9 + 1e-9), ("z", 0.5), ("c", None), ("a2", None)]
    assert tie_ordered(hits) == [("a", 0.9 + 1e-9), ("b", 0.9), ("z", 0.5), ("c", None),
                                 ("a2", None)]  # fmt: skip
