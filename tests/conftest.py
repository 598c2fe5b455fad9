"""Test plumbing for every test: the anyio backend, structlog reset, Hypothesis profile."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest
import structlog
from hypothesis import settings

from benchd.kinds import register_kinds

# Lease holder tokens go to a folder of this test session, not the user's
# ~/.local/state/benchd; subprocesses inherit it. Tests of the state folder's
# own lookup set or clear it themselves. The session that made it removes it.
if "BENCHD_STATE_DIR" not in os.environ:
    os.environ["BENCHD_STATE_DIR"] = tempfile.mkdtemp(prefix="benchd-test-state-")
    atexit.register(shutil.rmtree, os.environ["BENCHD_STATE_DIR"], ignore_errors=True)


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
# In CI (CI set, as .ci/run sets it) on top of Hypothesis's own "ci" profile: derandomized, so
# each run tries the same examples and a run fails only on a change. Seeded afresh, the config
# fuzzer found a line break in a path on a local run (fixed in errors.one_line): in CI
# that would have failed one submission at random. Local runs keep exploring new seeds.
ci = settings.get_profile("ci") if os.environ.get("CI") else None
settings.register_profile("benchd", parent=ci, deadline=None)
settings.load_profile("benchd")

# An exported $BENCHD_CONFIG would change the config every command run without --config
# finds (benchd/config/locate.py); the tests name the one they mean.
os.environ.pop("BENCHD_CONFIG", None)

# The test session is an entry point: it hands the store kinds to config, as
# benchd's commands do (config never imports the targets package).
register_kinds()
