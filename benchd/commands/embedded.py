"""The embedded default: what ``benchd run`` and ``benchd once`` do with no config.

It starts the reference store in-process on an ephemeral loopback port with
a random key, and probes it with the packaged smoke fixture — like
``prometheus`` running on its bundled config, it does something real.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from benchd.config.budget import BudgetSettings
from benchd.config.load import DEFAULT_LISTEN, Config, ProbeConfig, ServerConfig, TargetConfig
from benchd.config.secrets import Secret
from benchd.fixtures.model import packaged_fixture
from benchd.kinds.zengram import ZengramConfig
from benchd.load import LoadProfile
from benchd.refstore.server import RefStoreConfig, running_refstore

__all__ = ["embedded_config", "embedded_default"]


def embedded_config(url: str, key: str, *, listen: str = DEFAULT_LISTEN) -> Config:
    """The embedded probe pointed at a reference store at ``url``."""
    target = TargetConfig(
        kind="zengram",
        settings=ZengramConfig(url=url, namespace="benchd-eval", cleanup="never"),
        secret=Secret(key, "embedded"),
    )
    probe = ProbeConfig(
        name="embedded",
        fixture=packaged_fixture("smoke"),
        target=target,
        k=(5, 10),
        interval_s=30.0,
        timeout_s=60.0,
        jitter_s=3.0,
        load=LoadProfile(mode="closed", concurrency=4, duration_s=3.0),
        # The in-process store runs without rate limits; against a real Zengram
        # server the budget is its 120 reads / 60 writes per minute.
        budget=BudgetSettings(reads_per_min=6000, writes_per_min=6000),
    )
    return Config(path="<embedded default>", server=ServerConfig(listen=listen), probes=(probe,))


@asynccontextmanager
async def embedded_default(*, listen: str = DEFAULT_LISTEN) -> AsyncIterator[Config]:
    """Start the reference store and yield a config that probes it."""
    key = secrets.token_urlsafe(24)
    store_config = RefStoreConfig(
        host="127.0.0.1",
        port=0,
        api_key=key,
        retriever="hybrid",
        embedder="hash:1024",
        read_limit_per_min=0,
        write_limit_per_min=0,
    )
    async with running_refstore(store_config) as store:
        yield embedded_config(store.url, key, listen=listen)
