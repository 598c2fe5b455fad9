"""One writer per namespace on every writing kind, under any clock and any container.

Each case runs ``benchd run`` daemons as subprocesses against each kind's real
server (pgvector, Chroma, Milvus Lite; ``http`` and ``zengram`` against the
reference store): two daemons with one instance name in separate pid
namespaces (``unshare --pid --fork --mount-proc``, two containers sharing a
host name), each with its own state directory; a daemon whose wall clock
runs an hour ahead of the holder's, and a holder an hour behind (Debian's
``faketime``); a daemon killed and restarted (its token in its state
directory). Exactly one writes: the holder's cycles succeed, the other's are
refused with kind ``ownership`` before writing anything, cycle after cycle
(cycles are triggered through ``/api/probes/NAME/run`` and awaited: no
timing). The daemon's lease (3 x 900 s + 300 s: 50 minutes) is shorter
than the hour the clocks are apart, so a reader that compared heartbeats
with its own clock would take it; it never runs out as seen by the other,
since each of the holder's cycles heartbeats.

Qdrant's local mode cannot be shared by two processes (it file-locks its
path), so its two-daemon cases do not apply; its restart case runs.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from kinds import require_client, target_table
from store_servers import missing
from support import BenchdProcess

from benchd.kinds.mcp.lease import lease_prefix
from benchd.refstore.server import RefStoreThread
from benchd.refstore.testing import make_config

pytestmark = pytest.mark.timeout(900)

VECTOR_KINDS = ("pgvector", "chroma", "milvus", "qdrant")
KINDS = (*VECTOR_KINDS, "http", "zengram")
HTTP_EXAMPLE = Path(__file__).resolve().parents[2] / "configs" / "http-zengram.toml"
UNLIMITED = "\n[probe.budget]\nunlimited = true\n"  # cycles triggered back to back
LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
SHIFTED = (
    "import runpy, sys, time, types\n"
    "import benchd.store.lease as lease\n"
    "real = time.time\n"
    "lease.time = types.SimpleNamespace(time=lambda: real() + {s}, monotonic=time.monotonic)\n"
    "sys.argv[0] = 'benchd'\n"
    "runpy.run_module('benchd', run_name='__main__', alter_sys=True)\n"
)
UNSHARE = ("unshare", "--pid", "--fork", "--mount-proc", "--kill-child")


@pytest.fixture(scope="module")
def refstore() -> Iterator[RefStoreThread]:
    with RefStoreThread(make_config(retriever="bm25")) as store:
        yield store


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return require_client(str(request.param))


@pytest.fixture
def server(kind: str, request: pytest.FixtureRequest) -> Any:
    """The kind's server: conftest's session servers, the reference store for the others."""
    if kind in ("http", "zengram"):
        return request.getfixturevalue("refstore")
    return request.getfixturevalue({"pgvector": "postgres"}.get(kind, kind))


def env_for(server: Any, state: Path) -> dict[str, str]:
    env = {**os.environ, "BENCHD_STATE_DIR": str(state)}
    if getattr(server, "dsn", ""):
        env["PG_DSN"] = server.dsn
    if isinstance(server, RefStoreThread):
        env["BRAIN_API_KEY"] = env["REF_KEY"] = server.api_key
    return env


def config_for(kind: str, server: Any, namespace: str, tmp_path: Path) -> str:
    """One probe of ``kind`` on ``namespace``; its instance name is always ``twin``."""
    head = f"""[server]
instance = "twin"

[[probe]]
name = "{kind}"
fixture = "packaged:smoke"
k = [5, 10]
timeout_s = 300
interval_s = 900
"""
    if kind in VECTOR_KINDS:
        table = target_table(kind, server, namespace)
        embed = f'model = "hash:256"\ncache_dir = "{tmp_path / "cache"}"'
        return f"{head}\n[probe.target]\n{table}\n\n[probe.target.embed]\n{embed}\n{UNLIMITED}"
    if kind == "zengram":
        return f"""{head}
[probe.target]
kind = "zengram"
url = "{server.url}"
api_key_env = "REF_KEY"
namespace = "{namespace}"
{UNLIMITED}"""
    return http_config(server, namespace, head)


def http_config(server: Any, namespace: str, head: str, *, delete: bool = True) -> str:
    """configs/http-zengram.toml's target, on ``server`` and ``namespace`` (``delete``:
    with its delete template)."""
    text = HTTP_EXAMPLE.read_text()
    target = text[text.index("[probe.target]") :]
    target = target.replace('url = "http://127.0.0.1:8084"', f'url = "{server.url}"')
    target = target.replace('namespace = "benchd-eval"', f'namespace = "{namespace}"')
    target = target[: target.index("[probe.budget]")] + UNLIMITED
    if not delete:
        start = target.index("[probe.target.delete]")
        end = target.index("[probe.target.health]")
        target = target[:start] + target[end:]
        target = target.replace('cleanup = "before"', 'cleanup = "never"')
    return head + "\n" + target


class Contained(BenchdProcess):
    """``benchd run`` behind a command prefix: ``unshare`` (its own pid namespace) or
    ``faketime`` (its own wall clock)."""

    def __init__(self, prefix: Sequence[str], args: Sequence[str], env: dict[str, str]) -> None:
        super().__init__(args, env)
        self.prefix = list(prefix)
        self.command = [sys.executable, "-m", "benchd"]
        if self.prefix[:1] == ["shifted"]:  # benchd's own wall clock shifted, in Python
            self.command = [sys.executable, "-c", SHIFTED.format(s=float(self.prefix[1]))]
            self.prefix = []

    def __enter__(self) -> Contained:
        self.proc = subprocess.Popen(
            [*self.prefix, *self.command, *self.args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        started = self.wait_for(lambda e: e.get("event") == "started", timeout=120)
        self.url = str(started["url"])
        return self

    def cycle(self, probe: str) -> dict[str, Any]:
        """Trigger a cycle of ``probe`` now and wait for it; its ``cycle`` event."""
        done = len(self.cycles(probe))
        if done:  # the first one runs at start
            assert self.post(f"/api/probes/{probe}/run").status_code in (200, 202)
        return self.wait_cycles(probe, done + 1, timeout=600)[done]


def clock(kind: str, hours: int) -> tuple[str, ...]:
    """A daemon's wall clock ``hours`` off: Debian's libfaketime under the daemon itself (not
    the ``faketime`` wrapper, whose kill would leave the daemon running), its monotonic clock
    left alone. Under libfaketime pymilvus's gRPC client fails every call (``[Errno 22]
    Invalid argument``), and a shifted ``time.time`` fails its connection, so the milvus
    daemon has the wall clock its lease reads (``benchd.store.lease.time``) shifted."""
    if kind == "milvus":
        return ("shifted", str(hours * 3600))
    if not LIBFAKETIME.exists():
        missing("libfaketime is not installed (apt-get install faketime)")
    return ("env", f"LD_PRELOAD={LIBFAKETIME}", f"FAKETIME={hours:+d}h",
            "FAKETIME_DONT_FAKE_MONOTONIC=1")  # fmt: skip


def pid_namespace() -> tuple[str, ...]:
    probe = subprocess.run([*UNSHARE, "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        missing(f"unshare --pid needs root: {probe.stderr.decode().strip()}")
    return UNSHARE


def refused(event: dict[str, Any]) -> bool:
    return event["outcome"] == "failed" and event.get("error_kind") == "ownership"


def one_writes(
    kind: str,
    server: Any,
    tmp_path: Path,
    holder_prefix: Sequence[str],
    other_prefix: Sequence[str],
) -> None:
    """The holder's cycles succeed; the other's, same instance name, are refused, twice."""
    config = tmp_path / "benchd.toml"
    config.write_text(config_for(kind, server, f"conf-{kind}-{secrets.token_hex(3)}", tmp_path))
    args = ["--config", str(config)]
    with Contained(holder_prefix, args, env_for(server, tmp_path / "state-a")) as holder:
        first = holder.cycle(kind)
        assert first["outcome"] == "success", first.get("error")
        with Contained(other_prefix, args, env_for(server, tmp_path / "state-b")) as other:
            for _ in range(2):
                theirs = other.cycle(kind)
                assert refused(theirs), theirs
                assert "leased by benchd instance 'twin'" in theirs["error"]
                mine = holder.cycle(kind)
                assert mine["outcome"] == "success", mine


def test_two_daemons_of_one_name_in_separate_pid_namespaces_one_writes(
    kind: str, server: Any, tmp_path: Path
) -> None:
    if kind == "qdrant":
        pytest.skip("qdrant local mode file-locks its path: two daemons cannot share it")
    unshare = pid_namespace()
    one_writes(kind, server, tmp_path, unshare, unshare)


@pytest.mark.parametrize(
    ("holder_hours", "other_hours"),
    [(0, 1), (-1, 0)],
    ids=["other-an-hour-ahead", "holder-an-hour-behind"],
)
def test_a_clock_an_hour_off_steals_no_live_lease(
    kind: str, server: Any, tmp_path: Path, holder_hours: int, other_hours: int
) -> None:
    if kind == "qdrant":
        pytest.skip("qdrant local mode file-locks its path: two daemons cannot share it")
    one_writes(kind, server, tmp_path, clock(kind, holder_hours), clock(kind, other_hours))


def test_a_restarted_daemon_takes_its_own_lease_at_once_and_its_twin_does_not(
    kind: str, server: Any, tmp_path: Path
) -> None:
    """Killed (no hand-back: its lease stays live), restarted in a new pid namespace with
    its state directory: its first cycle writes. A twin with another state directory is
    refused (after the restart stops, so that qdrant's local mode allows it)."""
    config = tmp_path / "benchd.toml"
    config.write_text(config_for(kind, server, f"conf-{kind}-{secrets.token_hex(3)}", tmp_path))
    args = ["--config", str(config)]
    state = tmp_path / "state"
    unshare = pid_namespace()
    with Contained(unshare, args, env_for(server, state)) as first:
        assert first.cycle(kind)["outcome"] == "success"
        assert first.proc is not None
        first.proc.kill()
        first.proc.wait(timeout=30)
    with Contained(unshare, args, env_for(server, state)) as restarted:
        again = restarted.cycle(kind)
        assert again["outcome"] == "success", again
        assert restarted.proc is not None
        restarted.proc.kill()  # its lease stays live
        restarted.proc.wait(timeout=30)
    with Contained(unshare, args, env_for(server, tmp_path / "twin-state")) as twin:
        assert refused(twin.cycle(kind))


def export(store: RefStoreThread, namespace: str) -> str:
    reply = httpx.get(
        f"{store.url}/export",
        params={"client_id": namespace, "limit": 1000},
        headers={"x-api-key": store.api_key},
        timeout=30,
    )
    reply.raise_for_status()
    return json.dumps(sorted(reply.json()["memories"], key=lambda m: m["id"]), sort_keys=True)


HEAD = """[[probe]]
name = "http"
fixture = "packaged:smoke"
k = [5, 10]
timeout_s = 300
interval_s = 3600
"""


@pytest.mark.parametrize("templates", ["with-delete", "without-delete"])
def test_http_once_beside_a_running_daemon_deletes_none_of_its_records(
    refstore: RefStoreThread, tmp_path: Path, templates: str
) -> None:
    """``benchd once`` with configs/http-zengram.toml (cleanup = "before") beside a daemon
    on the same namespace measures read-only: the daemon's records byte-identical. Where
    the templates keep no lease (no delete template), validate says so and ``once`` still
    holds back beside benchd's sentinel."""
    ns = f"conf-http-{templates}"
    delete = templates == "with-delete"
    daemon = tmp_path / "daemon.toml"
    daemon.write_text('[server]\ninstance = "pod-0"\n' + http_config(refstore, ns, HEAD,
                                                                     delete=delete))  # fmt: skip
    once = tmp_path / "once.toml"
    once.write_text('[server]\ninstance = "ci"\n' + http_config(refstore, ns, HEAD, delete=delete))
    env = env_for(refstore, tmp_path / "state")
    with Contained((), ["--config", str(daemon)], env) as running:
        assert running.cycle("http")["outcome"] == "success"
        before = export(refstore, ns)
        if delete:
            assert lease_prefix(ns) in before  # the daemon's lease record
        proc = subprocess.run(
            [sys.executable, "-m", "benchd", "once", "-c", str(once), "--format", "json"],
            capture_output=True, text=True, env=env, timeout=600, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "measured its corpus read-only (wrote and deleted nothing)" in proc.stderr
        (probe,) = json.loads(proc.stdout)["probes"]
        assert probe["outcome"] == "success" and probe["seed"]["imported"] == 0
        assert export(refstore, ns) == before
        assert running.cycle("http")["outcome"] == "success"  # the daemon writes on
    checked = subprocess.run(
        [sys.executable, "-m", "benchd", "validate", "-c", str(once)],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    lacks = "no lease: a second writer on the same namespace is not detected"
    assert (lacks in checked.stdout + checked.stderr) is not delete
