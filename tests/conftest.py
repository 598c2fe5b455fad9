"""Shared test plumbing: the anyio backend and the location of ../shared."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from hypothesis import settings

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


# No per-example wall-clock deadline anywhere (Hypothesis's default is 200 ms): on a shared,
# loaded 2-core box one example of a microsecond function can be descheduled that long (seen:
# 56 ms at load 9), and a deadline then fails the test as "unreliable timings" instead of
# measuring the code. Tests that need a time bound state it themselves (fail_after).
settings.register_profile("benchd", deadline=None)
settings.load_profile("benchd")

# The test session is an entry point: it hands the store kinds to config, as
# benchd's commands do (config never imports the targets package).
register_kinds()
