"""Config loading: strict keys, types, interpolation, secrets, paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchd.config.load import load_config, parse_listen
from benchd.errors import ConfigError

GOOD = """
[server]
listen = "127.0.0.1:9999"

[[probe]]
name = "staging-memory"
fixture = "fixtures/smoke.json"
k = [10, 5]
interval_s = 60
timeout_s = 30.0

[probe.target]
kind = "zengram"
url = "${STORE_URL}"
api_key_env = "BENCHD_TEST_KEY"
namespace = "benchd-eval"
cleanup = "after"

[probe.load]
mode = "open"
concurrency = 4
rate = 20.0
duration_s = 2.0
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "benchd.toml"
    path.write_text(text)
    return path


@pytest.fixture(autouse=True)
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCHD_TEST_KEY", "s3cret-key-value")
    monkeypatch.setenv("STORE_URL", "http://127.0.0.1:8084")


def test_good_config_decodes_every_section(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, GOOD))
    (probe,) = config.probes
    assert config.server.listen == "127.0.0.1:9999"
    assert probe.k == (5, 10)
    assert probe.interval_s == 60.0
    assert probe.fixture == tmp_path / "fixtures" / "smoke.json"
    assert probe.target.settings.url == "http://127.0.0.1:8084"
    assert probe.target.settings.cleanup == "after"
    assert probe.target.secret is not None
    assert probe.target.secret.reveal() == "s3cret-key-value"
    assert "s3cret" not in repr(probe)
    assert probe.load.mode == "open"
    assert probe.load.rate == 20.0


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ('cleanup = "after"', 'cleanup = "after"\nbogus = 1', "probe[0].target.bogus: unknown key"),
        ('mode = "open"', 'mode = "fast"', "probe[0].load.mode: expected one of"),
        ("k = [10, 5]", "k = [0]", "probe[0].k: must be"),
        ("interval_s = 60", 'interval_s = "60"', "probe[0].interval_s: expected number"),
        ('kind = "zengram"', 'kind = "nope"', "probe[0].target.kind: unknown kind 'nope'"),
        ('namespace = "benchd-eval"', 'namespace = "global"', "probe[0].target.namespace"),
        # found by the validate-then-once property test: a control character went
        # into every id benchd writes and ended `once` with an internal error
        ('namespace = "benchd-eval"', 'namespace = "\\u001f"', "probe[0].target.namespace"),
        ('namespace = "benchd-eval"', 'namespace = "a b"', "probe[0].target.namespace: must be"),
        ('url = "${STORE_URL}"', 'url = "${NOT_SET_ANYWHERE}"', "NOT_SET_ANYWHERE"),
        ('listen = "127.0.0.1:9999"', 'listen = "nope"', "server.listen"),
    ],
)
def test_bad_values_name_file_and_key_path(
    tmp_path: Path, old: str, new: str, expected: str
) -> None:
    path = write(tmp_path, GOOD.replace(old, new))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    message = str(err.value)
    assert message.startswith(str(path))
    assert expected in message
    assert "\n" not in message


def test_missing_key_env_is_an_error_naming_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BENCHD_TEST_KEY")
    with pytest.raises(ConfigError, match="BENCHD_TEST_KEY is not set"):
        load_config(write(tmp_path, GOOD))


def test_api_key_file_is_read_and_never_shown(tmp_path: Path) -> None:
    keyfile = tmp_path / "key"
    keyfile.write_text("file-key-123\n")
    text = GOOD.replace('api_key_env = "BENCHD_TEST_KEY"', f'api_key_file = "{keyfile}"')
    probe = load_config(write(tmp_path, text)).probes[0]
    assert probe.target.secret is not None
    assert probe.target.secret.reveal() == "file-key-123"
    assert "file-key-123" not in str(probe.target.secret)


def test_duplicate_probe_names_are_rejected(tmp_path: Path) -> None:
    second = GOOD[GOOD.index("[[probe]]") :]
    with pytest.raises(ConfigError, match="used twice"):
        load_config(write(tmp_path, GOOD + second))


def test_invalid_toml_and_missing_file_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(write(tmp_path, "[server\n"))
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(tmp_path / "absent.toml")


def test_dollar_dollar_is_a_literal_dollar(tmp_path: Path) -> None:
    text = GOOD.replace('namespace = "benchd-eval"', 'namespace = "benchd$$eval"')
    assert load_config(write(tmp_path, text)).probes[0].target.settings.namespace == "benchd$eval"


def test_parse_listen_accepts_ipv6_and_rejects_garbage() -> None:
    assert parse_listen("[::1]:9108") == ("::1", 9108)
    assert parse_listen("0.0.0.0:80") == ("0.0.0.0", 80)
    with pytest.raises(ConfigError):
        parse_listen("localhost")


def test_web_config_path_is_relative_to_the_config_file(tmp_path: Path) -> None:
    text = GOOD.replace(
        'listen = "127.0.0.1:9999"', 'listen = "127.0.0.1:9999"\nweb_config = "web.toml"'
    )
    (tmp_path / "web.toml").write_text(f'bearer_token_hashes = ["sha256:{"0" * 64}"]\n')
    config = load_config(write(tmp_path, text))
    assert config.server.web_config == str(tmp_path / "web.toml")
    assert config.web is not None and config.web.auth is not None  # decoded with the config
    (tmp_path / "web.toml").unlink()
    with pytest.raises(ConfigError, match=r"web\.toml: cannot read web config"):
        load_config(write(tmp_path, text))


CONFIGS = Path(__file__).resolve().parents[2] / "configs"
RETRY_KINDS = {
    "zengram": None,
    "http": CONFIGS / "http-zengram.toml",
    "chroma": CONFIGS / "chroma.toml",
    "mcp": CONFIGS / "mcp-server-memory.toml",
}


@pytest.mark.parametrize("kind", sorted(RETRY_KINDS))
@pytest.mark.parametrize("key", ["max_retries", "backoff_s", "max_retry_after_s"])
def test_retry_counts_and_waits_below_zero_are_refused_and_zero_is_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, key: str
) -> None:
    """Every kind with benchd's retrying client: -1 passed validate and then ended once with an
    internal error (a negative backoff is an invalid sleep; zengram's import loop made no
    attempt); 0 is valid (no retries, no wait)."""
    monkeypatch.setenv("BRAIN_API_KEY", "k" * 20)
    shipped = RETRY_KINDS[kind]
    text = GOOD if shipped is None else shipped.read_text()
    line = f'kind = "{kind}"'
    assert text.count(line) == 1
    for value, ok in (("-1", False), ("0", True)):
        path = write(tmp_path, text.replace(line, f"{line}\n{key} = {value}"))
        if ok:
            (probe,) = load_config(path).probes
            assert getattr(probe.target.settings, key) == 0
            continue
        with pytest.raises(ConfigError) as err:
            load_config(path)
        assert f"probe[0].target.{key}: must be >= 0" in str(err.value)


CONCURRENCY_KEYS = [
    ("zengram", None, ("seed_concurrency",)),
    ("chroma", "chroma.toml", ("concurrency",)),
    ("chroma", "chroma.toml", ("delete_concurrency",)),
    ("pgvector", "pgvector.toml", ("concurrency",)),
    ("pgvector", "pgvector.toml", ("pool_size",)),
    ("milvus", "milvus.toml", ("concurrency",)),
    ("qdrant", "qdrant.toml", ("concurrency",)),
    ("python", "python-bm25-vs-tags.toml", ("concurrency",)),
    ("http", "http-mem0-style.toml", ("seed", "concurrency")),
    ("http", "http-mem0-style.toml", ("delete", "concurrency")),
    ("mcp", "mcp-mem0-style.toml", ("tools", "write", "concurrency")),
    ("mcp", "mcp-mem0-style.toml", ("tools", "delete", "concurrency")),
]


@pytest.mark.parametrize(("kind", "shipped", "key"), CONCURRENCY_KEYS)
def test_calls_in_flight_to_a_store_are_bounded_on_every_kind(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
    shipped: str | None,
    key: tuple[str, ...],
) -> None:
    """A store's calls in flight (each a connection, a thread or a task) are 1..1024 on every
    kind: validate accepted any positive number (2**53 on zengram's seed_concurrency), which
    `run` then tried to open; the load pass's own concurrency has its bound in LoadProfile."""
    import tomllib

    import tomli_w

    for name in ("BRAIN_API_KEY", "MEM0_API_KEY", "MEMORY_MCP_KEY", "BENCHD_PG_DSN"):
        monkeypatch.setenv(name, "k" * 20)
    text = GOOD if shipped is None else (CONFIGS / shipped).read_text()
    doc = tomllib.loads(text)
    (probe,) = [p for p in doc["probe"] if p["target"]["kind"] == kind][:1]
    table = probe["target"]
    for part in key[:-1]:
        table = table[part]
    dotted = ".".join(key)
    for value, ok in ((1024, True), (1, True), (1025, False), (2**53, False), (0, False)):
        table[key[-1]] = value
        path = tmp_path / "benchd.toml"
        path.write_text(tomli_w.dumps(doc))
        if ok:
            loaded = load_config(path)
            settings = next(p for p in loaded.probes if p.name == probe["name"]).target.settings
            for part in key:
                settings = getattr(settings, part)
            assert settings == value
            continue
        with pytest.raises(ConfigError) as err:
            load_config(path)
        assert f"target.{dotted}: must be 1..1024 (calls in flight to the store)" in str(err.value)
