"""Conformance: MCP servers and the reference store killed mid-run are measured again at once.

test_conformance_restart.py's promise for the kinds without a vector server:
``benchd run`` as a subprocess, cycles asked for on its API
(``POST /api/probes/<name>/run``) and awaited in its JSON log, the server
killed (SIGKILL) at a point the test chooses, never by timing.

- **mcp over stdio**: benchd owns the server process. Killed between cycles
  (the SDK-built ranked server: back empty; npm server-memory: back with its
  memory file) or during a cycle (the SDK server exits on the search that
  finds its flag file): the next cycle starts the server again and succeeds;
  the cycle the server died in fails as ``connect``, never ``internal``.
- **mcp over HTTP** (server-memory behind the supergateway bridge): the bridge
  is killed and started again on the same port, with the same memory file;
  the first cycle after it is back succeeds on a new session.
- **http** and **zengram** against ``benchd refstore`` as a subprocess (the
  default profile for http, ``zengram-4.3`` for zengram): killed and started
  again on the same port, empty (the store keeps its data in memory by
  default) or with its data (``--db FILE``): the first cycle after it is back
  succeeds, seeding afresh when empty and writing nothing when not.

Everywhere: benchd's namespace then holds the corpus and the sentinel once
each (no duplicates), read from the store itself.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kinds" / "mcp"))

import httpx
import pytest
from mcp_servers import (
    SERVER_MEMORY_TOOLS,
    free_port,
    http_server,
    npm_bin,
    sdk_server_argv,
    server_memory_argv,
    stdio_lines,
)
from support import BenchdProcess

pytestmark = pytest.mark.timeout(900)

REPO = Path(__file__).resolve().parents[2]
SMOKE = 36  # records of the packaged smoke fixture
KEYWORDS = REPO / "fixtures" / "mcp-keyword.json"
CYCLE_TIMEOUT_S = 240.0  # a failure bound for one cycle on a busy box, not a margin
SENTINEL = "__benchd_sentinel__"

MEM0_TOOLS = """
[probe.target.tools.search]
name = "search_memories"
arguments = { user_id = "{namespace}", query = "{q}", limit = "{k}" }
ids = "results[*].id"
scores = "results[*].score"

[probe.target.tools.write]
name = "add_memories"
arguments = { user_id = "{namespace}", memories = "{records}" }
record = { id = "{id}", content = "{content}" }

[probe.target.tools.list]
name = "list_memories"
arguments = { user_id = "{namespace}", offset = "{offset}", limit = "{limit}" }
ids = "memories[*].id"
page_size = 100

[probe.target.tools.delete]
name = "delete_memory"
arguments = { user_id = "{namespace}", memory_id = "{id}" }
"""


def probe_toml(target: str, fixture: str, name: str = "mcp") -> str:
    return f"""
[[probe]]
name = "{name}"
fixture = "{fixture}"
k = [10]
timeout_s = 120
interval_s = 3600

[probe.budget]
unlimited = true

[probe.load]
mode = "serial"

[probe.target]
{target}
"""


def stdio_target(argv: list[str], env: dict[str, str], rest: str) -> str:
    return f'kind = "mcp"\ntimeout_s = 30\n{stdio_lines(argv, env)}{rest}'


def cycle(daemon: BenchdProcess, probe: str, number: int | None = None) -> dict[str, Any]:
    """Cycle ``number`` once it has finished; None: ask for one now (and wait for it)."""
    if number is None:
        asked = daemon.post(f"/api/probes/{probe}/run")
        assert asked.status_code == 202, asked.text
        number = int(asked.json()["cycle"])
    return daemon.wait_for(
        lambda e: e.get("event") == "cycle" and e.get("probe") == probe and e["cycle"] == number,
        timeout=CYCLE_TIMEOUT_S,
    )


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``, read from /proc (parents before children)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with suppress(OSError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, todo = [], [pid]
    while todo:
        above = todo.pop(0)
        below = [child for child, parent in parents.items() if parent == above]
        found += below
        todo += below
    return found


def kill_children(daemon: BenchdProcess) -> int:
    """SIGKILL every process benchd started (its stdio server); how many there were."""
    assert daemon.proc is not None
    pids = descendants(daemon.proc.pid)
    for pid in pids:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for pid in pids:  # benchd has reaped its child: it knows the process ended
        deadline = time.monotonic() + CYCLE_TIMEOUT_S
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
    return len(pids)


def entity_names(memory: Path) -> list[str]:
    """The entity names in server-memory's JSONL file (duplicates kept)."""
    lines = [json.loads(line) for line in memory.read_text().splitlines() if line.strip()]
    return [row["name"] for row in lines if row.get("type") == "entity"]


def no_duplicates(names: list[str]) -> None:
    repeated = sorted({n for n in names if names.count(n) > 1})
    assert repeated == [], repeated


# -- mcp over stdio -------------------------------------------------------------------------


def test_an_sdk_stdio_server_killed_between_cycles_is_started_again_and_seeded_afresh(
    tmp_path: Path,
) -> None:
    target = stdio_target(sdk_server_argv("--embedder", "hash:256"), {},
                          'namespace_by = "argument"\nnamespace = "restart-sdk"')  # fmt: skip
    config = tmp_path / "run.toml"
    config.write_text(probe_toml(target + MEM0_TOOLS, "packaged:smoke"))
    with BenchdProcess(["--config", str(config)]) as daemon:
        first = cycle(daemon, "mcp", 1)
        assert first["outcome"] == "success", first.get("error")
        assert kill_children(daemon) >= 1
        back = cycle(daemon, "mcp")
        assert back["outcome"] == "success", json.dumps(back)
        assert back["seed_imported"] == SMOKE, back
        then = cycle(daemon, "mcp")
        assert then["outcome"] == "success", then
        assert daemon.stop(timeout=120) == 0
    assert not [e for e in daemon.events if e.get("error_kind") == "internal"]


def test_an_sdk_stdio_server_dying_during_a_cycle_fails_it_as_connect_and_the_next_succeeds(
    tmp_path: Path,
) -> None:
    flag = tmp_path / "die"
    target = stdio_target(sdk_server_argv("--embedder", "hash:256"),
                          {"MEMSERVER_DIE_FLAG": str(flag)},
                          'namespace_by = "argument"\nnamespace = "restart-mid"')  # fmt: skip
    config = tmp_path / "run.toml"
    config.write_text(probe_toml(target + MEM0_TOOLS, "packaged:smoke"))
    with BenchdProcess(["--config", str(config)]) as daemon:
        first = cycle(daemon, "mcp", 1)
        assert first["outcome"] == "success", first.get("error")
        flag.touch()  # the next search the server answers is its last
        died = cycle(daemon, "mcp")
        assert died["outcome"] == "failed" and died["error_kind"] == "connect", died
        assert not flag.exists()
        back = cycle(daemon, "mcp")
        assert back["outcome"] == "success", json.dumps(back)
        assert back["seed_imported"] == SMOKE, back
        assert back["recall@10"] == first["recall@10"], back  # scored as before the death
        assert daemon.stop(timeout=120) == 0


def test_server_memory_over_stdio_killed_between_cycles_comes_back_with_its_file(
    tmp_path: Path,
) -> None:
    memory = tmp_path / "memory.jsonl"
    target = stdio_target(server_memory_argv(), {"MEMORY_FILE_PATH": str(memory)},
                          'namespace_by = "server"')  # fmt: skip
    config = tmp_path / "run.toml"
    config.write_text(probe_toml(target + SERVER_MEMORY_TOOLS, str(KEYWORDS)))
    with BenchdProcess(["--config", str(config)]) as daemon:
        first = cycle(daemon, "mcp", 1)
        assert first["outcome"] == "success", first.get("error")
        seeded = first["seed_imported"]
        assert kill_children(daemon) >= 1
        back = cycle(daemon, "mcp")
        assert back["outcome"] == "success", json.dumps(back)
        # the list tool gives no contents to compare: each cycle writes the corpus again
        assert back["seed_imported"] == seeded, back
        assert daemon.stop(timeout=120) == 0
    names = entity_names(memory)
    no_duplicates(names)
    assert len(names) == seeded + 1  # the corpus and the sentinel


# -- mcp over HTTP (supergateway) -----------------------------------------------------------


@contextmanager
def bridge(port: int, memory: Path) -> Iterator[subprocess.Popen[str]]:
    argv = [npm_bin("supergateway"), "--stdio", " ".join(server_memory_argv()),
            "--outputTransport", "streamableHttp", "--stateful", "--port", str(port)]  # fmt: skip
    with http_server(argv, f"Listening on port {port}", {"MEMORY_FILE_PATH": str(memory)}) as p:
        yield p


def test_the_http_bridge_killed_and_started_again_on_its_port_is_measured_at_once(
    tmp_path: Path,
) -> None:
    memory, port = tmp_path / "memory.jsonl", free_port()
    target = f'kind = "mcp"\ntimeout_s = 30\ntransport = "http"\nurl = "http://127.0.0.1:{port}/mcp"\n'
    config = tmp_path / "run.toml"
    config.write_text(probe_toml(target + 'namespace_by = "server"\n' + SERVER_MEMORY_TOOLS,
                                 str(KEYWORDS)))  # fmt: skip
    with bridge(port, memory) as first_bridge:
        daemon = BenchdProcess(["--config", str(config)]).__enter__()
        try:
            first = cycle(daemon, "mcp", 1)
            assert first["outcome"] == "success", first.get("error")
            os.killpg(first_bridge.pid, signal.SIGKILL)
            first_bridge.wait()
            down = cycle(daemon, "mcp")
            assert down["outcome"] == "failed" and down["error_kind"] == "connect", down
            with bridge(port, memory):
                back = cycle(daemon, "mcp")
                assert back["outcome"] == "success", json.dumps(back)
                assert back["seed_imported"] == first["seed_imported"], back
                assert daemon.stop(timeout=120) == 0
        finally:
            daemon.__exit__(None, None, None)
    names = entity_names(memory)
    no_duplicates(names)
    assert len(names) == first["seed_imported"] + 1  # the corpus and the sentinel


# -- http and zengram against the reference store ---------------------------------------------


class RefStoreProcess:
    """``benchd refstore`` as a subprocess on a fixed port, killed and started again."""

    def __init__(self, profile: str, db: Path | None) -> None:
        self.port, self.db, self.profile = free_port(), db, profile
        self.api_key = "ref-" + os.urandom(8).hex()
        self.url = f"http://127.0.0.1:{self.port}"
        self._proc: Any = None
        self._cm: Any = None

    def start(self) -> None:
        argv = [sys.executable, "-m", "benchd", "refstore", "--listen", f"127.0.0.1:{self.port}",
                "--profile", self.profile, "--import-pacing", "0", "--read-limit", "0",
                "--write-limit", "0", "--api-key-env", "REF_KEY"]  # fmt: skip
        if self.db is not None:
            argv += ["--db", str(self.db)]
        self._cm = http_server(argv, "refstore listening", {"REF_KEY": self.api_key})
        self._proc = self._cm.__enter__()

    def kill(self) -> None:
        os.killpg(self._proc.pid, signal.SIGKILL)
        self._proc.wait()
        self.close()

    def close(self) -> None:
        if self._cm is not None:
            cm, self._cm = self._cm, None
            cm.__exit__(None, None, None)

    def contents(self, namespace: str) -> list[str]:
        """Every record's content in ``namespace`` (duplicates kept), from /export."""
        out: list[str] = []
        with httpx.Client(base_url=self.url, headers={"x-api-key": self.api_key}) as client:
            while True:
                page = client.get("/export", params={"client_id": namespace, "limit": 500,
                                                     "offset": len(out)}).json()  # fmt: skip
                out += [m["content"] for m in page["memories"]]
                if not page.get("has_more") or not page["memories"]:
                    return out


def refstore_target(kind: str, store: RefStoreProcess, namespace: str) -> str:
    if kind == "zengram":
        return (f'kind = "zengram"\nurl = "{store.url}"\napi_key_env = "REF_KEY"\n'
                f'namespace = "{namespace}"\n')  # fmt: skip
    text = (REPO / "configs" / "http-zengram.toml").read_text()
    target = text[text.index("[probe.target]") : text.index("[probe.budget]")]
    target = target.replace('url = "http://127.0.0.1:8084"', f'url = "{store.url}"')
    target = target.replace('namespace = "benchd-eval"', f'namespace = "{namespace}"')
    target = target.replace('api_key_env = "BRAIN_API_KEY"', 'api_key_env = "REF_KEY"')
    return target.removeprefix("[probe.target]\n")


@pytest.mark.parametrize("empty", [True, False], ids=["empty", "with-data"])
@pytest.mark.parametrize("kind", ["http", "zengram"])
def test_the_reference_store_killed_and_started_again_is_measured_by_the_next_cycle(
    kind: str, empty: bool, tmp_path: Path
) -> None:
    profile = "zengram-4.3" if kind == "zengram" else "default"
    store = RefStoreProcess(profile, None if empty else tmp_path / "ref.db")
    ns = f"restart-{kind}"
    config = tmp_path / "run.toml"
    config.write_text(probe_toml(refstore_target(kind, store, ns), "packaged:smoke", kind))
    env = {**os.environ, "REF_KEY": store.api_key, "BENCHD_STATE_DIR": str(tmp_path / "st")}
    store.start()
    try:
        with BenchdProcess(["--config", str(config)], env=env) as daemon:
            first = cycle(daemon, kind, 1)
            assert first["outcome"] == "success", first.get("error")
            store.kill()
            down = cycle(daemon, kind)
            assert down["outcome"] == "failed" and down["error_kind"] == "connect", down
            store.start()
            back = cycle(daemon, kind)
            assert back["outcome"] == "success", json.dumps(back)
            # the kind's import skips or replaces what the store holds: each cycle imports all
            assert back["seed_imported"] == SMOKE, back
            then = cycle(daemon, kind)
            assert then["outcome"] == "success", then
            assert daemon.stop(timeout=120) == 0
        contents = store.contents(ns)
    finally:
        store.close()
    no_duplicates(contents)
    assert len(contents) == SMOKE + 1  # the corpus and the sentinel
