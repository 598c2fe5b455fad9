"""Configs, ``benchd`` subprocesses and direct reads for the vector kinds' end-to-end tests.

Which kinds are vector kinds, the client library each one's extra brings and the keys
that point its settings at a server are read from the registry (:data:`TARGET_KINDS`);
what is left per kind here is how the tests read a store with its own client.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
from store_servers import missing

from benchd.kinds import TARGET_KINDS
from benchd.kinds.vectors import VectorSettings

__all__ = [
    "CLIENT_LIBRARY",
    "VECTOR_KINDS",
    "EmbeddingsStandIn",
    "benchd",
    "benchd_rows",
    "config_text",
    "env_for",
    "once_json",
    "require_client",
    "shared_target",
    "target_table",
    "tenant_of",
]


VECTOR_KINDS = tuple(
    name for name, kind in TARGET_KINDS.items() if issubclass(kind.settings_type, VectorSettings)
)
"""The kinds whose vectors benchd computes (their settings are :class:`VectorSettings`)."""

CLIENT_LIBRARY = {
    name: TARGET_KINDS[name].store_type.client_library
    for name in VECTOR_KINDS
    if TARGET_KINDS[name].store_type.client_library is not None
}
"""The client library each kind's extra (benchd[KIND]) brings, as its store class declares it
(none: benchd's own HTTP client)."""


def _keys(kind: str) -> set[str]:
    return {f.name for f in dataclasses.fields(TARGET_KINDS[kind].settings_type)}


def require_client(kind: str) -> str:
    """``kind``, once its client library imports; else the test skips (fails where
    ``BENCHD_REQUIRE_STORES`` is set) naming the extra to install."""
    needs = CLIENT_LIBRARY.get(kind)
    if needs is not None:
        try:
            __import__(needs)
        except ImportError:
            missing(f"{needs} (benchd[{kind}]) is not installed")
    return kind


def target_table(kind: str, server: Any, namespace: str, **extra: Any) -> str:
    """The ``[probe.target]`` lines of ``kind`` on ``server`` (the DSN comes from $PG_DSN)."""
    lines = [f'kind = "{kind}"', f'namespace = "{namespace}"']
    named = [k for k in ("url", "uri", "path") if k in _keys(kind) and hasattr(server, k)]
    if named:  # the server's own field of the name the kind's settings give it
        lines.append(f'{named[0]} = "{getattr(server, named[0])}"')
    else:  # a DSN: a secret, from the environment (env_for)
        lines += ['dsn_env = "PG_DSN"', f'table = "t_{namespace.replace("-", "_")}"']
    for key, value in extra.items():
        lines = [line for line in lines if not line.startswith(f"{key} =")]
        lines.append(f"{key} = {json.dumps(value)}")
    return "\n".join(lines)


def config_text(
    kind: str,
    server: Any,
    namespace: str,
    *,
    fixture: str = "packaged:smoke",
    model: str = "hash:256",
    cache_dir: Path,
    probe: str = "",
    embed: str = "",
    interval_s: float = 3600,
    **extra: Any,
) -> str:
    return f"""
[[probe]]
name = "{kind}"
fixture = "{fixture}"
k = [5, 10]
timeout_s = 600
interval_s = {interval_s}
{probe}

[probe.target]
{target_table(kind, server, namespace, **extra)}

[probe.target.embed]
model = "{model}"
cache_dir = "{cache_dir}"
{embed}
"""


def env_for(server: Any) -> dict[str, str]:
    dsn = getattr(server, "dsn", "")
    return {**os.environ, "PG_DSN": dsn} if dsn else dict(os.environ)


def benchd(*args: str, server: Any, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchd", *args],
        capture_output=True, text=True, check=False, env=env_for(server), cwd=cwd, timeout=600,
    )  # fmt: skip


def once_json(config: Path, server: Any, *more: str) -> dict[str, Any]:
    """``benchd once --format json`` on ``config``: its one probe's document."""
    proc = benchd("once", "--config", str(config), "--format", "json", *more, server=server)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    probe: dict[str, Any] = json.loads(proc.stdout)["probes"][0]
    password = getattr(server, "password", "")
    assert not password or password not in proc.stdout + proc.stderr
    return probe


def benchd_rows(kind: str, server: Any, namespace: str, where: str) -> int:
    """How many records benchd's namespace holds, read with the store's own client."""
    if kind == "pgvector":
        import psycopg

        with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
            row = conn.execute(
                f"SELECT count(*) FROM {where} WHERE namespace = %s", (namespace,)
            ).fetchone()
            return int(row[0]) if row else 0
    if kind == "chroma":
        base = f"{server.url}/api/v2/tenants/default_tenant/databases/default_database/collections"
        found = httpx.get(f"{base}/{where}", timeout=30)
        if found.status_code == 404:
            return 0
        cid = found.json()["id"]
        body = {"where": {"benchd_namespace": namespace}, "include": []}
        got = httpx.post(f"{base}/{cid}/get", json=body, timeout=30).json()
        return len(got["ids"])
    if kind == "lancedb":
        from tenants import LancedbTenant

        return LancedbTenant(server.path, 0).rows_in(namespace, where)
    if kind == "qdrant":  # local mode: only while no benchd process holds the directory
        from tenants import QdrantTenant

        return QdrantTenant(server.path, 0).rows_in(namespace, where)
    from pymilvus import MilvusClient

    client = MilvusClient(uri=server.uri, dedicated=True)
    try:
        if not client.has_collection(where):
            return 0
        rows = client.query(
            where, filter=f'namespace == "{namespace}"', output_fields=["id"], limit=16384
        )
        return len(rows)
    finally:
        client.close()


class EmbeddingsStandIn:
    """An OpenAI-compatible ``POST /v1/embeddings`` on loopback that records every text it embeds.

    Backed by the hashing embedder (deterministic); a thread serves it so a
    ``benchd`` subprocess can call it.
    """

    def __init__(self, dims: int = 256, *, hold_after: int | None = None) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        from benchd.embed.models import HashEmbedder

        self.texts: list[str] = []
        self.requests = 0
        self.holding = threading.Event()  # a request past hold_after is waiting
        self.release = threading.Event()  # let held requests answer
        model = HashEmbedder(dims)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                outer.requests += 1
                if hold_after is not None and outer.requests > hold_after:
                    outer.holding.set()
                    outer.release.wait(timeout=120)
                outer.texts.extend(body["input"])
                rows = model.embed_sync(body["input"])
                data = [
                    {"index": i, "embedding": [float(x) for x in row]} for i, row in enumerate(rows)
                ]
                raw = json.dumps({"data": data, "model": body["model"]}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> EmbeddingsStandIn:
        import threading

        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


def tenant_of(kind: str, server: Any, dims: int = 256) -> Any:
    """Another tenant of ``kind``'s shared table or collection on ``server`` (tenants.py)."""
    from tenants import ChromaTenant, LancedbTenant, MilvusTenant, PostgresTenant, QdrantTenant

    if kind == "pgvector":
        return PostgresTenant(server.admin_dsn, dims)
    if kind == "chroma":
        return ChromaTenant(server.url, dims)
    if kind == "qdrant":
        return QdrantTenant(server.path, dims)
    if kind == "lancedb":
        return LancedbTenant(server.path, dims)
    return MilvusTenant(server.uri, dims)


def shared_target(kind: str, tenant: Any) -> dict[str, Any]:
    """The ``[probe.target]`` settings that write beside ``tenant``, in its table/collection."""
    where = {"table": tenant.table} if "table" in _keys(kind) else {"collection": tenant.name}
    return {"shared": True, **where}
