"""A ``python`` kind retriever with the batch hooks, over a Zengram-style store's HTTP API.

What a user's glue to a shared store looks like: the namespace it is given
becomes the store's ``client_id``; ``write`` upserts by id (so it *moves*
another tenant's record with the same id, exactly like the real server),
``delete`` deletes whoever holds the id. Everything that keeps a foreign
tenant safe must come from benchd's flow, not from this glue.
"""

from __future__ import annotations

import os
from typing import Any

import httpx

PAGE = 4  # small pages, so listings page


class RefStoreRetriever:
    def __init__(self, url: str, key_env: str, namespace: str) -> None:
        self.namespace = namespace
        self.deleted: list[str] = []
        self.client = httpx.Client(
            base_url=url, headers={"x-api-key": os.environ[key_env]}, timeout=10
        )

    def write(self, batch: list[dict[str, Any]]) -> tuple[int, int, int]:
        # The store skips an import whose text it holds under that id: delete first, so a
        # write is the upsert the hook promises (the lease in a sentinel's metadata changes).
        for record in batch:
            self.client.delete(f"/memory/{record['id']}")
        data = [{**r, "client_id": self.namespace} for r in batch]
        reply = self.client.post("/export/import", json={"data": data, "operator_approved": True})
        reply.raise_for_status()
        counts = reply.json()
        return counts["imported"], counts["skipped"], counts["errors"]

    def list(self, cursor: str | None) -> tuple[list[dict[str, Any]], str | None]:
        offset = int(cursor or 0)
        params = {"client_id": self.namespace, "limit": PAGE, "offset": offset}
        reply = self.client.get("/export", params=params)
        reply.raise_for_status()
        body = reply.json()
        page = [r for r in body["memories"] if r.get("active", True)]
        more = body.get("has_more") and body["memories"]
        return page, str(offset + len(body["memories"])) if more else None

    def delete(self, record_id: str) -> bool:
        self.deleted.append(record_id)
        reply = self.client.delete(f"/memory/{record_id}")
        return reply.status_code != 404

    def search(self, q: str, k: int) -> list[str]:
        params = {"q": q, "limit": k, "client_id": self.namespace, "read_only": "true"}
        reply = self.client.get("/memory/search", params=params)
        reply.raise_for_status()
        return [str(r["id"]) for r in reply.json()["results"]]

    def close(self) -> None:
        self.client.close()


def make(url: str, key_env: str, namespace: str = "benchd-eval") -> RefStoreRetriever:
    return RefStoreRetriever(url, key_env, namespace)
