"""A memory server written with the MCP SDK's own server framework, ranking by embeddings.

Tenants by ``user_id`` (mem0-style), dense vectors from benchd's embedders
(``hash:DIMS``, ``minilm``, ``e5``: the embed stage's models,
:mod:`benchd.embed.models`), cosine
ranking with the score of each result. The embedder comes from
``--embedder`` or ``MEMSERVER_EMBEDDER`` (default ``hash:1024``), so a test
switches the model by restarting the server with another value.

``MEMSERVER_DIE_FLAG=PATH``: a search that finds this file removes it and
exits the process at once (a server dying mid-cycle, once).
``MEMSERVER_FAKE_DELETE=1``: delete_memory answers ``deleted: true`` and
deletes nothing (a delete tool whose "done" is no proof).
``MEMSERVER_SEARCH_ERROR=TEXT``: every search fails with TEXT (``isError``).
``MEMSERVER_DIE_AFTER=N``: the search after the N-th exits the process (a server
killed mid-pass).
``MEMSERVER_MAX_RESULTS=N``: a search answers at most N results (short answers).
``MEMSERVER_SAME_PAGE=1``: list_memories ignores its offset and answers the first
page every time (a listing that never ends).
``MEMSERVER_OWN_FIRST=1``: a search ranks the ids starting ``benchd-`` (benchd's
sentinel and lease records) above every other (answers padded with benchd's own).
``MEMSERVER_CALLS=PATH``: each list_memories call appends a line to PATH.

Run: ``python memory_server.py [--transport stdio|http] [--port N]``.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

import numpy as np
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

from benchd.embed.models import parse_embedder


class Memory(BaseModel):
    id: str
    content: str


class Hit(BaseModel):
    id: str
    score: float


class Found(BaseModel):
    results: list[Hit]


class Listed(BaseModel):
    memories: list[Memory]


class Added(BaseModel):
    added: int


class Deleted(BaseModel):
    deleted: bool


class Info(BaseModel):
    model: str


@dataclass
class _Row:
    content: str
    vector: np.ndarray


def build(embedder_spec: str) -> MCPServer:
    embedder = parse_embedder(embedder_spec)
    users: dict[str, dict[str, _Row]] = {}
    searches = [0]
    server = MCPServer("benchd-test-memory", version="1.0")

    @server.tool()
    async def add_memories(user_id: str, memories: list[Memory]) -> Added:
        """Add (or replace, by id) memories for one user."""
        vectors = await embedder.embed([m.content for m in memories])
        rows = users.setdefault(user_id, {})
        for memory, vector in zip(memories, vectors, strict=True):
            rows[memory.id] = _Row(memory.content, vector)
        return Added(added=len(memories))

    @server.tool()
    async def search_memories(user_id: str, query: str, limit: int = 10) -> Found:
        """The user's memories nearest the query, best first, with cosine scores."""
        flag = os.environ.get("MEMSERVER_DIE_FLAG")
        if flag and os.path.exists(flag):
            os.unlink(flag)
            os._exit(3)
        searches[0] += 1
        if searches[0] > int(os.environ.get("MEMSERVER_DIE_AFTER") or "1000000000"):
            os._exit(3)
        limit = min(limit, int(os.environ.get("MEMSERVER_MAX_RESULTS") or limit))
        if refusal := os.environ.get("MEMSERVER_SEARCH_ERROR"):
            raise ToolError(refusal)  # an anticipated failure: isError with this text
        rows = users.get(user_id, {})
        if not rows:
            return Found(results=[])
        (q,) = await embedder.embed_queries([query])
        ids = list(rows)
        scores = np.stack([rows[i].vector for i in ids]) @ q
        own = 1 if os.environ.get("MEMSERVER_OWN_FIRST") else 0
        order = sorted(
            range(len(ids)),
            key=lambda j: (-own * ids[j].startswith("benchd-"), -float(scores[j]), ids[j]),
        )[:limit]
        return Found(results=[Hit(id=ids[j], score=float(scores[j])) for j in order])

    @server.tool()
    async def list_memories(user_id: str, offset: int = 0, limit: int = 100) -> Listed:
        """One page of the user's memories, in id order."""
        if calls := os.environ.get("MEMSERVER_CALLS"):
            with open(calls, "a") as out:
                out.write(f"{offset}\n")
        if os.environ.get("MEMSERVER_SAME_PAGE"):
            offset = 0
        rows = users.get(user_id, {})
        ids = sorted(rows)[offset : offset + limit]
        return Listed(memories=[Memory(id=i, content=rows[i].content) for i in ids])

    @server.tool()
    async def delete_memory(user_id: str, memory_id: str) -> Deleted:
        """Delete one memory; says deleted even when there was none (as some servers do)."""
        if not os.environ.get("MEMSERVER_FAKE_DELETE"):
            users.get(user_id, {}).pop(memory_id, None)
        return Deleted(deleted=True)

    @server.tool()
    async def memory_info() -> Info:
        """The embedding model this server ranks with."""
        return Info(model=embedder.spec)

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument(
        "--embedder", default=os.environ.get("MEMSERVER_EMBEDDER", "hash:1024")
    )
    args = parser.parse_args()
    server = build(args.embedder)
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=args.port, json_response=True)


if __name__ == "__main__":
    main()
