"""An OpenAI-style ``POST /v1/embeddings`` on 127.0.0.1 that misbehaves as its ``model`` asks.

A thread serves it (HTTP/1.0, one connection per request), so a ``benchd``
subprocess can call it as well as a test's own event loop. What each model
name answers:

``hash``      correct float vectors from the hashing embedder, ``dims`` wide (settable)
``big``       a correct answer of about 2 MB (decoded in benchd's decode worker)
``huge``      100 MB of floats with that ``Content-Length`` declared
``flood``     100 MB of floats with no length (delimited by closing the connection)
``dribble``   a correct answer, one byte every ``dribble_s``
``lists``     ``{"data": [[...], ...]}``
``string``    ``{"data": "xxx"}``
``deep``      200,000 nested arrays inside ``data``
``refused``   401
``flaky``     503 with ``Retry-After: 0`` to every second request, else ``hash``
``limited``   429 with ``Retry-After: 0`` to every second request, else ``hash``
``lockout``   429 without ``Retry-After``
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from benchd.embed.models import HashEmbedder

__all__ = ["HUGE_BYTES", "HostileEmbeddings"]

HUGE_BYTES = 100 * 1024 * 1024
_FLOATS = b"0.012345678," * 87381  # ~1 MiB per write


class HostileEmbeddings:
    """The server; ``seen`` holds (path with query, headers, body) of every request."""

    def __init__(self, dims: int = 16, dribble_s: float = 0.2) -> None:
        self.dims = dims
        self.dribble_s = dribble_s
        self.seen: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        self.closed = threading.Event()  # a client hung up on a streamed answer
        self._asked: dict[str, int] = {}
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                outer.seen.append((self.path, dict(self.headers.items()), body))
                try:
                    outer.answer(self, str(body.get("model")), list(body.get("input") or []))
                except (BrokenPipeError, ConnectionResetError):
                    outer.closed.set()

            def log_message(self, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.origin = f"http://127.0.0.1:{self._server.server_address[1]}"
        self.url = f"{self.origin}/v1"

    def answer(self, handler: BaseHTTPRequestHandler, model: str, texts: list[str]) -> None:
        if model in ("flaky", "limited"):
            self._asked[model] = self._asked.get(model, 0) + 1
            if self._asked[model] % 2:
                status = 503 if model == "flaky" else 429
                return _send(handler, status, b'{"error": "busy"}', {"Retry-After": "0"})
        if model == "lockout":
            return _send(handler, 429, b'{"error": "too many"}')
        if model == "refused":
            return _send(handler, 401, b'{"error": "bad key"}')
        if model in ("huge", "flood"):
            return self._stream(handler, declared=model == "huge")
        if model == "dribble":
            return self._dribble(handler, self.vectors(texts))
        special = {
            "lists": {"data": [[0.5] * self.dims for _ in texts]},
            "string": {"data": "xxx"},
        }
        if model in special:
            return _send(handler, 200, json.dumps(special[model]).encode())
        if model == "deep":
            return _send(handler, 200, b'{"data": ' + b"[" * 200_000 + b"]" * 200_000 + b"}")
        if model == "big":
            return _send(handler, 200, self.vectors(texts, pad=2_000_000))
        return _send(handler, 200, self.vectors(texts))

    def vectors(self, texts: list[str], pad: int = 0) -> bytes:
        rows = HashEmbedder(self.dims).embed_sync(texts)
        data = [{"index": i, "embedding": [float(x) for x in row]} for i, row in enumerate(rows)]
        answer: dict[str, Any] = {"object": "list", "data": data, "model": "m"}
        if pad:
            answer["usage"] = {"note": "x" * pad}
        return json.dumps(answer).encode()

    def _stream(self, handler: BaseHTTPRequestHandler, *, declared: bool) -> None:
        handler.send_response(200)
        handler.send_header("content-type", "application/json")
        if declared:
            handler.send_header("content-length", str(HUGE_BYTES))
        handler.end_headers()
        handler.wfile.write(b'{"data": [{"index": 0, "embedding": [')
        sent = 0
        while sent < HUGE_BYTES:
            handler.wfile.write(_FLOATS)
            sent += len(_FLOATS)
        handler.wfile.write(b"0.5]}]}")

    def _dribble(self, handler: BaseHTTPRequestHandler, raw: bytes) -> None:
        handler.send_response(200)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(raw)))
        handler.end_headers()
        for i in range(len(raw)):
            handler.wfile.write(raw[i : i + 1])
            handler.wfile.flush()
            time.sleep(self.dribble_s)

    def __enter__(self) -> HostileEmbeddings:
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


def _send(
    handler: BaseHTTPRequestHandler, status: int, raw: bytes, headers: dict[str, str] | None = None
) -> None:
    handler.send_response(status)
    handler.send_header("content-type", "application/json")
    handler.send_header("content-length", str(len(raw)))
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(raw)
