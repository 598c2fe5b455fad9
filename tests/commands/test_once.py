"""``benchd once``: table, JSON schema, thresholds and exit codes, as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from benchd.refstore.server import RefStoreThread
from benchd.refstore.testing import refstore_fixture

KEY = "once-test-key-123456"


def benchd(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchd", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **(env or {})},
    )


store = refstore_fixture("store", scope="module", api_key=KEY, retriever="bm25")


def config_file(tmp_path: Path, url: str, namespace: str = "benchd-once") -> Path:
    path = tmp_path / "benchd.toml"
    path.write_text(f"""
[[probe]]
name = "smoke"
fixture = "packaged:smoke"
k = [5, 10]

[probe.target]
kind = "zengram"
url = "{url}"
api_key_env = "ONCE_KEY"
namespace = "{namespace}"
""")
    return path


def test_json_output_has_the_documented_schema(store: RefStoreThread, tmp_path: Path) -> None:
    proc = benchd(
        "once",
        "--config",
        str(config_file(tmp_path, store.url)),
        "--format",
        "json",
        env={"ONCE_KEY": KEY},
    )
    assert proc.returncode == 0, proc.stderr
    (probe,) = json.loads(proc.stdout)["probes"]
    assert probe["name"] == "smoke" and probe["outcome"] == "success"
    assert set(probe["seed"]) >= {"imported", "skipped", "errors"}
    for k in (5, 10):
        for m in ("hit", "recall", "recall_all", "precision", "mrr", "ndcg", "map"):
            assert 0.0 <= probe["aggregate"][f"{m}@{k}"] <= 1.0
    query = probe["queries"][0]
    assert set(query) >= {"id", "q", "category", "expected_ids", "ranked_ids", "metrics"}
    assert set(probe["latency"]["service"]) >= {"p50", "p90", "p95", "p99", "max", "count"}
    assert KEY not in proc.stdout + proc.stderr


def test_table_output_looks_like_the_eval_script(store: RefStoreThread, tmp_path: Path) -> None:
    proc = benchd("once", "--config", str(config_file(tmp_path, store.url)), env={"ONCE_KEY": KEY})
    assert proc.returncode == 0, proc.stderr
    assert "hit@5" in proc.stdout and "rr@10" in proc.stdout
    assert "AGGREGATE" in proc.stdout
    assert "ndcg" in proc.stdout and "seed:" in proc.stdout


def test_fail_under_breach_exits_1(store: RefStoreThread, tmp_path: Path) -> None:
    proc = benchd(
        "once",
        "--config",
        str(config_file(tmp_path, store.url)),
        "--threshold",
        "p99<1e-9",
        "--format",
        "json",
        env={"ONCE_KEY": KEY},
    )
    assert proc.returncode == 1
    assert "threshold breached: probe smoke: serial:p99<1e-09: p99 = " in proc.stderr


def test_bad_fail_under_spec_exits_2_in_one_line(tmp_path: Path) -> None:
    proc = benchd("once", "--fail-under", "recall=high")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "METRIC@K=VALUE" in proc.stderr


def test_unreachable_target_exits_3_naming_the_url(tmp_path: Path) -> None:
    proc = benchd(
        "once", "--config", str(config_file(tmp_path, "http://127.0.0.1:9")), env={"ONCE_KEY": KEY}
    )
    assert proc.returncode == 3
    assert "http://127.0.0.1:9" in proc.stderr and "running" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_refused_key_exits_3_without_leaking_it(store: RefStoreThread, tmp_path: Path) -> None:
    wrong = "wrong-key-abcdef-123"
    proc = benchd(
        "once",
        "--config",
        str(config_file(tmp_path, store.url, "benchd-auth")),
        "--format",
        "json",
        env={"ONCE_KEY": wrong},
    )
    assert proc.returncode == 3
    assert wrong not in proc.stdout + proc.stderr


def test_bad_config_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[[probe]]\nname = 'x'\nfixture = 'f.json'\nbogus = 1\n[probe.target]\n")
    proc = benchd("once", "--config", str(path))
    assert proc.returncode == 2
    assert "probe[0].bogus: unknown key" in proc.stderr


def test_no_config_runs_the_embedded_default() -> None:
    proc = benchd("once", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    (probe,) = json.loads(proc.stdout)["probes"]
    assert probe["name"] == "embedded" and probe["outcome"] == "success"
    assert probe["aggregate"]["recall@10"] > 0.3


def _fixture_with_a_rejected_memory(tmp_path: Path) -> Path:
    """The smoke fixture plus one memory the store rejects (content over its 10,000 chars)."""
    from benchd.fixtures.model import packaged_fixture

    data = json.loads(packaged_fixture("smoke").read_text(encoding="utf-8"))
    # First, not last: the last record is the one polled for time-to-searchable.
    data["memories"].insert(0, {"id": "too-long", "type": "fact", "content": "x " * 5001})
    path = tmp_path / "rejected.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_a_rejected_seed_record_is_degraded_and_exits_3(
    store: RefStoreThread, tmp_path: Path
) -> None:
    config = config_file(tmp_path, store.url, "benchd-rejected")
    fixture = _fixture_with_a_rejected_memory(tmp_path)
    config.write_text(config.read_text().replace("packaged:smoke", str(fixture)))
    proc = benchd("once", "--config", str(config), "--format", "json", env={"ONCE_KEY": KEY})
    assert proc.returncode == 3, proc.stderr
    (probe,) = json.loads(proc.stdout)["probes"]
    assert probe["outcome"] == "degraded"
    assert probe["degraded_reasons"] == ["seed_incomplete"]
    assert probe["seed"]["errors"] == 1 and probe["seed"]["missing"] == ["too-long"]
    assert "probe smoke degraded: seed_incomplete" in proc.stderr
    assert "Traceback" not in proc.stderr

    allowed = benchd("once", "--config", str(config), "--allow-degraded", env={"ONCE_KEY": KEY})
    assert allowed.returncode == 0, allowed.stderr
    assert "allowed by --allow-degraded" in allowed.stderr
    assert "outcome=degraded" in allowed.stdout
