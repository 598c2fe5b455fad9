"""``/healthz`` latency while a reload reads a large fixture (issue #21, item 6).

Starts ``benchd run`` (a subprocess) with one idle probe, then writes a
config that adds a probe over a synthetic JSON Lines fixture of
``--memories`` memories (``benchd synth``) and asks for ``POST /-/reload``
while this process requests ``/healthz`` back to back on another
connection. It prints the reload's duration and ``/healthz``'s p50, p99 and
maximum over the requests that ran while the reload did (and over a quiet
baseline before it). Before the fix the fixture was read on the event loop:
100k memories held ``/healthz`` 6.4 s, 200k 24 s. Run from the repo root::

    .venv/bin/python bench/reload_healthz.py                  # 200,000 memories
    .venv/bin/python bench/reload_healthz.py --memories 20000 # a quick run
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

PROBE = """
[[probe]]
name = "{name}"
fixture = "{fixture}"
interval_s = 3600
timeout_s = 5
jitter_s = 0.0

[probe.target]
kind = "zengram"
url = "http://127.0.0.1:9"
api_key_env = "BENCHD_RELOAD_KEY"
namespace = "reload-{name}"
max_retries = 0
"""


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def start(config: Path) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "BENCHD_RELOAD_KEY": "k"}
    cmd = [sys.executable, "-m", "benchd", "run", "--config", str(config)]
    proc = subprocess.Popen(
        [*cmd, "--listen", "127.0.0.1:0", "--log-format", "json"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, env=env,
    )  # fmt: skip
    assert proc.stderr is not None
    for line in proc.stderr:
        event = json.loads(line) if line.startswith("{") else {}
        if event.get("event") == "started":
            threading.Thread(target=lambda: [None for _ in proc.stderr or ()], daemon=True).start()
            return proc, str(event["url"])
    raise SystemExit("benchd did not start")


def poll(url: str, stop: threading.Event, out: list[tuple[float, float]]) -> None:
    """``/healthz`` back to back: (start time, seconds) per request."""
    with httpx.Client(timeout=120) as client:
        while not stop.is_set():
            began = time.perf_counter()
            client.get(url + "/healthz").raise_for_status()
            out.append((began, time.perf_counter() - began))


def summary(label: str, samples: list[float]) -> str:
    ms = [s * 1000 for s in samples]
    return (
        f"{label}: n={len(ms)} p50={quantile(ms, 0.5):.1f} ms p99={quantile(ms, 0.99):.1f} ms "
        f"max={max(ms, default=float('nan')):.1f} ms mean={statistics.fmean(ms or [0]):.1f} ms"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=200_000)
    parser.add_argument("--queries", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="benchd-reload-") as tmp:
        folder = Path(tmp)
        small, big = folder / "small.jsonl", folder / "big.jsonl"
        for path, memories, queries in ((small, 40, 5), (big, args.memories, args.queries)):
            subprocess.run(
                [sys.executable, "-m", "benchd", "synth", "--memories", str(memories),
                 "--queries", str(queries), "--out", str(path)],
                check=True, capture_output=True,
            )  # fmt: skip
        print(f"fixture: {args.memories} memories, {big.stat().st_size / 2**20:.1f} MiB")
        config = folder / "benchd.toml"
        config.write_text("[server]\n" + PROBE.format(name="idle", fixture=small))
        proc, url = start(config)
        try:
            samples: list[tuple[float, float]] = []
            stop = threading.Event()
            poller = threading.Thread(target=poll, args=(url, stop, samples), daemon=True)
            poller.start()
            time.sleep(2.0)  # a quiet baseline
            config.write_text(config.read_text() + PROBE.format(name="big", fixture=big))
            began = time.perf_counter()
            answer = httpx.post(url + "/-/reload", timeout=600)
            ended = time.perf_counter()
            stop.set()
            poller.join(timeout=130)
            print(f"reload: HTTP {answer.status_code} in {ended - began:.2f} s")
            quiet = [s for t, s in samples if t < began]
            during = [s for t, s in samples if began <= t <= ended]
            print(summary("/healthz before the reload", quiet))
            print(summary("/healthz during the reload", during))
            return 0 if answer.status_code == 200 else 1
        finally:
            proc.terminate()
            proc.wait(timeout=60)


if __name__ == "__main__":
    sys.exit(main())
