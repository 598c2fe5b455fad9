"""``benchd once`` against ``benchd refstore --profile zengram-4.3``: date words need dates.

A fixture in the target API's eval format gives no ``created_at`` and no
``reference_date`` (tests/data/zengram-eval.json, benchd's own); its two
date-word queries ("in May", "in June") then score 0 against the real
server, and so they must against the reference store. Given dates, they
score 1. Two real processes over loopback.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

KEY = "once-dates-key-123456"
REPO = Path(__file__).resolve().parents[2]
ZENGRAM_EVAL = REPO / "tests" / "data" / "zengram-eval.json"
DATE_WORDS = re.compile(r"\bin (may|june)\b", re.IGNORECASE)


@pytest.fixture(scope="module")
def store_url() -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchd", "refstore", "--listen", "127.0.0.1:0",
         "--api-key-env", "ONCE_DATES_KEY", "--profile", "zengram-4.3",
         "--import-pacing", "0", "--read-limit", "0", "--write-limit", "0"],
        env={**os.environ, "ONCE_DATES_KEY": KEY},
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)


def _once(tmp_path: Path, url: str, fixture: Path, namespace: str) -> dict[str, Any]:
    config = tmp_path / f"{namespace}.toml"
    config.write_text(f"""
[[probe]]
name = "dates"
fixture = "{fixture}"
k = [10]

[probe.target]
kind = "zengram"
url = "{url}"
api_key_env = "ONCE_DATES_KEY"
namespace = "{namespace}"
""")
    proc = subprocess.run(
        [sys.executable, "-m", "benchd", "once", "--config", str(config), "--format", "json"],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "ONCE_DATES_KEY": KEY},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (probe,) = json.loads(proc.stdout)["probes"]
    return dict(probe)


def _hits(probe: dict[str, Any]) -> dict[str, float]:
    return {q["q"]: q["metrics"]["hit@10"] for q in probe["queries"]}


def test_date_word_queries_score_0_without_dates_and_1_with_them(
    store_url: str, tmp_path: Path
) -> None:
    bare = _hits(_once(tmp_path, store_url, ZENGRAM_EVAL, "dates-bare"))
    dated_words = [q for q in bare if DATE_WORDS.search(q)]
    assert len(dated_words) == 2
    assert [bare[q] for q in dated_words] == [0.0, 0.0]

    doc = json.loads(ZENGRAM_EVAL.read_text(encoding="utf-8"))
    doc["reference_date"] = "2026-07-01"
    for memory in doc["memories"]:
        month = re.search(r"-(2026-\d\d)-", memory["id"])  # event-outage-2026-05-dns
        if month:
            memory["created_at"] = f"{month.group(1)}-12T09:00:00Z"
    dated_file = tmp_path / "zengram-eval-dated.json"
    dated_file.write_text(json.dumps(doc), encoding="utf-8")
    dated = _hits(_once(tmp_path, store_url, dated_file, "dates-given"))
    assert [dated[q] for q in dated_words] == [1.0, 1.0]
    others = [q for q in bare if q not in dated_words]
    assert [dated[q] for q in others] == [bare[q] for q in others]  # only dates changed
