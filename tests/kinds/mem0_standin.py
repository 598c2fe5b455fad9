"""A loopback stand-in for a mem0-style memory API (store-assigned ids, Token auth).

Just enough of the self-hosted mem0 REST shapes for configs/http-mem0-style.toml:
``POST /memories`` (one message, ``metadata``, ``user_id``; the server assigns
the id), ``POST /search`` (word-overlap ranking within a user),
``GET /memories?user_id=`` (everything, unpaged) and ``DELETE /memories/{id}``.
Every route wants ``Authorization: Token <key>``.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

_WORD = re.compile(r"[a-z0-9]+")


@dataclass
class Mem0Standin:
    key: str
    memories: dict[str, dict[str, Any]] = field(default_factory=dict)
    add_requests: int = 0

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/memories", self.guarded(self.add), methods=["POST"]),
                Route("/memories", self.guarded(self.list_all), methods=["GET"]),
                Route("/memories/{mid}", self.guarded(self.delete), methods=["DELETE"]),
                Route("/search", self.guarded(self.search), methods=["POST"]),
            ]
        )

    def guarded(self, handler: Any) -> Any:
        async def route(request: Request) -> Response:
            if request.headers.get("authorization") != f"Token {self.key}":
                return JSONResponse({"detail": "Invalid token"}, status_code=401)
            result: Response = await handler(request)
            return result

        return route

    def of_user(self, user_id: str) -> list[dict[str, Any]]:
        return [m for m in self.memories.values() if m["user_id"] == user_id]

    async def add(self, request: Request) -> Response:
        body = await request.json()
        self.add_requests += 1
        mid = uuid.uuid4().hex
        self.memories[mid] = {
            "id": mid,
            "memory": body["messages"][0]["content"],
            "user_id": body["user_id"],
            "metadata": body.get("metadata") or {},
        }
        return JSONResponse({"results": [{"id": mid, "memory": body["messages"][0]["content"]}]})

    async def list_all(self, request: Request) -> Response:
        return JSONResponse({"results": self.of_user(request.query_params["user_id"])})

    async def delete(self, request: Request) -> Response:
        if self.memories.pop(request.path_params["mid"], None) is None:
            return JSONResponse({"detail": "not found"}, status_code=404)
        return JSONResponse({"message": "Memory deleted successfully"})

    async def search(self, request: Request) -> Response:
        body = await request.json()
        terms = set(_WORD.findall(body["query"].lower()))
        scored = []
        for order, memory in enumerate(self.of_user(body["user_id"])):
            overlap = len(terms & set(_WORD.findall(memory["memory"].lower())))
            if overlap:
                scored.append((-overlap, order, memory))
        scored.sort(key=lambda t: (t[0], t[1]))
        results = [m for _, _, m in scored[: int(body.get("limit", 100))]]
        return JSONResponse({"results": results})
