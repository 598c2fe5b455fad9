"""An import body the zengram kind sends (orjson's bytes, :mod:`benchd.http.jsonbody`)
reaches the reference store with httpx's headers and the value httpx would have sent,
and the store holds the records as sent."""

from __future__ import annotations

import json

import httpx
import pytest
from fake_store import FakeStore
from json_exact import exact

from benchd.config.secrets import Secret
from benchd.http.sender import PoolSender
from benchd.kinds.zengram import ZengramConfig, ZengramStore
from benchd.refstore.server import running_refstore
from benchd.refstore.testing import make_config
from benchd.store.namespace import Namespace

pytestmark = pytest.mark.anyio
KEY = "test-key-import-body-0123456789"
NS = "benchd-import-body"
MEMORIES = [
    {
        "id": f"m{i}",
        "type": "fact",
        "content": f"note {i}: ünïcödé — “quoted” \u2028 😀 tab\there",
        "metadata": {"score": 1e-5 * (i + 1), "neg": -0.0, "n": 2**53 + i, "v": [1.5, None]},
    }
    for i in range(30)
]


class _Watch(FakeStore):
    """Passes every request to the store; keeps each import request as the store read it."""

    def __init__(self) -> None:
        super().__init__()
        self.imports: list[httpx.Request] = []

    async def answer(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and request.url.path == "/export/import":
            self.imports.append(request)
        return await self.forward(request)



async def test_an_import_body_reaches_the_store_as_httpx_would_send_it() -> None:
    config = make_config(api_key=KEY, retriever="bm25", import_pacing=0.0)
    async with running_refstore(config) as running:
        watch = _Watch()
        settings = ZengramConfig(url=running.url, namespace=NS, keep_ids=True)
        store = ZengramStore(settings, Secret(KEY, "test"), connect=watch)
        try:
            namespace = Namespace(store)
            namespace.own(tuple(str(m["id"]) for m in MEMORIES))
            batch = [store._prepare(namespace.record(m)) for m in MEMORIES]
            counts = await store._post_import(batch)
            body = {"data": batch, "operator_approved": True}
            built = store._http._client.build_request("POST", "/export/import", json=body)
        finally:
            await store.aclose()
        async with httpx.AsyncClient(base_url=running.url, headers={"x-api-key": KEY}) as raw:
            listed = (await raw.get("/export", params={"client_id": NS, "limit": 500})).json()
    assert counts[0] == len(MEMORIES)
    (sent,) = watch.imports
    assert sent.headers["content-type"] == "application/json"
    assert sent.headers["content-length"] == str(len(sent.content))
    head = PoolSender.prepare(built).wire.partition(b"\r\n\r\n")[0].split(b"\r\n")[1:]
    theirs = [tuple(line.split(b": ", 1)) for line in head]  # what httpx's request sends
    assert [(k, v) for k, v in sent.headers.raw if k != b"Content-Length"] == [
        (k, v) for k, v in theirs if k != b"Content-Length"
    ]
    assert exact(json.loads(sent.content)) == exact(json.loads(built.content))
    assert sent.content != built.content  # orjson writes 0.00001 where json writes 1e-05
    held = {
        m["id"]: m["metadata"] for m in listed["memories"] if m["id"] in {r["id"] for r in batch}
    }
    assert [exact(held[r["id"]]) for r in batch] == [exact(r["metadata"]) for r in batch]
