"""A cycle reads a streamed corpus only for what it writes or checks: one pass a seed,
none to tell the store the corpus's time, none after a check that found nothing to write.

Against the reference store on loopback, through the zengram target, with a JSON Lines
corpus (:class:`~benchd.fixtures.stream.StreamedMemories`) whose whole passes are counted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from benchd.config.secrets import Secret
from benchd.fixtures.model import load_fixture
from benchd.fixtures.stream import StreamedMemories
from benchd.kinds.zengram import ZengramConfig, ZengramTarget
from benchd.refstore.server import RunningRefStore
from benchd.refstore.testing import running_refstore_fixture
from benchd.store import seeding
from benchd.store.target import SearchQuery

pytestmark = pytest.mark.anyio

KEY = "passes-test-key-0042"
NS = "benchd-passes"
BOUND_S = 60  # a bound against a hung test, never a timing assertion


store = running_refstore_fixture(api_key=KEY, retriever="bm25")


@pytest.fixture
def passes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many whole passes over a streamed corpus were begun."""
    begun = [0]
    real = StreamedMemories.__iter__

    def counted(self: StreamedMemories) -> Iterator[Mapping[str, Any]]:
        begun[0] += 1
        return real(self)

    monkeypatch.setattr(StreamedMemories, "__iter__", counted)
    return begun


def corpus(path: Path, n: int, *, dated: bool = True, changed: int = -1) -> StreamedMemories:
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            memory: dict[str, Any] = {"id": f"m{i}", "type": "event"}
            memory["content"] = f"Passes record {i} about topic{i}" + (" again" * (i == changed))
            if dated or i % 2:
                memory["created_at"] = f"2025-03-{1 + i % 28:02d}T10:00:00Z"
            fh.write(json.dumps({"memory": memory}) + "\n")
        fh.write(json.dumps({"query": {"q": "topic1", "expected_ids": ["m1"]}}) + "\n")
    memories = load_fixture(path).memories
    assert isinstance(memories, StreamedMemories)
    return memories


async def seed(store: RunningRefStore, memories: StreamedMemories) -> tuple[Any, str | None]:
    config = ZengramConfig(url=store.url, namespace=NS, max_retries=0, cleanup="never")
    target = ZengramTarget(config, Secret(KEY, "test"))
    try:
        with anyio.fail_after(BOUND_S):
            report = await target.seed(memories)
        anchor = target.store.build_search_request(SearchQuery(q="x", limit=1))
        return report, anchor.url.params.get("reference_date")
    finally:
        await target.aclose()


async def test_a_fresh_seed_reads_the_corpus_once(
    store: RunningRefStore, passes: list[int], tmp_path: Path
) -> None:
    report, anchor = await seed(store, corpus(tmp_path / "c.jsonl", 150))
    assert (report.imported, report.verified) == (150, 150)
    assert passes[0] == 1  # the writes'; the corpus's time was known from the load
    assert anchor == "2025-03-28T10:00:00.000Z"


async def test_a_kept_corpus_is_read_once_and_a_changed_one_not_again_for_a_few_writes(
    store: RunningRefStore, passes: list[int], tmp_path: Path
) -> None:
    await seed(store, corpus(tmp_path / "c.jsonl", 150))
    passes[0] = 0
    report, _ = await seed(store, corpus(tmp_path / "c.jsonl", 150))
    assert (report.unchanged, report.imported) == (150, 0)
    assert passes[0] == 1  # the check; nothing to write, so no second pass
    passes[0] = 0
    report, _ = await seed(store, corpus(tmp_path / "d.jsonl", 150, changed=7))
    assert (report.unchanged, report.imported) == (149, 1)
    assert passes[0] == 1  # the one record to write was held from the check


async def test_many_changed_records_are_read_again_for_their_writes(
    store: RunningRefStore, passes: list[int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(seeding, "HELD_WRITES", 3)
    await seed(store, corpus(tmp_path / "c.jsonl", 40))
    memories = corpus(tmp_path / "d.jsonl", 40)
    lines = memories.path.read_text(encoding="utf-8").replace("Passes", "Changed")
    memories.path.write_text(lines, encoding="utf-8")
    passes[0] = 0
    report, _ = await seed(store, load_fixture(memories.path).memories)  # type: ignore[arg-type]
    assert (report.unchanged, report.imported) == (0, 40)
    assert passes[0] == 2  # the check, then the writes (more than HELD_WRITES to write)


async def test_an_undated_part_of_the_corpus_is_read_alone_for_the_corpus_time(
    store: RunningRefStore, passes: list[int], tmp_path: Path
) -> None:
    """Memories without created_at are dated by benchd as it writes them: the corpus's time
    is the latest of those (as stored) and the fixture's own dates, the file read only for
    the undated memories (from their noted line starts), not in a whole pass."""
    memories = corpus(tmp_path / "c.jsonl", 150, dated=False)
    assert len(memories.dates.undated) == 75
    _, first = await seed(store, memories)
    assert passes[0] == 1 and first is not None and first > "2026"  # benchd's own dates
    passes[0] = 0
    _, again = await seed(store, memories)
    assert passes[0] == 1 and again == first  # as stored by the first seed
