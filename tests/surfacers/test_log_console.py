"""Console log lines for a person; JSON lines for machines, unchanged."""

from __future__ import annotations

import json

import pytest
from cycles import make_result

from benchd.logging import configure_logging
from benchd.surfacers.log import log_cycle


def test_a_console_line_leads_with_event_and_probe_and_shows_times(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging("info", json=False)
    log_cycle(make_result("alpha", started_at=1_700_000_000.0))
    (line,) = capsys.readouterr().err.splitlines()
    stamp, rest = line[:19], line[19:]
    assert stamp[4] == "-" and stamp[10] == " " and stamp[13] == ":"  # 2026-12-01 10:17:20
    level, _, tail = rest.strip().partition("]")
    assert level == "[info" or level.startswith("[info ")
    words = tail.split()
    assert words[:3] == ["cycle", "probe=alpha", "cycle=1"]
    assert "started_at=2023-11-14T22:13:20.000Z" in words
    assert not any(w.startswith("started_at=1700") for w in words)


def test_json_lines_keep_epoch_floats_and_every_key(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info", json=True)
    log_cycle(make_result("alpha", started_at=1_700_000_000.0))
    (line,) = capsys.readouterr().err.splitlines()
    event = json.loads(line)
    assert event["started_at"] == 1_700_000_000.0 and event["probe"] == "alpha"
    assert event["event"] == "cycle" and event["timestamp"].endswith("Z")
