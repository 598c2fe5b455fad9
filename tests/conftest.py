"""Shared test plumbing: the anyio backend and the location of ../shared."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from benchd.targets import register_kinds

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _reset_structlog() -> Iterator[None]:
    """Commands called in-process configure structlog globally; undo it after each test."""
    yield
    structlog.reset_defaults()


# The test session is an entry point: it hands the store kinds to config, as
# benchd's commands do (config never imports the targets package).
register_kinds()
