"""Conformance: answers that lie, on mcp and http, from fakes of each store's own protocol.

``benchd once --format json`` against:

- **mcp**: the SDK-built ranked server (tests/kinds/mcp/memory_server.py)
  answering at most 3 results, ranking benchd's own records (sentinel, lease)
  above the corpus, or answering its list tool's first page for every offset;
- **http**: configs/http-zengram.toml's target on a proxy in front of the
  reference store (this module's :class:`LyingStore`) that cuts every search
  to 3 results, pads every search with benchd's own records at the top, or
  answers ``/export``'s first page with ``has_more`` for every offset. The store
  ranks by dense vectors (every record, like a kNN store), and the target says
  ``full_answers = true``: a healthy search answers min(k, records).

Promised: a search answering fewer than asked is counted in ``short_answers``;
benchd's own records are dropped from an answer and the probe still scores
k corpus results (it asks for k plus them: nothing is short, recall is the
healthy store's); a listing that repeats its page stops at the first page
that brings nothing new (kind ``decode``) after a bounded number of calls.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kinds" / "mcp"))

import httpx
import pytest
from mcp_servers import sdk_server_argv

from benchd.refstore.server import RefStoreThread
from benchd.refstore.testing import make_config

pytestmark = pytest.mark.timeout(600)

REPO = Path(__file__).resolve().parents[2]
QUERIES = 16  # queries of the packaged smoke fixture
OWN = ("benchd sentinel", "benchd lease")  # how benchd's own records begin


def once(config: str, tmp_path: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """``benchd once --format json`` on ``config``: its one probe's document."""
    path = tmp_path / f"once-{len(list(tmp_path.glob('once-*')))}.toml"
    path.write_text(config)
    proc = subprocess.run(
        [sys.executable, "-m", "benchd", "once", "-c", str(path), "--format", "json"],
        capture_output=True, text=True, check=False, timeout=300,
        env={**os.environ, "BENCHD_STATE_DIR": str(tmp_path / "state"), **(env or {})},
    )  # fmt: skip
    assert proc.returncode in (0, 1, 3), proc.stderr[-3000:]  # 3: the probe failed
    probe: dict[str, Any] = json.loads(proc.stdout)["probes"][0]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return probe


# -- mcp ------------------------------------------------------------------------------------


def mcp_config(env: dict[str, str], page_size: int = 100) -> str:
    argv = sdk_server_argv("--embedder", "hash:256")
    envs = ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items())
    return f"""
[[probe]]
name = "mcp"
fixture = "packaged:smoke"
k = [10]
timeout_s = 300

[probe.load]
mode = "serial"

[probe.target]
kind = "mcp"
timeout_s = 30
transport = "stdio"
command = {json.dumps(argv[0])}
args = {json.dumps(argv[1:])}
env = {{ {envs} }}
namespace_by = "argument"
namespace = "answers"

[probe.target.tools.search]
name = "search_memories"
arguments = {{ user_id = "{{namespace}}", query = "{{q}}", limit = "{{k}}" }}
ids = "results[*].id"
scores = "results[*].score"

[probe.target.tools.write]
name = "add_memories"
arguments = {{ user_id = "{{namespace}}", memories = "{{records}}" }}
record = {{ id = "{{id}}", content = "{{content}}" }}

[probe.target.tools.list]
name = "list_memories"
arguments = {{ user_id = "{{namespace}}", offset = "{{offset}}", limit = "{{limit}}" }}
ids = "memories[*].id"
page_size = {page_size}

[probe.target.tools.delete]
name = "delete_memory"
arguments = {{ user_id = "{{namespace}}", memory_id = "{{id}}" }}
"""


@pytest.fixture(scope="module")
def mcp_healthy(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return once(mcp_config({}), tmp_path_factory.mktemp("healthy"))


def test_mcp_a_search_answering_fewer_than_asked_is_counted_short(
    mcp_healthy: dict[str, Any], tmp_path: Path
) -> None:
    assert mcp_healthy["outcome"] == "success", mcp_healthy
    assert mcp_healthy["short_answers"] == {"serial": 0}
    cut = once(mcp_config({"MEMSERVER_MAX_RESULTS": "3"}), tmp_path)
    assert cut["short_answers"] == {"serial": QUERIES}, cut
    assert cut["aggregate"]["recall@10"] < mcp_healthy["aggregate"]["recall@10"]


def test_mcp_answers_padded_with_benchds_own_records_still_score_k_of_the_corpus(
    mcp_healthy: dict[str, Any], tmp_path: Path
) -> None:
    padded = once(mcp_config({"MEMSERVER_OWN_FIRST": "1"}), tmp_path)
    assert padded["outcome"] == "success", padded
    assert padded["short_answers"] == {"serial": 0}, padded
    assert padded["aggregate"] == mcp_healthy["aggregate"]


def test_mcp_a_list_tool_answering_the_same_page_forever_stops_at_the_repeat(
    tmp_path: Path,
) -> None:
    calls = tmp_path / "calls"
    env = {"MEMSERVER_SAME_PAGE": "1", "MEMSERVER_CALLS": str(calls)}
    probe = once(mcp_config(env, page_size=10), tmp_path)  # 37 records: 4 pages
    assert probe["outcome"] == "failed" and probe["error"]["kind"] == "decode", probe
    # each listing stops at the repeat of its first page (offset 10): 7 calls measured,
    # 4 of them listings of the namespace while it was empty
    offsets = [int(o) for o in calls.read_text().split()]
    assert max(offsets) == 10 and len(offsets) <= 8, offsets


# -- http -----------------------------------------------------------------------------------


class LyingStore:
    """A proxy in front of a reference store, lying on one route by ``mode``."""

    def __init__(self, upstream: RefStoreThread) -> None:
        self.upstream = upstream
        self.mode = "ok"
        self.exports = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _forward(self) -> None:
                size = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(size) if size else None
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                key = {"x-api-key": upstream.api_key}
                with httpx.Client(base_url=upstream.url, timeout=60, headers=key) as client:
                    got = client.request(self.command, self.path, content=body, headers=headers)
                    raw = outer.lie(client, self.path, got)
                self.send_response(got.status_code)
                self.send_header("content-type", got.headers.get("content-type", "text/plain"))
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            do_GET = do_POST = do_DELETE = _forward

            def log_message(self, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def lie(self, client: httpx.Client, path: str, got: httpx.Response) -> bytes:
        if got.status_code != 200:
            return got.content
        if path.startswith("/memory/search") and self.mode in ("short", "pad"):
            answer = got.json()
            results = answer["results"]
            if self.mode == "pad":
                params = httpx.URL(path).params
                limit = int(params["limit"])
                own = self._own(client, params["client_id"])
                mine = {r["id"] for r in own}  # ranked first, each once
                results = (own + [r for r in results if r["id"] not in mine])[:limit]
            answer["results"] = results[:3] if self.mode == "short" else results
            return json.dumps(answer).encode()
        if path.startswith("/export") and self.mode == "same-page":
            self.exports += 1
            first = client.get(str(httpx.URL(path).copy_set_param("offset", 0))).json()
            return json.dumps({**first, "has_more": True}).encode()
        return got.content

    def _own(self, client: httpx.Client, namespace: str) -> list[dict[str, Any]]:
        page = client.get("/export", params={"client_id": namespace, "limit": 500}).json()
        own = [m for m in page["memories"] if str(m["content"]).startswith(OWN)]
        return [{"id": m["id"], "effective_score": 99.0} for m in own]

    def __enter__(self) -> LyingStore:
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


@pytest.fixture(scope="module")
def lying() -> Iterator[LyingStore]:
    with RefStoreThread(make_config(retriever="dense")) as upstream, LyingStore(upstream) as proxy:
        yield proxy


@contextmanager
def lying_as(store: LyingStore, mode: str) -> Iterator[LyingStore]:
    store.mode, store.exports = mode, 0
    try:
        yield store
    finally:
        store.mode = "ok"


def http_config(store: LyingStore, namespace: str) -> str:
    text = (REPO / "configs" / "http-zengram.toml").read_text()
    text = text.replace('url = "http://127.0.0.1:8084"', f'url = "{store.url}"')
    text = text.replace('namespace = "benchd-eval"', f'namespace = "{namespace}"')
    text = text.replace('k = [5, 10]', 'k = [10]')
    text = text.replace("max_k = 100 ", "full_answers = true\nmax_k = 100 ")  # ranks every record
    text = text[: text.index("[probe.budget]")] + "[probe.budget]\nunlimited = true\n"
    return text + '\n[probe.load]\nmode = "serial"\n'


def http_once(store: LyingStore, namespace: str, tmp_path: Path) -> dict[str, Any]:
    env = {"BRAIN_API_KEY": store.upstream.api_key}
    return once(http_config(store, namespace), tmp_path, env)


def test_http_a_search_answering_fewer_than_asked_is_counted_short(
    lying: LyingStore, tmp_path: Path
) -> None:
    healthy = http_once(lying, "answers-short", tmp_path)
    assert healthy["outcome"] == "success", healthy
    # one smoke query matches 7 records only (the reference store's filter): short even here
    assert healthy["short_answers"] == {"serial": 1}
    with lying_as(lying, "short"):
        cut = http_once(lying, "answers-short", tmp_path)
    assert cut["short_answers"] == {"serial": QUERIES}, cut
    assert cut["aggregate"]["recall@10"] < healthy["aggregate"]["recall@10"]


def test_http_answers_padded_with_benchds_own_records_still_score_k_of_the_corpus(
    lying: LyingStore, tmp_path: Path
) -> None:
    healthy = http_once(lying, "answers-pad", tmp_path)
    with lying_as(lying, "pad"):
        padded = http_once(lying, "answers-pad", tmp_path)
    assert padded["outcome"] == "success", padded
    assert padded["short_answers"] == healthy["short_answers"], padded
    assert padded["aggregate"]["recall@10"] == healthy["aggregate"]["recall@10"]
    # as many corpus results per query (the store's recency makes the order its own)
    lengths = [len(q["ranked_ids"]) for q in padded["queries"]]
    assert lengths == [len(q["ranked_ids"]) for q in healthy["queries"]]
    assert not [i for q in padded["queries"] for i in q["ranked_ids"] if i.startswith("benchd")]


def test_http_an_export_answering_the_same_page_forever_stops_at_the_repeat(
    lying: LyingStore, tmp_path: Path
) -> None:
    with lying_as(lying, "same-page"):
        probe = http_once(lying, "answers-page", tmp_path)
        exports = lying.exports
    assert probe["outcome"] == "failed" and probe["error"]["kind"] == "decode", probe
    assert exports <= 4, exports  # 4 measured: the first page and its repeat, per listing
