"""``benchd init [PATH]``: write an annotated starter config.

Values are serialised with tomli-w (so they are valid TOML whatever they
hold) and each key is preceded by a comment saying what it does.
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

__all__ = ["STARTER", "register", "render_starter"]

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


def render_starter() -> str:
    """The annotated starter config as TOML text."""
    lines = ["# benchd configuration — every key: docs/configuration.md.", ""]
    for section, entries in STARTER:
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
    p.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    text = render_starter()
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
    print(f"wrote {path}; edit url/api_key_env, then: benchd validate --config {path}")
    return EXIT_OK
