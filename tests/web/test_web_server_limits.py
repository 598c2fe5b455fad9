"""benchd's HTTP server holds: slow and idle clients are cut off, connections are
capped, and running out of file descriptors is one log line, not a flood.

Every test talks to a real server over loopback and waits on events (a
connection closed by the server, a log line); bounds are generous deadlines,
never timing margins.
"""

from __future__ import annotations

import json
import os
import resource
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx
import pytest
from anyio.abc import SocketStream
from support import self_signed_cert

from benchd.surfacers.result_book import ResultBook
from benchd.web.app import build_app
from benchd.web.server import ServerLimits, serve_web

pytestmark = pytest.mark.anyio

REQUEST_HEAD = b"GET /healthz HTTP/1.1\r\nHost: benchd\r\n"


async def closed_by_server(stream: SocketStream) -> bool:
    """Wait until the peer closes: True on EOF or reset (what a closed connection looks like)."""
    try:
        while True:
            data = await stream.receive()
            if data.startswith(b"HTTP/1.1 408") or not data:
                return True
    except (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionResetError):
        return True


async def test_idle_and_half_sent_connections_are_closed_by_the_server() -> None:
    limits = ServerLimits(header_timeout_s=1.0, idle_timeout_s=1.0, max_connections=100)
    async with serve_web(build_app(ResultBook()), "127.0.0.1", 0, limits=limits) as bound:
        streams = [await anyio.connect_tcp("127.0.0.1", bound.port) for _ in range(50)]
        closed = [False] * len(streams)

        async def trickle(stream: SocketStream) -> None:
            # Half a request, then one more header byte at a time: every byte
            # would restart uvicorn's own keep-alive timer; the deadline holds.
            await stream.send(REQUEST_HEAD + b"X-Slow: ")
            with anyio.move_on_after(30):
                while True:
                    await anyio.sleep(0.2)
                    try:
                        await stream.send(b"a")
                    except (anyio.BrokenResourceError, OSError):
                        return

        async def watch(i: int) -> None:
            closed[i] = await closed_by_server(streams[i])

        with anyio.fail_after(60):  # a bound against hanging, not a margin
            async with anyio.create_task_group() as tg:
                for i, stream in enumerate(streams):
                    if i % 2:
                        tg.start_soon(trickle, stream)  # half-sent
                    tg.start_soon(watch, i)  # idle ones send nothing at all
                # while they are held, the server still answers others
                async with httpx.AsyncClient() as client:
                    assert (await client.get(f"{bound.url}/healthz")).status_code == 200
        assert all(closed)
        assert bound.stats is not None and bound.stats.timed_out >= 50
        for stream in streams:
            await stream.aclose()


async def test_keep_alive_connections_are_closed_when_idle() -> None:
    limits = ServerLimits(header_timeout_s=30.0, idle_timeout_s=1.0)
    async with serve_web(build_app(ResultBook()), "127.0.0.1", 0, limits=limits) as bound:
        stream = await anyio.connect_tcp("127.0.0.1", bound.port)
        await stream.send(REQUEST_HEAD + b"\r\n")
        first = await stream.receive()
        assert first.startswith(b"HTTP/1.1 200")
        with anyio.fail_after(30):
            assert await closed_by_server(stream)
        await stream.aclose()


async def test_connections_beyond_the_cap_get_503_and_are_closed() -> None:
    """The sixth connection is refused while the five are held.

    The five are held only until their header timeout (counted from each one's accept):
    at 1 s, a process descheduled for a second between the first accept and the sixth
    connect (client and server share this event loop) would find them closed and the
    sixth accepted. 5 s keeps them held through such a stall; they still time out below.
    """
    limits = ServerLimits(header_timeout_s=5.0, max_connections=5)
    async with serve_web(build_app(ResultBook()), "127.0.0.1", 0, limits=limits) as bound:
        held = [await anyio.connect_tcp("127.0.0.1", bound.port) for _ in range(5)]
        # the server sees connections when it accepts them: one request each proves it
        for stream in held:
            await stream.send(b"GET /healthz HTTP/1.1\r\nHost: b\r\n")  # unfinished
        extra = await anyio.connect_tcp("127.0.0.1", bound.port)
        with anyio.fail_after(30):
            reply = b""
            try:
                while chunk := await extra.receive():
                    reply += chunk
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                pass
        assert reply.startswith(b"HTTP/1.1 503"), reply
        assert bound.stats is not None and bound.stats.refused >= 1
        with anyio.fail_after(30):  # once the held ones time out, there is room again
            for stream in held:
                assert await closed_by_server(stream)
        async with httpx.AsyncClient() as client:
            assert (await client.get(f"{bound.url}/healthz")).status_code == 200
        for stream in (*held, extra):
            await stream.aclose()


async def test_a_silent_tls_client_is_closed_at_the_header_timeout(tmp_path: Path) -> None:
    """A TLS connection that never sends its ClientHello: without a handshake
    timeout asyncio holds it 60 s, before the header deadline can start."""
    cert, key = self_signed_cert(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    limits = ServerLimits(header_timeout_s=1.0, idle_timeout_s=1.0)
    app = build_app(ResultBook())
    async with serve_web(app, "127.0.0.1", 0, ssl_context=context, limits=limits) as bound:
        silent = [await anyio.connect_tcp("127.0.0.1", bound.port) for _ in range(10)]
        with anyio.fail_after(30):  # a bound against hanging (asyncio's own default is 60 s)
            for stream in silent:
                assert await closed_by_server(stream)
        trust = ssl.create_default_context(cafile=str(cert))
        async with httpx.AsyncClient(verify=trust) as client:  # a real TLS client still gets in
            assert (await client.get(f"{bound.url}/healthz")).status_code == 200
        for stream in silent:
            await stream.aclose()


def _limit_fds(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))


def test_running_out_of_fds_is_one_log_line_and_healthz_recovers(tmp_path: Path) -> None:
    """``benchd run`` under a low open-files limit, flooded with idle connections."""
    config = tmp_path / "benchd.toml"
    config.write_text(
        "[server]\nheader_timeout_s = 2.0\n\n"
        '[[probe]]\nname = "lonely"\nfixture = "packaged:smoke"\ninterval_s = 3600\n'
        f'[probe.target]\nkind = "zengram"\nurl = "http://127.0.0.1:{free_port()}"\n'
        'api_key_env = "DRILL_STORE_KEY"\n'
    )
    port = free_port()
    args = [sys.executable, "-m", "benchd", "run", "--config", str(config),
            "--listen", f"127.0.0.1:{port}", "--log-format", "json"]  # fmt: skip
    log_path = tmp_path / "stderr.log"
    with log_path.open("w") as log_file:
        proc = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log_file,
            env={**os.environ, "DRILL_STORE_KEY": "k"}, preexec_fn=lambda: _limit_fds(64),
        )  # fmt: skip
        flood: list[socket.socket] = []
        try:
            url = f"http://127.0.0.1:{port}"
            _wait_for(lambda: _healthy(url), "the daemon to answer /healthz")
            # The probe's first cycle (against a closed port) must be over before
            # the flood: a cycle running out of fds is another test's business.
            _wait_for(lambda: _cycle_logged(log_path.read_text()), "the first cycle to end")
            for _ in range(120):  # twice the whole fd budget
                sock = socket.create_connection(("127.0.0.1", port), timeout=10)
                flood.append(sock)
            _wait_for(lambda: _accept_failed(log_path.read_text()), "the accept() log line")
            time.sleep(3)  # let accept() fail for a while: more failures, no more lines
            for sock in flood:
                sock.close()
            _wait_for(lambda: _healthy(url), "/healthz to recover", timeout=90)
        finally:
            for sock in flood:
                sock.close()
            proc.terminate()
            proc.wait(timeout=30)
    text = log_path.read_text()
    accept_lines = [line for line in text.splitlines() if _accept_failed(line)]
    assert len(accept_lines) == 1, accept_lines  # one a minute, however many failures
    assert "Traceback" not in text, text[-6000:]
    assert len(text.splitlines()) < 40, text[-3000:]


def _cycle_logged(text: str) -> bool:
    for line in text.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("event") == "cycle":
            return True
    return False


def _accept_failed(text: str) -> bool:
    # ours, or asyncio's own report (with a traceback) when nothing handles it
    return "cannot accept" in text or "accept() out of system resource" in text


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url + "/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _wait_for(predicate: object, what: str, timeout: float = 60.0) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")
