"""``benchd once`` and ``benchd run`` with probes embedding on a hostile endpoint, beside a
healthy probe on the reference store that must stay unaffected.

Each hostile probe is a qdrant probe (local mode, a directory of its own) whose
``[probe.target.embed]`` model is an ``openai:`` endpoint served by
:class:`HostileEmbeddings` in this process: every failure is a counted kind, never
``internal``; the 100 MB answer costs no memory; the URL's password and
``?api-key=`` appear in no output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hostile_embeddings import HostileEmbeddings
from support import BenchdProcess

from benchd.refstore.testing import RefStoreThread, started_refstore

pytestmark = pytest.mark.timeout(600)

SECRET = "AzKey-0123456789abcdef"
PASSWORD = "pw-7733-hunter2"
MEASURE = """
import json, resource, subprocess, sys
proc = subprocess.run(sys.argv[1:], capture_output=True, text=True)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"rc": proc.returncode, "peak_kib": peak, "out": proc.stdout, "err": proc.stderr}))
"""
"""Runs a command and reports the peak RSS of it and its descendants (the decode worker)."""


@pytest.fixture(scope="module")
def store() -> Iterator[RefStoreThread]:
    with started_refstore() as ref:
        yield ref


@pytest.fixture(scope="module")
def endpoint() -> Iterator[HostileEmbeddings]:
    with HostileEmbeddings(dribble_s=0.2) as server:
        yield server


def healthy(store: RefStoreThread) -> str:
    return f"""
[[probe]]
name = "healthy"
fixture = "packaged:smoke"
k = [5, 10]
interval_s = 3600

[probe.target]
kind = "zengram"
url = "{store.url}"
api_key_env = "REF_KEY"
namespace = "benchd-healthy"
"""


def hostile(model: str, url: str, tmp: Path, *, secret: bool = False) -> str:
    if secret:
        url = url.replace("http://", f"http://bob:{PASSWORD}@") + f"?api-key={SECRET}"
    return f"""
[[probe]]
name = "embed-{model}"
fixture = "packaged:smoke"
k = [5, 10]
interval_s = 3600
timeout_s = 600

[probe.target]
kind = "qdrant"
namespace = "hostile"
path = "{tmp / f"q-{model}"}"
timeout_s = 1.0

[probe.target.embed]
model = "openai:{url}#{model}"
cache_dir = "{tmp / "cache"}"
"""


def env(store: RefStoreThread) -> dict[str, str]:
    return {**os.environ, "REF_KEY": store.api_key}


def once(config: Path, store: RefStoreThread) -> dict[str, Any]:
    """``benchd once --format json`` under :data:`MEASURE`."""
    command = [sys.executable, "-m", "benchd", "once", "-c", str(config), "--format", "json"]
    proc = subprocess.run(
        [sys.executable, "-c", MEASURE, *command],
        capture_output=True, text=True, env=env(store), timeout=600, check=True,
    )  # fmt: skip
    run: dict[str, Any] = json.loads(proc.stdout)
    assert run["rc"] in (0, 1, 3), run["err"][-3000:]
    run["probes"] = {p["name"]: p for p in json.loads(run["out"])["probes"]}
    return run


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize("model", ["huge", "flood"])
def test_a_100_mb_answer_costs_no_memory_and_the_healthy_probe_is_unaffected(
    store: RefStoreThread, endpoint: HostileEmbeddings, tmp_path: Path, model: str
) -> None:
    plain = tmp_path / "plain"
    calm = once(
        write(tmp_path / "calm.toml", healthy(store) + hostile("hash", endpoint.url, plain)), store
    )
    assert calm["probes"]["embed-hash"]["outcome"] == "success"
    text = healthy(store) + hostile(model, endpoint.url, tmp_path)
    stormy = once(write(tmp_path / "stormy.toml", text), store)
    probe = stormy["probes"][f"embed-{model}"]
    assert probe["outcome"] == "failed" and probe["error"]["kind"] == "decode"
    assert "exceeds max_response_bytes = 8388608" in probe["error"]["message"]
    assert stormy["probes"]["healthy"]["outcome"] == "success"
    over_mib = (stormy["peak_kib"] - calm["peak_kib"]) / 1024
    print(f"{model}: peak {stormy['peak_kib'] / 1024:.0f} MiB, calm {calm['peak_kib'] / 1024:.0f}")
    assert over_mib < 100, (stormy["peak_kib"], calm["peak_kib"])


def test_every_bad_answer_is_a_counted_kind_and_the_secret_is_in_no_output(
    store: RefStoreThread, endpoint: HostileEmbeddings, tmp_path: Path
) -> None:
    kinds = {"dribble": "timeout", "lists": "decode", "string": "decode", "deep": "decode",
             "refused": "auth"}  # fmt: skip
    text = healthy(store) + "".join(
        hostile(model, endpoint.url, tmp_path, secret=True) for model in kinds
    )
    run = once(write(tmp_path / "bad.toml", text), store)
    assert run["probes"]["healthy"]["outcome"] == "success"
    for model, kind in kinds.items():
        probe = run["probes"][f"embed-{model}"]
        assert probe["error"]["kind"] == kind, probe["error"]
        assert probe["model"] == f"openai:{endpoint.url}#{model}"
    assert "internal" not in run["out"] + run["err"]
    for secret in (SECRET, PASSWORD):
        assert secret not in run["out"] + run["err"]
    asked = [path for path, _, body in endpoint.seen if body["model"] == "string"]
    assert asked and set(asked) == {f"/v1/embeddings?api-key={SECRET}"}


def test_a_daemon_shows_the_label_and_never_the_secret(
    store: RefStoreThread, endpoint: HostileEmbeddings, tmp_path: Path
) -> None:
    config = write(
        tmp_path / "run.toml",
        healthy(store) + hostile("string", endpoint.url, tmp_path, secret=True),
    )
    with BenchdProcess(["--config", str(config)], env={"REF_KEY": store.api_key}) as daemon:
        daemon.wait_cycles("healthy", 1, timeout=300)
        failed = daemon.wait_cycles("embed-string", 1, timeout=300)[0]
        outputs = [daemon.get(path).text for path in ("/metrics", "/api/status", "/")]
        info = [labels for labels, _ in daemon.samples("benchd_probe_info")]
        assert daemon.stop(timeout=60) == 0
    assert failed["outcome"] == "failed"
    assert {"probe": "embed-string", "model": f"openai:{endpoint.url}#string"}.items() <= next(
        i for i in info if i["probe"] == "embed-string"
    ).items()
    shown = "".join(outputs) + "".join(daemon.lines)
    assert f"openai:{endpoint.url}#string" in shown
    assert SECRET not in shown and PASSWORD not in shown
    assert '"internal"' not in shown and 'kind="internal"' not in shown
