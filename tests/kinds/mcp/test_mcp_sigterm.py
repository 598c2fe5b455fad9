"""SIGTERM while a call is in flight, on a memory file benchd shares with others (server-memory).

The shutdown a SIGTERM runs (the cycle cancelled, then ``ProbeRunner.cleanup``)
lands exactly when benchd has sent a call to the real server and not yet read
its answer: the corpus's write (seed), the lease record's write (heartbeat),
the verify listing, the cleanup's delete. server-memory carries out a call
whose caller went away, and runs calls concurrently, so a shutdown that does
not wait for it lists the file before the call lands: a lease record written
after the hand-back stayed live, a corpus landed after the cleanup's listing.

Every case runs on an adopted memory file holding others' entities that share
every field server-memory keys on or matches but the name (entity type and
observations of one of benchd's records; its name but for case, a leading
space, another namespace, no prefix; a name with the lease prefix that is no
lease) and a relation between two of them (a name in benchd's own id space,
``benchd:<namespace>:...``, is benchd's by DESIGN §2a). Each case asserts: no
lease record is left; ``cleanup = "after"`` leaves none of benchd's records
and says so, ``before`` leaves the namespace marked benchd's; the next run (a
restart) verifies the whole corpus; ``benchd purge`` then leaves exactly the
others' lines, byte for byte as the server wrote them.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_servers import HERE, server_memory_argv, server_memory_over_http
from support import BenchdProcess
from test_mcp_kind import (
    KEYWORDS,
    SERVER_MEMORY_TOOLS,
    probe_toml,
    server_memory_stdio,
    stdio_target,
)

from benchd.config.load import load_config
from benchd.kinds.mcp import wire
from benchd.kinds.mcp.lease import is_lease_name
from benchd.probe import CleanupReport, ProbeRunner
from benchd.store.owned import sentinel_id

NS = "benchd-eval"
CORPUS = json.loads(KEYWORDS.read_text())["memories"]
FIRST = CORPUS[0]


def _line(record: dict[str, Any]) -> str:
    """A record as server-memory writes it to its file (JSON.stringify: compact, raw UTF-8)."""
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False)


def _entity(name: str) -> str:
    # benchd's entity type and the very observation benchd writes for its first record
    return _line({"type": "entity", "name": name, "entityType": "benchd",
                  "observations": [FIRST["content"]]})  # fmt: skip


THEIRS_ENTITIES = [
    _entity(FIRST["id"]),  # the fixture id itself
    _entity(f"Benchd:{NS}:{FIRST['id']}"),
    _entity(f" benchd:{NS}:{FIRST['id']}"),
    _entity(f"benchd:other-ns:{FIRST['id']}"),
    _entity("benchd-sentinel:other-ns"),
    _entity(f"benchd-lease:{NS}:not-a-lease"),
]
THEIRS_RELATION = _line({"type": "relation", "from": FIRST["id"], "to": "benchd-sentinel:other-ns",
                         "relationType": "mentions"})  # fmt: skip
THEIRS = [*THEIRS_ENTITIES, THEIRS_RELATION]  # the file's order: entities, then relations
OURS = {f"benchd:{NS}:{m['id']}" for m in CORPUS}


def lines(memory: Path) -> list[str]:
    return [line for line in memory.read_text().splitlines() if line.strip()]


def names(memory: Path) -> list[str]:
    return [json.loads(line).get("name", "") for line in lines(memory)]


def theirs(memory: Path) -> list[str]:
    """The file's lines benchd did not write, as the file holds them."""

    def benchds(line: str) -> bool:
        name = json.loads(line).get("name", "")
        ours = name in OURS or name == sentinel_id(NS) or is_lease_name(NS, name)
        return ours and line not in THEIRS

    return [line for line in lines(memory) if not benchds(line)]


def is_point(point: str, message: dict[str, Any], state: dict[str, bool]) -> bool:
    """Whether ``message`` (just written to the server's stdin) is the call to cut at."""
    if message.get("method") != "tools/call":
        return False
    text = json.dumps(message)
    tool = message["params"]["name"]
    corpus = any(f'"{name}"' in text for name in OURS)
    if tool == "create_entities" and corpus:
        state["seeded"] = True
    if point == "seed":
        return tool == "create_entities" and corpus
    if point == "lease":
        return tool == "create_entities" and f"benchd-lease:{NS}:pod-0:" in text
    if point == "verify":
        return tool == "read_graph" and state.get("seeded", False)
    return tool == "delete_entities" and corpus  # cleanup


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("point", "cleanup"),
    [
        ("seed", "after"), ("seed", "before"), ("lease", "after"), ("lease", "before"),
        ("verify", "after"), ("verify", "before"), ("cleanup", "after"), ("cleanup", "before"),
    ],
)  # fmt: skip
async def test_sigterm_with_a_call_in_flight_leaves_no_lease_and_nothing_foreign_touched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str, cleanup: str
) -> None:
    memory = tmp_path / "shared.jsonl"
    memory.write_text("\n".join(THEIRS) + "\n")
    config = tmp_path / "benchd.toml"
    target = server_memory_stdio(memory, f'adopt_namespace = true\ncleanup = "{cleanup}"')
    config.write_text("[server]\ninstance = \"pod-0\"\n" + probe_toml(target, SERVER_MEMORY_TOOLS))
    (probe,) = load_config(config).probes

    if point == "cleanup" and cleanup == "before":  # cut the next cycle's delete of this copy
        warm = ProbeRunner(probe, instance="pod-0")
        try:
            assert (await warm.run_once()).outcome == "success"
            await warm.release_lease()
        finally:
            await warm.aclose()

    send = wire.StdioWire._send
    cut: list[anyio.CancelScope] = []
    state: dict[str, bool] = {}
    sent_at_cut: list[str] = []

    async def send_then_cut(self: wire.StdioWire, message: dict[str, Any]) -> None:
        await send(self, message)  # on the server's stdin: it will carry it out
        if cut and is_point(point, message, state):
            sent_at_cut.append(message["params"]["name"])
            cut.pop().cancel()  # what SIGTERM does to the running cycle, now

    monkeypatch.setattr(wire.StdioWire, "_send", send_then_cut)
    runner = ProbeRunner(probe, instance="pod-0")
    try:
        async with anyio.create_task_group() as tg:
            cut.append(tg.cancel_scope)
            tg.start_soon(runner.run_once)
        assert sent_at_cut, f"the cycle never sent the {point} call"
        monkeypatch.setattr(wire.StdioWire, "_send", send)
        report = await runner.cleanup()  # what the daemon runs after SIGTERM
    finally:
        await runner.aclose()

    assert not [n for n in names(memory) if is_lease_name(NS, n) and _entity(n) not in THEIRS]
    assert theirs(memory) == THEIRS
    ours = [n for n in names(memory) if n in OURS or n == sentinel_id(NS)]
    if cleanup == "after":
        assert isinstance(report, CleanupReport) and not report.timed_out
        assert report.leftover == len(ours) == 0, (report, ours)
    else:
        assert report is None and sentinel_id(NS) in ours  # the namespace stays benchd's

    restarted = ProbeRunner(probe, instance="pod-0")
    try:
        result = await restarted.run_once()
        assert result.outcome == "success", result.error_message
        assert result.seed is not None and result.seed.verified == len(CORPUS)
        await restarted.release_lease()
    finally:
        await restarted.aclose()
    assert theirs(memory) == THEIRS

    proc = subprocess.run(
        [sys.executable, "-m", "benchd", "purge", "-c", str(config)],
        capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    left = f"left {len(THEIRS_ENTITIES)} record(s) benchd did not write"
    assert left in proc.stdout, proc.stdout
    assert lines(memory) == THEIRS  # byte for byte, in the server's own order


HELD = {  # which request the relay holds back: every text in the line
    "seed": ["create_entities", f"benchd:{NS}:"],
    "lease": ["create_entities", f"benchd-lease:{NS}:"],
    "cleanup": ["delete_entities", f"benchd:{NS}:"],
}


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize(
    ("point", "cleanup"), [("seed", "after"), ("lease", "before"), ("cleanup", "after")]
)
def test_benchd_run_stopped_by_sigterm_while_the_server_holds_a_call_ends_clean(
    tmp_path: Path, point: str, cleanup: str, transport: str
) -> None:
    """``benchd run`` as an operator runs it, its server (over stdio, or through the
    supergateway HTTP bridge) behind a relay (hold_server.py) that keeps one call from the
    server until after the SIGTERM: the daemon waits for that call, then its shutdown
    leaves no lease record, ``after`` leaves none of benchd's records (``cleanup done``),
    ``before`` its marked namespace; others' lines byte for byte."""
    memory = tmp_path / "shared.jsonl"
    memory.write_text("\n".join(THEIRS) + "\n")
    held, release = tmp_path / "held", tmp_path / "release"
    os.mkfifo(held)
    os.mkfifo(release)
    heard: queue.Queue[bytes] = queue.Queue()
    held_fd = os.open(held, os.O_RDWR)  # read-write: the relay's open never waits for us
    threading.Thread(target=lambda: heard.put(os.read(held_fd, 5)), daemon=True).start()
    marks = [a for m in HELD[point] for a in ("--match", m)]
    argv = [sys.executable, str(HERE / "hold_server.py"), "--held", str(held),
            "--release", str(release), *marks, "--", *server_memory_argv()]  # fmt: skip
    rest = f'adopt_namespace = true\ncleanup = "{cleanup}"'
    release_fd = os.open(release, os.O_RDWR)
    try:
        with contextlib.ExitStack() as stack:
            if transport == "http":  # the relay and server behind supergateway
                url = stack.enter_context(server_memory_over_http(memory, argv))
                target = f'transport = "http"\nurl = "{url}"\n{rest}'
            else:
                target = stdio_target(argv, {"MEMORY_FILE_PATH": str(memory)}, rest)
            config = tmp_path / "benchd.toml"
            config.write_text('[server]\ninstance = "pod-0"\n' + probe_toml(
                target, SERVER_MEMORY_TOOLS, extra="interval_s = 600"))  # fmt: skip
            benchd = stack.enter_context(BenchdProcess(["--config", str(config)]))
            assert heard.get(timeout=300) == b"held\n"  # a failure bound, not a margin
            benchd.signal(signal.SIGTERM)
            benchd.wait_for(lambda e: e.get("event") == "stopping", timeout=60)
            os.write(release_fd, b"g")  # the server carries the call out now
            assert benchd.proc is not None and benchd.proc.wait(timeout=120) == 0
            benchd.wait_for(lambda e: e.get("event") == "stopped", timeout=10)
            events = {e.get("event") for e in benchd.events}
    finally:
        os.close(release_fd)
        os.close(held_fd)
    assert not [n for n in names(memory) if is_lease_name(NS, n) and _entity(n) not in THEIRS]
    assert theirs(memory) == THEIRS
    ours = [n for n in names(memory) if n in OURS or n == sentinel_id(NS)]
    if cleanup == "after":
        assert "cleanup done" in events and ours == [], (events, ours)
    else:
        assert "lease released" in events and sentinel_id(NS) in ours
