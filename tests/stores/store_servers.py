"""Real vector stores on loopback for the store kinds' tests: pgvector, Chroma, Milvus Lite.

``scripts/test.sh`` installs the servers into their own virtualenv
(``.venv-stores``; ``$BENCHD_STORES_VENV`` overrides it) so their many
dependencies never touch benchd's: PostgreSQL 16 + pgvector from PyPI
``pgserver`` (its binaries, run here directly on a TCP port), ``chroma run``
from ``chromadb`` and ``milvus-lite server`` from ``milvus-lite``. Each runner
starts one server on a free loopback port, waits for it with a deadline (a
log line or an answering endpoint, never a fixed sleep), yields where it is
and stops it (SIGINT/SIGTERM, then SIGKILL) on exit. Each server's ``restarts``
(a :class:`Restarts`) kills it and starts it again on the same port, with its
data or empty, for the restart tests.

Without the servers (or the client extras) the tests are skipped, unless
``BENCHD_REQUIRE_STORES=1`` (set by ``scripts/test.sh``) makes that a failure.
"""

from __future__ import annotations

import atexit
import functools
import os
import pwd
import queue
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import httpx
import pytest

__all__ = [
    "Chroma",
    "LancedbLocal",
    "Milvus",
    "Postgres",
    "QdrantLocal",
    "Restarts",
    "missing",
    "run_chroma",
    "run_lancedb",
    "run_milvus",
    "run_postgres",
    "run_qdrant",
    "split_by_store",
    "store_of",
    "stores_venv",
]

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
START_TIMEOUT_S = 120.0  # a cold start on a busy 2-core box; the usual is 5-8 s
_STOP_TIMEOUT_S = 15.0
PG_SYSTEM_USER = "pgserver"  # PostgreSQL refuses to run as root; scripts/test.sh creates it


def stores_venv() -> Path:
    return Path(os.environ.get("BENCHD_STORES_VENV") or REPO / ".venv-stores")


def missing(what: str) -> NoReturn:
    """Skip (or fail, when the CI entry requires the stores) for want of ``what``."""
    message = f"{what}; run scripts/test.sh (it installs the stores into .venv-stores)"
    if os.environ.get("BENCHD_REQUIRE_STORES") == "1":
        pytest.fail(message)
    pytest.skip(message)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class _Output:
    """A process's output lines, pumped on a thread so a full pipe never blocks it."""

    proc: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    _queue: queue.Queue[str] = field(default_factory=queue.Queue)

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            self._queue.put(line)

    def wait_line(self, needle: str, deadline: float) -> None:
        while (left := deadline - time.monotonic()) > 0:
            if self.proc.poll() is not None and self._queue.empty():
                raise AssertionError(f"server exited {self.proc.returncode}:\n{self.tail()}")
            try:
                if needle in self._queue.get(timeout=min(left, 0.5)):
                    return
            except queue.Empty:
                continue
        raise AssertionError(f"no {needle!r} before the deadline:\n{self.tail()}")

    def tail(self, n: int = 30) -> str:
        return "".join(self.lines[-n:])

    def close(self) -> None:
        self._thread.join(timeout=_STOP_TIMEOUT_S)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def _spawn(args: list[str], *, user: str | None = None) -> tuple[subprocess.Popen[str], _Output]:
    proc = subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        user=user,
        start_new_session=True,
        env={**os.environ, "NO_COLOR": "1", "RUST_LOG_STYLE": "never"},
    )
    return proc, _Output(proc)


def _stop(proc: subprocess.Popen[str], output: _Output, sig: int = signal.SIGTERM) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=_STOP_TIMEOUT_S)
    output.close()


class Restarts:
    """A running server, killed and started again on the same port (with its data or empty).

    ``launch(empty)`` starts the server (after wiping its data when ``empty``) and
    returns once it answers; :meth:`close` stops whatever runs at the end.
    """

    def __init__(
        self, launch: Callable[[bool], tuple[subprocess.Popen[str], _Output]], stop_signal: int
    ) -> None:
        self._launch = launch
        self._signal = stop_signal
        self._running: tuple[subprocess.Popen[str], _Output] | None = launch(False)
        self.restarts = 0

    @property
    def running(self) -> bool:
        return self._running is not None and self._running[0].poll() is None

    def kill(self) -> None:
        """SIGKILL, as a crash or an OOM kill ends it: no shutdown of its own."""
        if self._running is not None:
            _stop(*self._running, signal.SIGKILL)
            self._running = None

    def start(self, *, empty: bool) -> None:
        """Start it again (after :meth:`kill`) on the same port; ``empty``: its data wiped."""
        assert self._running is None, "kill() it first"
        self._running = self._launch(empty)
        self.restarts += 1

    def close(self) -> None:
        if self._running is not None:
            _stop(*self._running, self._signal)
            self._running = None


def _wipe(path: Path) -> None:
    """Empty ``path`` (kept) for a server started afresh."""
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)


# -- PostgreSQL + pgvector -------------------------------------------------------------


@dataclass(frozen=True)
class Postgres:
    """A running PostgreSQL with pgvector: benchd's role and an admin's, by DSN."""

    host: str
    port: int
    password: str  # of the "benchd" role (scram-sha-256 over TCP)
    dsn: str  # benchd's: postgresql://benchd:PASSWORD@127.0.0.1:PORT/benchd
    admin_dsn: str  # the superuser's (trust over the Unix socket in the data dir)
    restarts: Restarts = field(repr=False, compare=False)


def _pg_bin() -> Path:
    """PostgreSQL's bin directory, where the user it runs as (``_pg_user``) can reach it."""
    found = sorted(stores_venv().glob("lib/python3*/site-packages/pgserver/pginstall/bin"))
    if not found:
        missing(f"PostgreSQL from PyPI pgserver is not installed in {stores_venv()}")
    user = _pg_user()
    if user is None or _runs_as(found[0], user):
        return found[0]
    return _reachable_copy(found[0], user)


def _runs_as(bindir: Path, user: str) -> bool:
    """Whether ``user`` can run ``initdb`` there (every folder above it must let them in)."""
    try:
        subprocess.run(
            [str(bindir / "initdb"), "--version"],
            check=True, capture_output=True, user=user, timeout=START_TIMEOUT_S,
        )  # fmt: skip
    except (PermissionError, subprocess.CalledProcessError):
        return False
    return True


@functools.cache
def _reachable_copy(bindir: Path, user: str) -> Path:
    """``bindir``'s PostgreSQL install copied once into a temp folder anyone can traverse.

    A checkout in a folder other users cannot enter (mode 0700: root's home, ``mktemp -d``)
    keeps ``user`` from its own ``.venv-stores``. PostgreSQL finds its lib and share
    folders relative to its binaries, and they find the wheel's ``pgserver.libs`` (libpq)
    by a relative rpath, so the install (~35 MB) moves with that layout kept.
    """
    site = bindir.parents[2]  # site-packages: pgserver/pginstall/bin
    home = Path(tempfile.mkdtemp(prefix="benchd-pginstall-"))
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    home.chmod(0o755)
    shutil.copytree(bindir.parent, home / "pgserver" / "pginstall", symlinks=True)
    if (site / "pgserver.libs").is_dir():
        shutil.copytree(site / "pgserver.libs", home / "pgserver.libs", symlinks=True)
    copied = home / "pgserver" / "pginstall" / "bin"
    if not _runs_as(copied, user):
        missing(f"user {user!r} cannot run PostgreSQL from {bindir} nor from a copy in {home}")
    return copied


def _pg_user() -> str | None:
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(PG_SYSTEM_USER)
    except KeyError:
        missing(f"PostgreSQL cannot run as root and there is no user {PG_SYSTEM_USER!r}")
    return PG_SYSTEM_USER


def _psql(
    bindir: Path, root: Path, port: int, sql: str, user: str | None, db: str = "postgres"
) -> None:
    subprocess.run(
        [str(bindir / "psql"), "-h", str(root), "-p", str(port), "-U", "postgres", "-d",
         db, "-v", "ON_ERROR_STOP=1", "-q", "-c", sql],
        check=True, capture_output=True, text=True, user=user, timeout=60,
    )  # fmt: skip


def _pg_launcher(
    bindir: Path, root: Path, port: int, password: str, user: str | None
) -> Callable[[bool], tuple[subprocess.Popen[str], _Output]]:
    """Start PostgreSQL on ``root/data`` (a new cluster when ``empty`` or there is none yet)."""

    def launch(empty: bool) -> tuple[subprocess.Popen[str], _Output]:
        data = root / "data"
        fresh = empty or not data.exists()
        if fresh:
            shutil.rmtree(data, ignore_errors=True)
            subprocess.run(
                [str(bindir / "initdb"), "-D", str(data), "-U", "postgres",
                 "--auth-local=trust", "--auth-host=scram-sha-256", f"--pwfile={root / 'pw'}",
                 "--encoding=UTF8", "--no-sync"],
                check=True, capture_output=True, text=True, user=user, timeout=START_TIMEOUT_S,
            )  # fmt: skip
        proc, output = _spawn(
            [str(bindir / "postgres"), "-D", str(data), "-h", "127.0.0.1",
             "-p", str(port), "-k", str(root), "-c", "fsync=off", "-c", "max_connections=60"],
            user=user,
        )  # fmt: skip
        try:
            output.wait_line("ready to accept connections", time.monotonic() + START_TIMEOUT_S)
            if fresh:
                _psql(bindir, root, port, f"CREATE ROLE benchd LOGIN PASSWORD '{password}'", user)
                _psql(bindir, root, port, "CREATE DATABASE benchd OWNER benchd", user)
                _psql(bindir, root, port, "CREATE EXTENSION vector", user, "benchd")
        except BaseException:
            _stop(proc, output, signal.SIGINT)
            raise
        return proc, output

    return launch


@contextmanager
def run_postgres() -> Iterator[Postgres]:
    """PostgreSQL 16 + pgvector on 127.0.0.1: role and database ``benchd``, extension ``vector``.

    Started empty again (``restarts.start(empty=True)``), it is a new cluster with the
    same role, password, database and extension: a database recreated by its operator.
    """
    bindir, user = _pg_bin(), _pg_user()
    root = Path(tempfile.mkdtemp(prefix="benchd-pg-"))
    password = secrets.token_urlsafe(12)
    (root / "pw").write_text("postgres-" + password)
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(root, entry.pw_uid, entry.pw_gid)
        os.chown(root / "pw", entry.pw_uid, entry.pw_gid)
    try:
        port = _free_port()
        restarts = Restarts(_pg_launcher(bindir, root, port, password, user), signal.SIGINT)
        try:
            yield Postgres(
                host="127.0.0.1",
                port=port,
                password=password,
                dsn=f"postgresql://benchd:{password}@127.0.0.1:{port}/benchd",
                admin_dsn=f"host={root} port={port} user=postgres dbname=benchd",
                restarts=restarts,
            )
        finally:
            restarts.close()  # SIGINT: PostgreSQL's fast shutdown
    finally:
        shutil.rmtree(root, ignore_errors=True)


# -- Chroma -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Chroma:
    url: str  # http://127.0.0.1:PORT
    restarts: Restarts = field(repr=False, compare=False)


def _alive(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def _chroma_launcher(
    chroma: Path, root: Path, port: int
) -> Callable[[bool], tuple[subprocess.Popen[str], _Output]]:
    url = f"http://127.0.0.1:{port}"

    def launch(empty: bool) -> tuple[subprocess.Popen[str], _Output]:
        if empty:
            _wipe(root)
        proc, output = _spawn(
            [str(chroma), "run", "--host", "127.0.0.1", "--port", str(port), "--path", str(root)]
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        delay = 0.05
        while not _alive(f"{url}/api/v2/heartbeat"):
            if proc.poll() is not None or time.monotonic() > deadline:
                _stop(proc, output)
                raise AssertionError(f"chroma did not answer ({proc.returncode}):\n{output.tail()}")
            time.sleep(delay)  # polling interval of a deadline loop
            delay = min(delay * 2, 0.5)
        return proc, output

    return launch


@contextmanager
def run_chroma() -> Iterator[Chroma]:
    """``chroma run`` (Chroma's Rust server, v2 API) on 127.0.0.1 with a fresh data dir."""
    chroma = stores_venv() / "bin" / "chroma"
    if not chroma.exists():
        missing(f"chroma (PyPI chromadb) is not installed in {stores_venv()}")
    root = Path(tempfile.mkdtemp(prefix="benchd-chroma-"))
    port = _free_port()
    try:
        restarts = Restarts(_chroma_launcher(chroma, root, port), signal.SIGTERM)
        try:
            yield Chroma(f"http://127.0.0.1:{port}", restarts)
        finally:
            restarts.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


# -- Milvus Lite -------------------------------------------------------------------------


@dataclass(frozen=True)
class Milvus:
    uri: str  # http://127.0.0.1:PORT (gRPC)
    restarts: Restarts = field(repr=False, compare=False)


def _milvus_launcher(
    lite: Path, root: Path, port: int
) -> Callable[[bool], tuple[subprocess.Popen[str], _Output]]:
    def launch(empty: bool) -> tuple[subprocess.Popen[str], _Output]:
        if empty:
            shutil.rmtree(root / "data", ignore_errors=True)
        proc, output = _spawn(
            [str(lite), "server", "--host", "127.0.0.1", "--port", str(port),
             "--data-dir", str(root / "data")]
        )  # fmt: skip
        try:
            output.wait_line("listening on", time.monotonic() + START_TIMEOUT_S)
        except BaseException:
            _stop(proc, output)
            raise
        return proc, output

    return launch


@contextmanager
def run_milvus() -> Iterator[Milvus]:
    """``milvus-lite server`` (the Milvus Lite gRPC server) on 127.0.0.1 with a fresh data dir."""
    lite = stores_venv() / "bin" / "milvus-lite"
    if not lite.exists():
        missing(f"milvus-lite is not installed in {stores_venv()}")
    root = Path(tempfile.mkdtemp(prefix="benchd-milvus-"))
    port = _free_port()
    try:
        restarts = Restarts(_milvus_launcher(lite, root, port), signal.SIGTERM)
        try:
            yield Milvus(f"http://127.0.0.1:{port}", restarts)
        finally:
            restarts.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


@dataclass(frozen=True)
class QdrantLocal:
    """qdrant-client's local mode: a directory, opened by one client (one process) at a time.

    No Qdrant server runs here (the kind is experimental: docs/targets.md); benchd and the
    tests' other tenant take turns on the directory.
    """

    path: str


@contextmanager
def run_qdrant() -> Iterator[QdrantLocal]:
    try:
        import qdrant_client  # noqa: F401
    except ImportError:
        missing("qdrant-client (benchd[qdrant]) is not installed")
    with tempfile.TemporaryDirectory(prefix="benchd-qdrant-") as tmp:
        yield QdrantLocal(str(Path(tmp) / "store"))


@dataclass(frozen=True)
class LancedbLocal:
    """A LanceDB database: a directory that benchd and the tests' other tenant open at once.

    LanceDB is embedded (no server runs): every process opens the directory itself, and its
    commits are atomic, so a tenant writes beside a running benchd.
    """

    path: str


@contextmanager
def run_lancedb() -> Iterator[LancedbLocal]:
    try:
        import lancedb  # noqa: F401
    except ImportError:
        missing("lancedb (benchd[lancedb]) is not installed")
    with tempfile.TemporaryDirectory(prefix="benchd-lancedb-") as tmp:
        yield LancedbLocal(str(Path(tmp) / "db"))


# -- parts: the store matrices split between pytest processes (scripts/test.sh) ------------

# conftest's server fixture of each store, by the store's name (a test's ``kind`` parameter)
SERVER_FIXTURES = {
    "pgvector": "postgres",
    "chroma": "chroma",
    "milvus": "milvus",
    "qdrant": "qdrant",
    "lancedb": "lancedb",
}


def store_of(item: pytest.Item) -> str:
    """The store a test of tests/stores runs against ("" for none, or outside tests/stores).

    Its ``kind`` parameter, else the server fixture it asks for, else the first store its
    name mentions (``test_a_milvus_channel_...`` asks for its server by name at run time).
    """
    if HERE not in item.path.parents:
        return ""
    callspec = getattr(item, "callspec", None)
    kind = callspec.params.get("kind") if callspec is not None else None
    if isinstance(kind, str):
        return kind
    for store, fixture in SERVER_FIXTURES.items():
        if fixture in getattr(item, "fixturenames", ()):
            return store
    words = item.name.split("[")[0].split("_")
    return next((word for word in words if word in SERVER_FIXTURES), "")


def split_by_store(
    spec: str, items: list[pytest.Item]
) -> tuple[list[pytest.Item], list[pytest.Item]]:
    """``items`` kept and dropped by ``spec`` (``$BENCHD_TEST_STORES``): all kept when empty.

    ``only:pgvector`` keeps the tests of tests/stores that run against pgvector;
    ``except:pgvector,chroma`` keeps every other test (outside tests/stores too).
    """
    if not spec:
        return items, []
    mode, _, names = spec.partition(":")
    stores = {name.strip() for name in names.split(",") if name.strip()}
    if mode not in ("only", "except") or not stores:
        raise pytest.UsageError(
            f"BENCHD_TEST_STORES={spec!r}: expected only:STORE[,STORE] or except:STORE[,STORE]"
        )
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        (keep if (store_of(item) in stores) == (mode == "only") else drop).append(item)
    return keep, drop
