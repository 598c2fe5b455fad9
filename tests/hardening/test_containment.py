"""A probe fails alone: a bug inside one probe's cycle is that probe's ``failed`` cycle.

A ``kind = "python"`` target whose ``search`` raises ``RuntimeError`` (a full
Target, so benchd's retriever wrapper does not translate the exception) runs
beside a healthy in-process BM25 probe, in ``benchd run`` and ``benchd once``
as real processes. The broken probe's cycles end ``failed`` with error kind
``internal``, are counted in ``benchd_cycle_errors_total`` and logged once
each with the traceback as a field; it runs again at every interval; the
healthy probe keeps scoring and the daemon stays up.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest
from drill_support import value
from structlog.testing import capture_logs
from support import BenchdProcess

from benchd.commands.once import exit_code
from benchd.config.load import load_config
from benchd.probe import ProbeRunner
from benchd.result import CycleResult
from benchd.scheduler import ProbeLoop

BROKEN = '''
from benchd.result import SeedReport, TargetInfo


class Broken:
    """A full Target whose search has a bug; everything else works."""

    kind = "python"

    async def info(self):
        return TargetInfo(kind="python", endpoint="python:broken")

    async def seed(self, memories, *, progress=None):
        n = len(memories)
        return SeedReport(requested=n, imported=n, skipped=0, errors=0, verified=n)

    async def search(self, query):
        raise RuntimeError("search blew up: a bug in the adapter")

    async def cleanup(self, ids):
        return 0

    async def aclose(self):
        return None


def make():
    return Broken()
'''


def write_setup(tmp_path: Path, *, interval: float = 0.2) -> tuple[Path, dict[str, str]]:
    (tmp_path / "broken_target.py").write_text(BROKEN, encoding="utf-8")
    config = tmp_path / "benchd.toml"
    config.write_text(
        textwrap.dedent(
            f"""
            [server]
            history = 5

            [[probe]]
            name = "broken"
            fixture = "packaged:smoke"
            interval_s = {interval}
            jitter_s = 0.0
            [probe.target]
            kind = "python"
            factory = "broken_target:make"

            [[probe]]
            name = "healthy"
            fixture = "packaged:smoke"
            interval_s = {interval}
            jitter_s = 0.0
            [probe.target]
            kind = "python"
            factory = "benchd.examples.retrievers:bm25"
            """
        ),
        encoding="utf-8",
    )
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p)
    return config, {"PYTHONPATH": path}


def test_a_crashing_probe_in_run_fails_alone_and_runs_again(tmp_path: Path) -> None:
    config, env = write_setup(tmp_path)
    with BenchdProcess(["--config", str(config)], env=env) as benchd:
        broken = benchd.wait_cycles("broken", 3)
        healthy = benchd.wait_cycles("healthy", 3)
        assert {(c["outcome"], c["error_kind"]) for c in broken} == {("failed", "internal")}
        assert all(c["outcome"] == "success" and c["recall@10"] > 0 for c in healthy)
        errors = benchd.samples("benchd_cycle_errors_total")
        assert value(errors, probe="broken", kind="internal") >= 3
        assert value(errors, probe="healthy") == 0
        up = benchd.samples("benchd_up")
        assert value(up, probe="healthy") == 1 and value(up, probe="broken") == 0
        assert benchd.proc is not None and benchd.proc.poll() is None
        assert benchd.stop() == 0
    internal = [e for e in benchd.events if e.get("event") == "internal error"]
    failed_cycles = [c for c in benchd.cycles("broken") if c.get("error_kind") == "internal"]
    # logged once per failed cycle, with the traceback as a field of that one event
    assert len(internal) == len(failed_cycles) >= 3
    assert all(e["probe"] == "broken" and e["stage"] == "cycle" for e in internal)
    assert all("RuntimeError: search blew up" in e["traceback"] for e in internal)
    assert all("Traceback (most recent call last)" in e["traceback"] for e in internal)
    # the traceback is a field of one JSON line, never loose lines on stderr
    assert not [line for line in benchd.lines if line.startswith("Traceback")]


def once(config: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchd", "once", "--config", str(config), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **env},
    )


def test_once_exits_4_for_an_internal_error_and_still_scores_the_others(tmp_path: Path) -> None:
    config, env = write_setup(tmp_path)
    proc = once(config, env, "--format", "json")
    assert proc.returncode == 4, proc.stderr
    probes = {p["name"]: p for p in json.loads(proc.stdout)["probes"]}
    assert probes["broken"]["outcome"] == "failed"
    assert probes["broken"]["error"]["kind"] == "internal"
    assert probes["healthy"]["outcome"] == "success"
    assert "probe broken failed: internal error: RuntimeError" in proc.stderr
    # the traceback travels once, as a field of the one JSON log event, never as loose lines
    logged = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]
    assert [e["probe"] for e in logged if e["event"] == "internal error"] == ["broken"]
    assert not [line for line in proc.stderr.splitlines() if line.startswith("Traceback")]
    alone = once(config, env, "--probe", "healthy")
    assert alone.returncode == 0, alone.stderr


def _result(outcome: str, kind: str | None) -> CycleResult:
    return CycleResult(
        probe="p",
        target="python",
        corpus="c",
        cycle=1,
        started_at=0.0,
        finished_at=1.0,
        outcome=outcome,  # type: ignore[arg-type]
        phases={},
        ks=(10,),
        error_kind=kind,
    )


@pytest.mark.parametrize(
    ("outcomes", "breached", "code"),
    [
        ([("success", None)], False, 0),
        ([("success", None)], True, 1),
        ([("success", None), ("failed", "auth")], True, 3),
        ([("timeout", "timeout"), ("success", None)], False, 3),
        ([("failed", "connect"), ("failed", "internal"), ("success", None)], True, 4),
        ([("failed", "internal")], False, 4),
    ],
)
def test_the_most_severe_exit_code_wins(
    outcomes: list[tuple[str, str | None]], breached: bool, code: int
) -> None:
    results = [_result(o, k) for o, k in outcomes]
    assert exit_code(results, breached=breached) == code


# --------------------------------------------------------------------------- in-process


def _runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ProbeRunner:
    config, _ = write_setup(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    probe = load_config(config).probe("healthy")
    return ProbeRunner(probe)


def test_a_bug_in_the_drift_stage_fails_the_cycle_with_kind_internal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = _runner(tmp_path, monkeypatch)

    async def broken(result: CycleResult) -> Any:
        raise ZeroDivisionError("drift bug")

    runner.tracker.aobserve = broken  # type: ignore[method-assign]

    async def go() -> CycleResult:
        try:
            return await runner.run_once()
        finally:
            await runner.aclose()

    with capture_logs() as logs:
        result = anyio.run(go)
    assert (result.outcome, result.error_kind) == ("failed", "internal")
    assert result.aggregate  # the cycle's own readings are kept
    assert "drift: internal error: ZeroDivisionError" in (result.error_message or "")
    [event] = [e for e in logs if e["event"] == "internal error"]
    assert event["stage"] == "drift" and "ZeroDivisionError: drift bug" in event["traceback"]


def test_a_surfacer_that_raises_does_not_stop_the_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = _runner(tmp_path, monkeypatch)
    seen: list[CycleResult] = []

    def sink(result: CycleResult) -> None:
        seen.append(result)
        raise KeyError("surfacer bug")

    async def go() -> None:
        loop = ProbeLoop(runner, sink, seed=1)
        async with anyio.create_task_group() as tg:
            await tg.start(loop.run)
            while len(seen) < 3:  # the loop goes on after each raising sink call
                await anyio.sleep(0.01)
            loop.cancel()
        await runner.aclose()

    with capture_logs() as logs:
        anyio.run(go)
    assert len(seen) >= 3 and all(r.ok for r in seen)
    surfacer = [e for e in logs if e["event"] == "internal error" and e["stage"] == "surfacer"]
    assert len(surfacer) >= 3
