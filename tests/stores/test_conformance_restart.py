"""Conformance: a store killed and started again mid-run is measured again at once.

Each writing kind's real server (its own, started by this module, not the
session's) runs under ``benchd run``; cycles are asked for on the daemon's
API (``POST /api/probes/<name>/run``) and waited for in its JSON log, so
which cycle ran while the server was down is decided by the test, not by
timing. After a successful cycle the server is killed (SIGKILL), and either
a cycle runs while it is down or none does; then it is started again on the
same port, with its data or empty (a database recreated by its operator).
Then:

- the first cycle after the server is back succeeds, and so does the next:
  a restart costs at most the cycles that ran while it was down (one, or none);
- a server back with its data is not written to again (the corpus is found
  unchanged); one back empty is seeded afresh;
- benchd's namespace holds the corpus and the sentinel once each (no
  duplicates), read with the store's own client;
- the kind forgot its stale handles once (one ``store handles reset`` event),
  and benchd's stderr holds nothing but its JSON log: the store libraries' own
  warnings and tracebacks (psycopg's, pymilvus's, gRPC's) are log events.

Not applicable: **qdrant** and **lancedb**. The qdrant kind runs qdrant-client's
local mode and LanceDB is a library over files, each an embedded store in benchd's
own process: there is no server to kill and start again apart from benchd (no Qdrant
server runs here, docs/targets.md). What stands in for a restart there, lancedb's
table dropped under benchd by another process, is in tests/stores/test_vector_stores.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kinds import benchd_rows, env_for, require_client, target_table
from store_servers import run_chroma, run_milvus, run_postgres
from support import BenchdProcess

pytestmark = pytest.mark.timeout(900)

CORPUS = 36  # records of the packaged smoke fixture
NOT_APPLICABLE = {
    "qdrant": "qdrant's local mode is embedded in benchd's process: no server to restart",
    "lancedb": "LanceDB is embedded in benchd's process: no server to restart",
}
CYCLE_TIMEOUT_S = 240.0  # for one cycle to finish (a busy 2-core box)
SERVERS = {"pgvector": "pg_server", "chroma": "chroma_server", "milvus": "milvus_server"}


@pytest.fixture(scope="module")
def pg_server() -> Iterator[Any]:
    with run_postgres() as server:
        yield server


@pytest.fixture(scope="module")
def chroma_server() -> Iterator[Any]:
    with run_chroma() as server:
        yield server


@pytest.fixture(scope="module")
def milvus_server() -> Iterator[Any]:
    with run_milvus() as server:
        yield server


def _kind_param(kind: str) -> Any:
    reason = NOT_APPLICABLE.get(kind)
    return pytest.param(kind, marks=pytest.mark.skip(reason=reason)) if reason else kind


KINDS = ("pgvector", "chroma", "milvus", "qdrant", "lancedb")


@pytest.fixture(params=[_kind_param(k) for k in KINDS])
def kind(request: pytest.FixtureRequest) -> str:
    return require_client(str(request.param))


@pytest.fixture
def server(kind: str, request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue(SERVERS[kind])


def run_config(kind: str, server: Any, namespace: str, cache_dir: Path) -> str:
    """Cycles on demand only (the first at start); a closed-loop pass fills the kind's pool."""
    return f"""
[[probe]]
name = "{kind}"
fixture = "packaged:smoke"
k = [10]
timeout_s = 120
interval_s = 3600

[probe.load]
mode = "closed"
concurrency = 8
duration_s = 0.5

[probe.target]
{target_table(kind, server, namespace, timeout_s=5.0)}

[probe.target.embed]
model = "hash:256"
cache_dir = "{cache_dir}"
"""


def where_of(kind: str, namespace: str) -> str:
    """The table or collection benchd's namespace lives in (as target_table names it)."""
    if kind == "pgvector":
        return f"t_{namespace.replace('-', '_')}"
    if kind == "chroma":
        return f"benchd-{namespace}"
    return "benchd_" + namespace.replace("-", "_")


def cycle(daemon: BenchdProcess, kind: str, number: int | None = None) -> dict[str, Any]:
    """Cycle ``number`` once it has finished; None: ask for one now (and wait for it)."""
    if number is None:
        asked = daemon.post(f"/api/probes/{kind}/run")
        assert asked.status_code == 202, asked.text
        number = int(asked.json()["cycle"])
    return daemon.wait_for(
        lambda e: e.get("event") == "cycle" and e.get("probe") == kind and e["cycle"] == number,
        timeout=CYCLE_TIMEOUT_S,
    )


def not_json(lines: list[str]) -> list[str]:
    """stderr lines that are not a JSON log event."""
    out = []
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            event = None
        if not isinstance(event, dict):
            out.append(line)
    return out


@pytest.mark.parametrize("down_cycles", [0, 1], ids=["between-cycles", "cycle-while-down"])
@pytest.mark.parametrize("empty", [False, True], ids=["with-data", "empty"])
def test_a_restarted_store_is_measured_again_by_the_first_cycle_after_it_is_back(
    kind: str, server: Any, empty: bool, down_cycles: int, tmp_path: Path
) -> None:
    ns = f"restart-{'empty' if empty else 'kept'}-{down_cycles}"
    config = tmp_path / "run.toml"
    config.write_text(run_config(kind, server, ns, tmp_path / "cache"))
    with BenchdProcess(["--config", str(config)], env=env_for(server)) as daemon:
        first = cycle(daemon, kind, 1)
        assert first["outcome"] == "success", first.get("error")

        server.restarts.kill()
        down = [cycle(daemon, kind) for _ in range(down_cycles)]
        assert [c["outcome"] for c in down] == ["failed"] * down_cycles, down
        server.restarts.start(empty=empty)

        back = cycle(daemon, kind)
        assert back["outcome"] == "success", back.get("error")
        assert back["seed_imported"] == (CORPUS if empty else 0), back
        assert back["seed_unchanged"] == (0 if empty else CORPUS), back
        then = cycle(daemon, kind)
        assert then["outcome"] == "success", then.get("error")
        assert then["seed_imported"] == 0 and then["seed_unchanged"] == CORPUS, then
        assert daemon.stop(timeout=120) == 0
    resets = [e for e in daemon.events if e.get("event") == "store handles reset"]
    # one line an outage; Chroma back with its data has nothing stale (its id survives)
    assert len(resets) == (0 if kind == "chroma" and not empty else 1), resets
    assert benchd_rows(kind, server, ns, where_of(kind, ns)) == CORPUS + 1  # and the sentinel
    assert not_json(daemon.lines) == [], "".join(not_json(daemon.lines)[:20])
