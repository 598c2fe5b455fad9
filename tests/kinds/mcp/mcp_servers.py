"""The MCP servers the mcp kind's tests run, as real processes on loopback.

- ``@modelcontextprotocol/server-memory`` from npm (installed into ``.ci-npm/``
  by ``scripts/test.sh``), over stdio, and over streamable HTTP through the
  ``supergateway`` stdio-to-HTTP bridge;
- ``memory_server.py`` beside this file, written with the MCP SDK's server
  framework, over stdio or streamable HTTP.

An HTTP server is ready when it logs that it listens (no sleeps); it runs
in its own process group, and the whole group is killed afterwards.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent.parent
NPM_BIN = REPO / ".ci-npm" / "node_modules" / ".bin"
MEMORY_SERVER = HERE / "memory_server.py"
READY_TIMEOUT_S = 120.0  # a failure bound for a cold start on a busy box, not a margin


def npm_bin(name: str) -> str:
    """An npm server's path; skip without ``.ci-npm`` locally, fail in CI (test.sh installs it)."""
    path = NPM_BIN / name
    if not path.exists():
        message = f"{path} is missing: run scripts/test.sh (it installs the npm MCP servers)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return str(path)


def server_memory_argv() -> list[str]:
    return [npm_bin("mcp-server-memory")]


def sdk_server_argv(*extra: str) -> list[str]:
    return [sys.executable, str(MEMORY_SERVER), *extra]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def http_server(
    argv: Sequence[str], marker: str, env: Mapping[str, str] | None = None
) -> Iterator[subprocess.Popen[str]]:
    """Run ``argv`` until the block ends; ready once a line of its output holds ``marker``."""
    proc = subprocess.Popen(
        list(argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {})},
        start_new_session=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        seen: list[str] = []
        while True:
            line = lines.get(timeout=READY_TIMEOUT_S)
            if line is None:
                raise AssertionError(f"{argv[0]} exited before it listened: {''.join(seen)}")
            seen.append(line)
            if marker in line:
                break
        yield proc
    finally:
        with_group(proc, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with_group(proc, signal.SIGKILL)
            proc.wait()
        with_group(proc, signal.SIGKILL)  # a child the server left holds the pipe open
        reader.join()
        assert proc.stdout is not None
        proc.stdout.close()


def with_group(proc: subprocess.Popen[str], sig: int) -> None:
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


@contextmanager
def server_memory_over_http(
    memory_file: Path, server: Sequence[str] | None = None
) -> Iterator[str]:
    """server-memory (or ``server``, a command line in front of it) behind supergateway
    (stateful sessions): yields the endpoint URL."""
    port = free_port()
    argv = [
        npm_bin("supergateway"),
        "--stdio",
        " ".join(server or server_memory_argv()),
        "--outputTransport",
        "streamableHttp",
        "--stateful",
        "--port",
        str(port),
    ]
    with http_server(argv, f"Listening on port {port}", {"MEMORY_FILE_PATH": str(memory_file)}):
        yield f"http://127.0.0.1:{port}/mcp"


@contextmanager
def sdk_server_over_http(embedder: str = "hash:1024") -> Iterator[str]:
    """memory_server.py over streamable HTTP: yields the endpoint URL."""
    port = free_port()
    argv = sdk_server_argv("--transport", "http", "--port", str(port), "--embedder", embedder)
    with http_server(argv, f"Uvicorn running on http://127.0.0.1:{port}"):
        yield f"http://127.0.0.1:{port}/mcp"


# The tool map of the npm reference server ``server-memory``, as a probe config's lines.
SERVER_MEMORY_TOOLS = """
[probe.target.tools.search]
name = "search_nodes"
arguments = { query = "{q}" }
ids = "entities[*].name"
returns = "set"

[probe.target.tools.write]
name = "create_entities"
arguments = { entities = "{records}" }
record = { name = "{id}", entityType = "benchd", observations = ["{content}"] }

[probe.target.tools.list]
name = "read_graph"
ids = "entities[*].name"

[probe.target.tools.delete]
name = "delete_entities"
arguments = { entityNames = "{ids}" }
"""


def stdio_lines(argv: list[str], env: dict[str, str]) -> str:
    """A stdio target's ``command``, ``args`` and ``env`` keys, as TOML lines."""
    envs = ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items())
    return (
        f'transport = "stdio"\ncommand = {json.dumps(argv[0])}\n'
        f"args = {json.dumps(argv[1:])}\nenv = {{ {envs} }}\n"
    )
