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


async def test_a_json_lines_fixture_loads_on_the_loop_in_steps_with_others_running_between(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 10^6-memory JSON Lines fixture is read a few dozen lines a step, the event loop's
    other tasks (the other probes) running between steps: no thread holds the GIL for
    them while it parses."""
    import json

    from benchd.fixtures import model
    from benchd.fixtures.reader import STEP_LINES

    monkeypatch.setenv(KEY_ENV, "k")
    lines = [
        json.dumps({"memory": {"id": f"m{i}", "content": f"note {i} on tides"}})
        for i in range(20 * STEP_LINES)
    ]
    lines.append(json.dumps({"query": {"q": "tides", "expected_ids": ["m1"]}}))
    big = tmp_path / "big.jsonl"
    big.write_text("\n".join(lines) + "\n", encoding="utf-8")
    config = load_config(write_config(tmp_path, probe_toml("big", "http://127.0.0.1:9", big)))
    steps: list[int] = []  # the loop thread's id at each step of the read

    def counted(path: Any) -> Any:
        inner = model.load_fixture_steps(path)
        while True:
            steps.append(threading.get_ident())
            try:
                next(inner)
            except StopIteration as done:
                return done.value
            yield

    monkeypatch.setattr(benchd.daemon, "load_fixture_steps", counted)
    seen: list[int] = []  # how many steps had run each time the other task ran
    loaded: list[Fixture] = []

    async def load() -> None:
        loaded.append(await benchd.daemon._load_fixture(config.probes[0]))

    async with anyio.create_task_group() as tg:
        tg.start_soon(load)
        while not loaded:
            seen.append(len(steps))
            await anyio.sleep(0)
    assert len(loaded[0].memories) == 20 * STEP_LINES
    assert set(steps) == {threading.get_ident()}  # on the loop's own thread
    between = {n for n in seen if 0 < n < len(steps)}
    assert len(between) >= 19, f"the other task ran between {len(between)} of {len(steps)} steps"
