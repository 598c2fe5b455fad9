"""A hand-written MCP server that breaks the client's bounds on purpose, over stdio or HTTP.

    python hostile_server.py --mode MODE [--transport stdio|http --port N] [--entities N]

It speaks just enough JSON-RPC (``initialize``, ``tools/list``, ``tools/call``
of one tool, ``search``, taking ``{query}``) for a session to reach the call;
``MODE`` says how it answers that call:

- ``healthy``: ``{"results": [{"id": "m1", "score": 0.9}]}`` as structured content;
- ``big-text``: a ``read_graph``-shaped text of ``--entities`` entities (60,000:
  5.5 MiB), the ids under ``entities[*].name``;
- ``flood``: ``--entities`` ``notifications/progress`` lines, then the healthy answer;
- ``big-line``: one line of about 7.9 MB (the answer with a long text beside the
  results);
- ``list-id`` / ``object-id``: the answer with ``"id": [1]`` / ``{"x": 1}``;
- ``big-error``: ``isError`` with a 700 KB text starting with ``$HOSTILE_KEY``;
- ``silent``: writes two lines to stderr as it starts (``npm error ...``) and never
  answers the call;
- ``die``: exits in the middle of the call (status 3);
- ``keep-alive`` (HTTP): the answer as one event of an event stream kept open with
  ``: keep-alive`` comments until the client goes;
- ``bad-session`` (HTTP): an ``Mcp-Session-Id`` header of bytes outside ASCII.

Over HTTP every other mode answers as an event stream of its messages (the
flood's notifications first) and closes it.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOOL = {
    "name": "search",
    "description": "hostile",
    "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}},
}
HEALTHY = {"results": [{"id": "m1", "score": 0.9}]}


@functools.cache
def graph(n: int) -> str:
    entities = [
        {"name": f"memory-{i:06d}", "entityType": "memory", "observations": [f"note {i}"]}
        for i in range(n)
    ]
    return json.dumps({"entities": entities, "relations": []})


def result(message: dict[str, Any], value: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": message["id"], "result": value}


def tool_answer(mode: str, entities: int) -> dict[str, Any]:
    if mode == "big-text":
        return {"content": [{"type": "text", "text": graph(entities)}]}
    if mode == "big-line":
        padding = "x" * 7_900_000
        return {"content": [{"type": "text", "text": padding}], "structuredContent": HEALTHY}
    if mode == "big-error":  # a tool's refusal, echoing a key, past the inline size
        refusal = f"upstream refused key {os.environ['HOSTILE_KEY']} " + "z" * 700_000
        return {"content": [{"type": "text", "text": refusal}], "isError": True}
    text = json.dumps(HEALTHY)
    return {"content": [{"type": "text", "text": text}], "structuredContent": HEALTHY}


def answers(message: dict[str, Any], mode: str, entities: int) -> list[dict[str, Any]]:
    """The messages the server sends for one it received (none for a notification)."""
    method = message.get("method")
    if "id" not in message:
        return []
    if method == "initialize":
        return [result(message, {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile", "version": "1"},
        })]
    if method == "tools/list":
        return [result(message, {"tools": [TOOL]})]
    if method != "tools/call":
        return [{"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "no"}}]
    out: list[dict[str, Any]] = []
    if mode == "flood":
        out = [
            {"jsonrpc": "2.0", "method": "notifications/progress",
             "params": {"progressToken": 1, "progress": i, "total": entities}}
            for i in range(entities)
        ]
    answer = result(message, tool_answer(mode, entities))
    if mode == "list-id":
        answer["id"] = [message["id"]]
    elif mode == "object-id":
        answer["id"] = {"x": message["id"]}
    return [*out, answer]


def stdio(mode: str, entities: int) -> int:
    if mode == "silent":  # written before anything is answered: there when the call waits
        sys.stderr.write("npm error code E404\nnpm error 404 Not Found - GET left-pad\n")
        sys.stderr.flush()
    for line in sys.stdin.buffer:
        message = json.loads(line)
        if message.get("method") == "tools/call":
            if mode == "silent":
                time.sleep(3600)
            if mode == "die":
                os._exit(3)
        out = b"".join(
            json.dumps(m, separators=(",", ":")).encode() + b"\n"
            for m in answers(message, mode, entities)
        )
        sys.stdout.buffer.write(out)
        sys.stdout.buffer.flush()
    return 0


def serve(mode: str, entities: int, port: int) -> int:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            size = int(self.headers.get("content-length", "0"))
            message = json.loads(self.rfile.read(size))
            out = answers(message, mode, entities)
            if not out:
                self.send_response(202)
                self.send_header("content-length", "0")
                self.end_headers()
                return
            self.send_response(200)
            if message.get("method") == "initialize":
                session = "s\xfc\xe9-1" if mode == "bad-session" else "session-1"
                self.send_header("mcp-session-id", session)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            keep_open = mode == "keep-alive" and message.get("method") == "tools/call"
            if not keep_open:
                self.send_header("connection", "close")
            self.end_headers()
            body = b"".join(
                b"event: message\ndata: " + json.dumps(m).encode() + b"\n\n" for m in out
            )
            try:
                self.wfile.write(body)
                self.wfile.flush()
                while keep_open:  # the answer is out; the stream stays open
                    time.sleep(0.2)
                    self.wfile.write(b": keep-alive\n\n")
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.close_connection = True

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print(f"hostile listening on {server.server_address[1]}", flush=True)
    server.serve_forever()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="healthy")
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--entities", type=int, default=60_000)
    args = parser.parse_args()
    if args.transport == "stdio":
        return stdio(args.mode, args.entities)
    return serve(args.mode, args.entities, args.port)


if __name__ == "__main__":
    sys.exit(main())
