"""bench/scale.py: the plain client given ``--plain-records benchd`` stores benchd's records."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from scale import KEY_ENV, NAMESPACE, Store, marked_fixture, run_benchd, run_plain

_KEY = "bench-scale-key-0123456789"


def _fixture(path: Path) -> Path:
    """A synthetic fixture with the shapes benchd rewrites: given keys and subjects,
    metadata, a dated fraction of a second, an inactive flag."""
    subprocess.run(
        [sys.executable, "-m", "benchd", "synth", "--memories", "40", "--queries", "5",
         "--out", str(path)],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    lines = path.read_text(encoding="utf-8").splitlines()
    out = []
    for n, line in enumerate(lines):
        entry = json.loads(line)
        memory = entry.get("memory")
        if memory is not None:
            if n % 5 == 1:
                memory["metadata"] = {"team": "search", "n": n}
            if n % 7 == 2:
                memory["created_at"] = memory["created_at"].replace("Z", ".123456Z")
            if memory["type"] == "fact" and n % 2:
                memory["key"] = f"k-{n}"
            if memory["type"] == "status" and n % 2:
                memory["subject"] = f"s-{n}"
            if n % 9 == 3:
                memory["active"] = True
        out.append(json.dumps(entry))
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path


def _stored(url: str) -> dict[str, dict[str, Any]]:
    """The namespace's records as the store lists them, by id (benchd's sentinel left out)."""
    records: dict[str, dict[str, Any]] = {}
    with httpx.Client(base_url=url, headers={"x-api-key": _KEY}) as client:
        offset = 0
        while True:
            params = {"client_id": NAMESPACE, "limit": 500, "offset": offset}
            page = client.get("/export", params=params).json()
            for memory in page["memories"]:
                records[str(memory["id"])] = memory
            offset += len(page["memories"])
            if not page.get("has_more"):
                return {k: v for k, v in records.items() if not k.startswith("benchd-sentinel")}


def test_the_plain_client_stores_the_records_benchd_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, _KEY)
    fixture = _fixture(tmp_path / "fixture.jsonl")
    marked = marked_fixture(fixture, tmp_path / "marked.jsonl")
    stored = []
    for side in ("benchd", "plain"):
        store = Store(tmp_path)
        try:
            if side == "benchd":
                run_benchd(tmp_path, store, fixture, "never")
            else:
                run_plain(store, marked, "never", sys.executable)
            stored.append(_stored(store.url))
        finally:
            store.stop()
    benchd, plain = stored
    assert len(benchd) == 40
    assert benchd == plain
