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

SMOKE = Path(__file__).resolve().parents[3] / "shared" / "fixtures-external" / "zengram-smoke.json"


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
    """The target API's own eval fixture (34 memories, 12 queries)."""
    data: dict[str, Any] = json.loads(SMOKE.read_text(encoding="utf-8"))
    return data
