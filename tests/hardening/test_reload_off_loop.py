"""Reading a probe's fixture on start or reload never holds the event loop.

The fixture read is made to wait on the test (a stand-in for a 200k-memory
JSON Lines file taking seconds): while it waits, the daemon must still
answer ``/healthz`` — which it cannot if the read runs on the event loop.
The read also refuses to wait on the loop's own thread, so the old code
fails at once instead of hanging. ``bench/reload_healthz.py`` measures the
real thing (a 200,000-memory fixture).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from drill_support import KEY_ENV, probe_toml, write_config, write_tiny_fixture

import benchd.daemon
from benchd.config.load import load_config
from benchd.daemon import Daemon
from benchd.fixtures.model import Fixture, load_fixture

pytestmark = pytest.mark.anyio


class HeldRead:
    """``load_fixture`` that, for one path, waits until the test lets it go."""

    def __init__(self, held: Path, loop_thread: int) -> None:
        self.held = str(held)
        self.loop_thread = loop_thread
        self.waiting = threading.Event()
        self.go = threading.Event()
        self.threads: list[int] = []

    def __call__(self, path: Any) -> Fixture:
        self.threads.append(threading.get_ident())
        if str(path) == self.held:
            if threading.get_ident() == self.loop_thread:
                raise AssertionError("the fixture was read on the event loop's thread")
            self.waiting.set()
            if not self.go.wait(60):
                raise AssertionError("the test never released the fixture read")
        return load_fixture(path)


async def test_healthz_answers_while_a_reload_reads_a_fixture(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "k")
    small = write_tiny_fixture(tmp_path / "small.json")
    big = write_tiny_fixture(tmp_path / "big.json")
    first = probe_toml("idle", "http://127.0.0.1:9", small, interval=3600, retries=0)
    config_path = write_config(tmp_path, first)
    held = HeldRead(big, threading.get_ident())
    monkeypatch.setattr(benchd.daemon, "load_fixture", held)
    daemon = Daemon(load_config(config_path), config_path=str(config_path), listen="127.0.0.1:0")
    outcome: list[bool] = []
    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            tg.start_soon(daemon.run)
            await daemon.started.wait()
            assert held.threads and threading.get_ident() not in held.threads  # start, too
            second = probe_toml("big", "http://127.0.0.1:9", big, interval=3600, retries=0)
            config_path.write_text(config_path.read_text() + second)

            reloaded = anyio.Event()

            async def reload() -> None:
                outcome.append(await daemon.reload())
                reloaded.set()

            tg.start_soon(reload)
            await anyio.to_thread.run_sync(held.waiting.wait)  # the reload is reading it now
            async with httpx.AsyncClient(base_url=daemon.url) as client:
                for _ in range(20):
                    assert (await client.get("/healthz")).status_code == 200
                assert not outcome  # all answered while the reload was still reading
            held.go.set()
            await reloaded.wait()
            daemon.stop()
    assert outcome == [True]
