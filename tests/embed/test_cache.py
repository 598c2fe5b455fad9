"""The vector cache: one width per label, never through a link, never another program's file."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hostile_embeddings import HostileEmbeddings
from structlog.testing import capture_logs

from benchd.embed.cache import APPLICATION_ID, CACHE_FILE, CacheRefused, VectorCache
from benchd.embed.config import EmbedConfig
from benchd.embed.models import HashEmbedder
from benchd.embed.stage import EmbedStage
from benchd.kinds.vectors import embed_stage

TEXTS = [f"memory {i} about the staging database on port {5000 + i}" for i in range(6)]


@pytest.fixture
def endpoint() -> Iterator[HostileEmbeddings]:
    with HostileEmbeddings(dims=16) as server:
        yield server


def stage(endpoint: HostileEmbeddings, tmp_path: Path) -> EmbedStage:
    config = EmbedConfig(model=f"openai:{endpoint.url}#hash", cache_dir=str(tmp_path))
    return embed_stage(config)


@pytest.mark.anyio
async def test_a_width_change_under_one_label_is_recomputed_counted_and_logged(
    endpoint: HostileEmbeddings, tmp_path: Path
) -> None:
    first = stage(endpoint, tmp_path)
    await first.passages(TEXTS[:4])
    await first.aclose()
    endpoint.dims = 32  # the endpoint's model swapped behind the same name
    later = stage(endpoint, tmp_path)
    with capture_logs() as events:
        mixed = await later.passages(TEXTS)  # 4 cached at 16, 2 new: computed at 32
        again = await later.passages(TEXTS)
    assert mixed.shape == again.shape == (6, 32)
    assert np.allclose(mixed, HashEmbedder(32).embed_sync(TEXTS), atol=1e-6)
    assert later.model_changes == 1 and later.recomputed == 4
    assert [e["event"] for e in events if e["log_level"] == "warning"] == [
        "embed_model_changed",
        "embed_cache_width_changed",
    ]
    await later.aclose()
    with sqlite3.connect(tmp_path / CACHE_FILE) as db:
        widths = {row[0] for row in db.execute("SELECT dims FROM vectors")}
    assert widths == {32}


@pytest.mark.anyio
async def test_a_cache_of_mixed_widths_serves_only_the_latest(
    endpoint: HostileEmbeddings, tmp_path: Path
) -> None:
    """A file written before widths were kept apart may hold two widths under one label."""
    label = f"openai:{endpoint.url}#hash"
    cache = VectorCache(tmp_path)
    cache.put(label, "passage", TEXTS[:3], HashEmbedder(16).embed_sync(TEXTS[:3]))
    with sqlite3.connect(tmp_path / CACHE_FILE) as db:
        db.execute("DELETE FROM widths")
        vector = np.ones(32, dtype="<f4").tobytes()
        db.execute(
            "INSERT INTO vectors VALUES (?, 'passage', ?, 32, ?)", (label, b"x" * 32, vector)
        )
    cache.close()
    s = stage(endpoint, tmp_path)
    vectors = await s.passages(TEXTS)
    assert vectors.shape == (6, 16)
    await s.aclose()


def test_the_cache_file_is_not_followed_through_a_symlink(tmp_path: Path) -> None:
    other = tmp_path / "elsewhere.sqlite3"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE mine (x)")
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    (cache_dir / CACHE_FILE).symlink_to(other)
    with pytest.raises(CacheRefused, match="symbolic link"):
        VectorCache(cache_dir)
    with sqlite3.connect(other) as db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
        (mode,) = db.execute("PRAGMA journal_mode").fetchone()
    assert tables == {"mine"} and mode == "delete"


def test_another_programs_database_is_refused_untouched(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / CACHE_FILE) as db:
        db.execute("CREATE TABLE accounts (name, balance)")
    with pytest.raises(CacheRefused, match="another program's SQLite database"):
        VectorCache(tmp_path)
    with sqlite3.connect(tmp_path / CACHE_FILE) as db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
        (mode,) = db.execute("PRAGMA journal_mode").fetchone()
        (app,) = db.execute("PRAGMA application_id").fetchone()
    assert tables == {"accounts"} and mode == "delete" and app == 0


def test_a_cache_written_before_the_marker_is_adopted(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / CACHE_FILE) as db:
        db.execute(
            "CREATE TABLE vectors (model TEXT NOT NULL, role TEXT NOT NULL, digest BLOB NOT NULL,"
            " dims INTEGER NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (model, role, digest))"
        )
    cache = VectorCache(tmp_path)
    cache.put("hash:4", "query", ["a"], np.ones((1, 4), dtype=np.float32))
    assert cache.width("hash:4") == 4
    assert set(cache.get("hash:4", "query", ["a"], 4)) == {0}
    assert cache.get("hash:4", "query", ["a"], 8) == {}
    cache.close()
    with sqlite3.connect(tmp_path / CACHE_FILE) as db:
        assert db.execute("PRAGMA application_id").fetchone() == (APPLICATION_ID,)


@pytest.mark.anyio
async def test_a_refused_cache_costs_time_not_correctness(
    endpoint: HostileEmbeddings, tmp_path: Path
) -> None:
    (tmp_path / CACHE_FILE).symlink_to(tmp_path / "nowhere")
    s = stage(endpoint, tmp_path)
    with capture_logs() as events:
        vectors = await s.passages(TEXTS)
    assert np.allclose(vectors, HashEmbedder(16).embed_sync(TEXTS), atol=1e-6)
    assert any(e["event"] == "embed cache unavailable" for e in events)
    assert not (tmp_path / "nowhere").exists()
    await s.aclose()
