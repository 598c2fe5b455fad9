"""A store's errors, as a cycle records them: its own words, the key's source, the kind's API.

Through the whole path a user meets (a config file, ``ProbeRunner``, the
cycle's error message), against the reference store on loopback.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from benchd.config.load import load_config
from benchd.probe import ProbeRunner
from benchd.refstore.server import RunningRefStore
from benchd.refstore.testing import running_refstore_fixture
from benchd.result import CycleResult

pytestmark = pytest.mark.anyio
KEY = "store-errors-key-0042"
REPO = Path(__file__).resolve().parents[2]
BOUND_S = 120  # a bound against a hung test, never a timing assertion


store = running_refstore_fixture(api_key=KEY, retriever="bm25")


def write_config(tmp_path: Path, url: str, key_line: str) -> Path:
    path = tmp_path / "benchd.toml"
    path.write_text(
        "[[probe]]\n"
        'name = "errors"\n'
        'fixture = "packaged:smoke"\n'
        "[probe.target]\n"
        'kind = "zengram"\n'
        f'url = "{url}"\n'
        'namespace = "benchd-store-errors"\n'
        "max_retries = 0\n"
        f"{key_line}\n"
    )
    return path


async def one_cycle(config_path: Path) -> CycleResult:
    (probe,) = load_config(config_path).probes
    runner = ProbeRunner(probe)
    try:
        with anyio.fail_after(BOUND_S):
            return await runner.run_once()
    finally:
        await runner.aclose()


async def test_a_refused_key_names_the_variable_it_came_from(
    tmp_path: Path, store: RunningRefStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BRAIN_API_KEY", "not-the-key-0042")
    result = await one_cycle(write_config(tmp_path, store.url, 'api_key_env = "BRAIN_API_KEY"'))
    assert (result.outcome, result.error_kind) == ("failed", "auth")
    assert result.error_message is not None
    assert "HTTP 401: " in result.error_message
    assert result.error_message.endswith(
        "the store refused the API key from api_key_env BRAIN_API_KEY"
    )
    assert "not-the-key" not in result.error_message


async def test_a_refused_key_from_a_file_names_the_path_as_written_never_expanded(
    tmp_path: Path, store: RunningRefStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = tmp_path / "private-keys-dir"
    keys.mkdir()
    (keys / "brain.key").write_text("not-the-key-0042\n")
    monkeypatch.setenv("BRAIN_KEYS", str(keys))
    config = write_config(tmp_path, store.url, 'api_key_file = "${BRAIN_KEYS}/brain.key"')
    result = await one_cycle(config)
    assert result.error_kind == "auth" and result.error_message is not None
    assert result.error_message.endswith("from api_key_file ${BRAIN_KEYS}/brain.key")
    assert "private-keys-dir" not in result.error_message


async def test_a_url_that_serves_another_api_asks_whether_it_is_zengram(
    tmp_path: Path, store: RunningRefStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BRAIN_API_KEY", KEY)
    url = f"{store.url}/v2"  # the store answers, but nothing of Zengram's lives here
    result = await one_cycle(write_config(tmp_path, url, 'api_key_env = "BRAIN_API_KEY"'))
    assert result.outcome == "failed" and result.error_message is not None
    assert result.error_message == (
        f"info: GET {url}/health: HTTP 404: Not Found; is this a Zengram API? "
        "GET /v2/health answered 404"
    )


async def test_an_http_probe_whose_templates_miss_asks_whether_they_describe_the_store(
    tmp_path: Path, store: RunningRefStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BRAIN_API_KEY", KEY)
    shipped = (REPO / "configs" / "http-zengram.toml").read_text()
    config = tmp_path / "http.toml"
    config.write_text(  # the store answers, but at another path than the templates say
        shipped.replace('url = "http://127.0.0.1:8084"', f'url = "{store.url}/v2"')
    )
    result = await one_cycle(config)
    assert result.outcome == "failed" and result.error_message is not None
    assert result.error_message.endswith(
        "HTTP 404: Not Found; is this the API this probe's templates describe? "
        "GET /v2/health answered 404"
    )
