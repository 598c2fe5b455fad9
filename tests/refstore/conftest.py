"""Fixtures for the reference store's tests: a real store on an ephemeral loopback port."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchd.refstore.server import RefStoreThread
from benchd.refstore.testing import make_config

# benchd's own fixture in the target API's eval format (a tenant memory, two date-word queries)
SMOKE = Path(__file__).resolve().parents[1] / "data" / "zengram-eval.json"


@pytest.fixture
def store() -> Iterator[RefStoreThread]:
    """A fresh in-memory store (hybrid, hash:1024, no rate limits, no faults)."""
    with RefStoreThread(make_config()) as running:
        yield running


@pytest.fixture
def client(store: RefStoreThread) -> Iterator[httpx.Client]:
    """An HTTP client for ``store`` that sends its key."""
    with httpx.Client(base_url=store.url, headers={"x-api-key": store.api_key}) as http:
        yield http


@pytest.fixture(scope="session")
def smoke() -> dict[str, Any]:
    """A fixture in the target API's eval format (32 memories, 12 queries)."""
    data: dict[str, Any] = json.loads(SMOKE.read_text(encoding="utf-8"))
    return data
