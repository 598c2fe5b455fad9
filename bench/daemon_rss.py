"""Peak RSS of ``benchd run`` (the daemon) over a few cycles of one probe on a large corpus.

``bench/scale.py`` measures one ``benchd once``; a daemon also keeps what a
probe learned between cycles (the latest listing, the fixture's ids) and
lists the namespace again each cycle while the previous listing is still
held. This starts a fresh reference store (bm25, no limits; bench/scale.py's),
writes a ``benchd synth`` JSON Lines corpus, runs ``benchd run`` with one
probe (``cleanup = "never"``, cycles back to back) and, after each cycle
(its ``cycle`` log line), prints the daemon's RSS and peak RSS
(``/proc/PID/status`` VmRSS, VmHWM). Run from the repo root::

    .venv/bin/python bench/daemon_rss.py --memories 100000 --cycles 3
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scale  # bench/scale.py: its store and config


def status_mib(pid: int) -> dict[str, float]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024
    return fields


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--cycles", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="benchd-daemon-rss-") as tmp:
        workdir = Path(tmp)
        fixture = workdir / f"synth-{args.memories}.jsonl"
        subprocess.run(
            [sys.executable, "-m", "benchd", "synth", "--memories", str(args.memories),
             "--queries", str(scale.QUERIES), "--out", str(fixture)],
            check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        store = scale.Store(workdir)
        try:
            config = scale.write_config(workdir, store.url, fixture, "never")
            config.write_text(config.read_text().replace("interval_s = 3600.0", "interval_s = 1.0"))
            env = os.environ | {scale.KEY_ENV: "bench-scale-key-0123456789"}
            argv = [sys.executable, "-m", "benchd", "run", "-c", str(config), "--log-format",
                    "json", "--listen", "127.0.0.1:0"]  # fmt: skip
            proc = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True)
            try:
                seen = 0
                assert proc.stderr is not None
                for line in proc.stderr:
                    event = json.loads(line) if line.startswith("{") else {}
                    if event.get("event") != "cycle":
                        continue
                    seen += 1
                    mib = status_mib(proc.pid)
                    print(
                        f"{args.memories:,} records, cycle {seen}: {event.get('outcome')}, "
                        f"RSS {mib['VmRSS']:.0f} MiB, peak RSS {mib['VmHWM']:.0f} MiB",
                        flush=True,
                    )
                    if seen >= args.cycles:
                        break
            finally:
                proc.terminate()
                proc.wait(timeout=120)
        finally:
            store.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
