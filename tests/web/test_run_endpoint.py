"""Cycles on demand against a real ``benchd run``: 202 with a cycle id, then the
result in /api/status and the log; 409 while it runs; 429 while the key's read
budget still holds the last cycle; 404 for an unknown probe. The first cycle
starts promptly and the status and the log say when the next one is due."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
from support import BenchdProcess

from benchd.refstore.server import RefStoreThread
from benchd.refstore.testing import refstore_fixture

KEY = "run-endpoint-key-3c9d1e"


store = refstore_fixture("store", scope="module", api_key=KEY, retriever="bm25")


def many_queries_fixture(path: Path, queries: int) -> Path:
    """Four memories and many queries: a cycle that reads a lot, quickly."""
    memories = [
        {"id": f"m{i}", "type": "fact", "content": text, "created_at": f"2026-01-0{i + 1}T10:00Z"}
        for i, text in enumerate(
            ["the harbor ferry leaves at seven", "quartz glows under ultraviolet light",
             "the violin workshop uses hide glue", "the bakery sells rye on saturdays"]
        )
    ]  # fmt: skip
    topics = ["harbor ferry", "quartz ultraviolet", "violin glue", "bakery rye"]
    doc = {
        "memories": memories,
        "queries": [
            {"id": f"q{i}", "q": topics[i % 4], "expected_ids": [f"m{i % 4}"]}
            for i in range(queries)
        ],
    }
    path.write_text(json.dumps(doc))
    return path


def probe(name: str, fixture: str, url: str) -> str:
    return f"""
[[probe]]
name = "{name}"
fixture = "{fixture}"
interval_s = 3600
jitter_s = 600
timeout_s = 120
[probe.target]
kind = "zengram"
url = "{url}"
api_key_env = "RUN_ENDPOINT_KEY"
namespace = "benchd-{name}"
cleanup = "never"
searchable_timeout_s = 30.0
"""


def set_faults(store: RefStoreThread, specs: list[str]) -> None:
    reply = httpx.post(
        store.url + "/admin/config", json={"faults": specs},
        headers={"x-api-key": store.api_key}, timeout=10,
    )  # fmt: skip
    assert reply.status_code == 200, reply.text


def post_until_started(benchd: BenchdProcess, name: str) -> httpx.Response:
    """POST run, honouring 429's Retry-After, until a cycle starts (bounded)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        reply = benchd.post(f"/api/probes/{name}/run")
        if reply.status_code != 429:
            return reply
        time.sleep(min(float(reply.headers["Retry-After"]), 10.0))
    raise AssertionError(f"{name}: no cycle started within the bound")


def test_cycles_on_demand(store: RefStoreThread, tmp_path: Path) -> None:
    heavy = many_queries_fixture(tmp_path / "heavy.json", 400)  # 400 reads: 200 s of 120/min
    config = tmp_path / "benchd.toml"
    config.write_text(
        "[server]\nhistory = 5\n"
        + probe("quick", "packaged:smoke", store.url)
        + probe("heavy", str(heavy), store.url)
    )
    with BenchdProcess(["--config", str(config)], env={"RUN_ENDPOINT_KEY": KEY}) as benchd:
        # the first cycles start promptly although jitter_s is 600 s (bounded wait, no margin)
        benchd.wait_cycles("quick", 1, timeout=120)
        (heavy_cycle,) = benchd.wait_cycles("heavy", 1, timeout=120)
        assert heavy_cycle["outcome"] == "success", heavy_cycle  # its 400 reads are in the budget
        nxt = benchd.wait_for(lambda e: e.get("event") == "next cycle" and e["probe"] == "quick")
        assert str(nxt["due_at"]).endswith("Z") and nxt["in_s"] > 0
        quick = benchd.get("/api/status?probe=quick&queries=false").json()["probes"]["quick"]
        assert quick["next_cycle_at_iso"].endswith("Z") and quick["running"] is False

        refused = benchd.post("/api/probes/heavy/run")
        assert refused.status_code == 429, refused.text
        assert 1 <= int(refused.headers["Retry-After"]) <= 200
        assert "read budget" in refused.json()["message"]

        # The store holds every search 3 s, so the cycle is still running when
        # the second POST arrives however loaded the machine (a smoke cycle on
        # loopback is otherwise over in a fraction of a second: a race).
        set_faults(store, ["latency=fixed:3s@search"])
        try:
            started = post_until_started(benchd, "quick")
            assert started.status_code == 202, started.text
            cycle = started.json()["cycle"]
            assert started.json() == {"status": "started", "probe": "quick", "cycle": cycle}
            busy = benchd.post("/api/probes/quick/run")
            assert busy.status_code == 409 and "already running" in busy.json()["message"]
        finally:
            set_faults(store, [])

        done = benchd.wait_for(
            lambda e: e.get("event") == "cycle" and e["probe"] == "quick" and e["cycle"] == cycle
        )
        assert done["outcome"] in ("success", "degraded")
        status = benchd.get("/api/status?probe=quick").json()["probes"]["quick"]
        assert status["last"]["cycle"] == cycle
        assert any(h["cycle"] == cycle for h in status["history"])

        missing = benchd.post("/api/probes/nope/run")
        assert missing.status_code == 404 and "no probe named 'nope'" in missing.json()["message"]
        assert benchd.get("/api/status?probe=nope").status_code == 404
        assert benchd.get("/api/status?queries=maybe").status_code == 400
        assert benchd.stop() == 0
