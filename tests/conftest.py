"""Shared test plumbing: the anyio backend and the location of ../shared."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
