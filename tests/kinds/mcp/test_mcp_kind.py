"""The mcp kind end to end, against real MCP servers (DESIGN §2b, issue #24's done-when).

- server-memory (npm) over stdio and through the supergateway HTTP bridge:
  the keyword fixture seeds, verifies and scores as an unranked store; a
  user's own memory file is never touched, and a shared (adopted) file keeps
  every entity benchd did not write;
- the SDK-framework server (memory_server.py), ranking by embeddings: ranked
  scoring, a pinned baseline, and an embedder switch flagged as drift with
  model_changed on the first cycle;
- a tool map naming a missing tool: one line naming it, exit 2 from
  ``validate --check-store``; a server dying mid-cycle: that cycle fails with
  kind ``connect`` and the next one starts it again;
- a closed-loop load pass at c=8 with zero errors.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp_servers import (
    SERVER_MEMORY_TOOLS,
    sdk_server_argv,
    sdk_server_over_http,
    server_memory_argv,
    server_memory_over_http,
    stdio_lines,
)
from prometheus_client import generate_latest
from structlog.testing import capture_logs

from benchd.commands.synth import write_synth
from benchd.config.load import load_config
from benchd.errors import OwnershipError, TargetProtocolError
from benchd.fixtures.synth import SynthSpec
from benchd.kinds.mcp.config import McpConfig, SearchTool, ToolMap
from benchd.kinds.mcp.connect import open_session
from benchd.probe import ProbeRunner
from benchd.result import CycleResult
from benchd.surfacers.prometheus import build_registry
from benchd.surfacers.result_book import ResultBook
from benchd.surfacers.status import result_to_json

REPO = Path(__file__).resolve().parents[3]
KEYWORDS = REPO / "fixtures" / "mcp-keyword.json"
RANK_MEASURES = ("mrr", "ndcg", "map", "rr", "ap", "r_precision")

MEM0_TOOLS = """
[probe.target.tools.search]
name = "search_memories"
arguments = { user_id = "{namespace}", query = "{q}", limit = "{k}" }
ids = "results[*].id"
scores = "results[*].score"

[probe.target.tools.write]
name = "add_memories"
arguments = { user_id = "{namespace}", memories = "{records}" }
record = { id = "{id}", content = "{content}" }
concurrency = 2

[probe.target.tools.list]
name = "list_memories"
arguments = { user_id = "{namespace}", offset = "{offset}", limit = "{limit}" }
ids = "memories[*].id"
page_size = 100

[probe.target.tools.delete]
name = "delete_memory"
arguments = { user_id = "{namespace}", memory_id = "{id}" }

[probe.target.tools.info]
name = "memory_info"
model = "model"
"""


def probe_toml(
    target: str,
    tools: str,
    *,
    fixture: Path = KEYWORDS,
    k: str = "[10]",
    load: str = 'mode = "serial"',
    extra: str = "",
) -> str:
    return f"""
[[probe]]
name = "mcp"
fixture = "{fixture}"
k = {k}
timeout_s = 300
{extra}

[probe.target]
kind = "mcp"
timeout_s = 60
{target}
{tools}

[probe.load]
{load}
"""


def stdio_target(argv: list[str], env: dict[str, str], rest: str) -> str:
    return stdio_lines(argv, env) + rest


def server_memory_stdio(memory: Path, rest: str = 'namespace_by = "server"') -> str:
    return stdio_target(server_memory_argv(), {"MEMORY_FILE_PATH": str(memory)}, rest)


async def cycles(
    config_text: str, tmp_path: Path, n: int = 1, *, shutdown: bool = False
) -> list[CycleResult]:
    """``n`` cycles of the config's one probe, in process; then its shutdown: the cleanup
    if asked, the lease handed back (as a stopped daemon hands it back)."""
    path = tmp_path / "benchd.toml"
    path.write_text(config_text)
    (probe,) = load_config(path).probes
    runner = ProbeRunner(probe)
    try:
        results = [await runner.run_once() for _ in range(n)]
        if shutdown:
            report = await runner.cleanup()
            assert report is not None and report.leftover == 0 and not report.timed_out
        else:
            await runner.release_lease()
        return results
    finally:
        await runner.aclose()


def keyword_set_scores() -> dict[str, float]:
    """The set measures server-memory's substring search must give the keyword fixture.

    Computed here from the fixture alone, the way search_nodes matches: a
    case-insensitive substring of an entity's name, type or observation.
    """
    fixture = json.loads(KEYWORDS.read_text())
    rows = []
    for query in fixture["queries"]:
        q = query["q"].lower()
        found = {
            m["id"]
            for m in fixture["memories"]
            if q in m["content"].lower() or q in f"benchd:benchd-eval:{m['id']}" or q in "benchd"
        }
        relevant = set(query["expected_ids"])
        hits = len(found & relevant)
        rows.append((hits, len(relevant), len(found)))
    n = len(rows)
    return {
        "hit": sum(h > 0 for h, _, _ in rows) / n,
        "recall": sum(h / r for h, r, _ in rows) / n,
        "recall_all": sum(h == r for h, r, _ in rows) / n,
        "precision": sum(h / f if f else 0.0 for h, _, f in rows) / n,
    }


def assert_scored_as_a_set(result: CycleResult) -> None:
    assert result.outcome == "success", result.error_message
    assert result.seed is not None and result.seed.verified == result.seed.requested == 36
    assert dict(result.aggregate) == pytest.approx(keyword_set_scores())
    document = result_to_json(result)
    assert document["unranked"]
    for name in ("mrr@10", "ndcg@10", "map@10", "precision@10", "rr", "ap"):
        assert document["aggregate"][name] is None
    book = ResultBook()
    book.record(result)
    metrics = generate_latest(build_registry(book)).decode()
    quality = [line for line in metrics.splitlines() if line.startswith("benchd_quality{")]
    assert any('metric="recall",' in line and 'k="all"' in line for line in quality)
    assert not [line for line in quality if any(f'metric="{m}"' in line for m in RANK_MEASURES)]
    assert not [line for line in quality if 'metric="precision",k="10"' in line]


@pytest.mark.anyio
async def test_server_memory_over_stdio_seeds_verifies_and_scores_as_a_set(
    tmp_path: Path,
) -> None:
    own = tmp_path / "own.jsonl"  # the user's own memory file, with their own graph
    own.write_text(json.dumps({"type": "entity", "name": "mine", "entityType": "note",
                               "observations": ["my own note"]}))
    before = own.read_bytes()
    config = probe_toml(server_memory_stdio(tmp_path / "benchd.jsonl"), SERVER_MEMORY_TOOLS)
    first, second = await cycles(config, tmp_path, n=2)
    assert_scored_as_a_set(first)
    assert own.read_bytes() == before
    drift = second.drift  # against the first cycle: only the set measures are compared
    assert drift is not None and drift.baseline == "rolling"
    assert set(drift.metrics) == {"hit", "recall", "recall_all", "precision"}
    assert not drift.detected


@pytest.mark.anyio
async def test_server_memory_through_the_http_bridge_scores_the_same_set(tmp_path: Path) -> None:
    with server_memory_over_http(tmp_path / "benchd.jsonl") as url:
        target = f'transport = "http"\nurl = "{url}"\nnamespace_by = "server"'
        (result,) = await cycles(probe_toml(target, SERVER_MEMORY_TOOLS), tmp_path)
    assert_scored_as_a_set(result)


@pytest.mark.anyio
async def test_an_adopted_shared_memory_file_keeps_every_entity_benchd_did_not_write(
    tmp_path: Path,
) -> None:
    shared = tmp_path / "shared.jsonl"
    theirs = [
        {"type": "entity", "name": n, "entityType": "note", "observations": [f"{n} ports"]}
        for n in ("alice", "benchd-notes", "fact-ledger-db-port")
    ]
    shared.write_text("\n".join(json.dumps(e) for e in theirs))
    target = server_memory_stdio(shared, 'adopt_namespace = true\ncleanup = "after"')
    config = probe_toml(target, SERVER_MEMORY_TOOLS)
    (result,) = await cycles(config, tmp_path, shutdown=True)
    assert result.outcome == "success", result.error_message
    assert result.seed is not None and result.seed.adopted
    left = [json.loads(line) for line in shared.read_text().splitlines() if line.strip()]
    assert left == theirs  # benchd's corpus and sentinel gone, nobody else's touched


@pytest.mark.anyio
async def test_purge_deletes_benchds_entities_and_sentinel_and_nobody_elses(tmp_path: Path) -> None:
    shared = tmp_path / "shared.jsonl"
    theirs = {"type": "entity", "name": "alice", "entityType": "note", "observations": ["hi"]}
    shared.write_text(json.dumps(theirs))
    config = probe_toml(server_memory_stdio(shared, "adopt_namespace = true"), SERVER_MEMORY_TOOLS)
    (result,) = await cycles(config, tmp_path)  # cleanup = "never": the corpus stays
    assert result.outcome == "success", result.error_message
    assert len(shared.read_text().splitlines()) == 1 + 36 + 1  # theirs, the corpus, sentinel
    proc = benchd("purge", "-c", str(tmp_path / "benchd.toml"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [json.loads(line) for line in shared.read_text().splitlines()] == [theirs]


@pytest.mark.anyio
async def test_an_entity_identical_to_one_of_benchds_written_before_benchd_is_never_touched(
    tmp_path: Path,
) -> None:
    """Someone's entity has the very name, type and observations benchd would write for a
    fixture memory, in a shared file benchd has not marked yet: server-memory keys on the
    name, so benchd's write would be skipped and its cleanup would delete that entity. The
    probe is refused (kind ``ownership``, naming it) and so is ``purge``; the file is
    untouched."""
    shared = tmp_path / "shared.jsonl"
    first = json.loads(KEYWORDS.read_text())["memories"][0]
    squatter = {"type": "entity", "name": f"benchd:benchd-eval:{first['id']}",
                "entityType": "benchd", "observations": [first["content"]]}  # fmt: skip
    alice = {"type": "entity", "name": "alice", "entityType": "note", "observations": ["hi"]}
    shared.write_text(json.dumps(squatter) + "\n" + json.dumps(alice) + "\n")
    before = shared.read_bytes()
    target = server_memory_stdio(shared, 'adopt_namespace = true\ncleanup = "after"')
    path = tmp_path / "benchd.toml"
    path.write_text(probe_toml(target, SERVER_MEMORY_TOOLS))
    (probe,) = load_config(path).probes
    runner = ProbeRunner(probe)
    try:
        result = await runner.run_once()
        with pytest.raises(OwnershipError, match=squatter["name"]):
            await runner.cleanup()  # the daemon logs it and reports nothing deleted
    finally:
        await runner.aclose()
    assert (result.outcome, result.error_kind) == ("failed", "ownership"), result.error_message
    assert squatter["name"] in (result.error_message or "")
    assert shared.read_bytes() == before
    proc = benchd("purge", "-c", str(path), cwd=tmp_path)
    assert proc.returncode == 3 and squatter["name"] in proc.stderr, proc.stdout + proc.stderr
    assert shared.read_bytes() == before


@pytest.mark.anyio
async def test_others_memories_with_benchds_ids_and_texts_survive_run_shutdown_and_purge(
    tmp_path: Path,
) -> None:
    """The mem0-style server keys memories on (user_id, id). Others hold benchd's very ids
    and texts under other users (another tenant; another benchd namespace), and the
    fixture's own ids and texts beside benchd under its user (adopted). Two cycles
    (``cleanup = "before"`` deletes and rewrites benchd's copy), the shutdown, then
    ``benchd purge``: every one of theirs reads back as it was written."""
    smoke = REPO / "fixtures" / "smoke.json"
    corpus = json.loads(smoke.read_text())["memories"]
    same = [{"id": f"benchd:benchd-eval:{m['id']}", "content": m["content"]} for m in corpus]
    bare = [{"id": m["id"], "content": m["content"]} for m in corpus]
    planted = {"alice": same, "benchd-other": same, "benchd-eval": bare}
    with sdk_server_over_http() as url:
        config = McpConfig(tools=ToolMap(search=SearchTool(name="search_memories", ids="x")),
                           transport="http", url=url, timeout_s=60.0)  # fmt: skip
        session = open_session(config, None)

        async def read(user: str) -> list[dict[str, Any]]:
            args = {"user_id": user, "offset": 0, "limit": 1000}
            memories: list[dict[str, Any]] = (
                await session.call_tool("list_memories", args)
            ).structured["memories"]
            return memories

        try:
            for user, memories in planted.items():
                await session.call_tool("add_memories", {"user_id": user, "memories": memories})
            before = {user: await read(user) for user in planted}
            target = f'transport = "http"\nurl = "{url}"\nnamespace_by = "argument"\n' + (
                'adopt_namespace = true\ncleanup = "before"')  # fmt: skip
            path = tmp_path / "benchd.toml"
            path.write_text(probe_toml(target, MEM0_TOOLS, fixture=smoke, k="[5]"))
            (probe,) = load_config(path).probes
            runner = ProbeRunner(probe)
            try:
                results = [await runner.run_once() for _ in range(2)]
                await runner.cleanup()  # the shutdown: the lease handed back
            finally:
                await runner.aclose()
            for result in results:
                assert result.outcome == "success", result.error_message
                assert result.seed is not None and result.seed.verified == len(corpus)
            ours = {m["id"] for m in await read("benchd-eval")} - {m["id"] for m in bare}
            assert ours  # the corpus and sentinel stay until the purge
            proc = benchd("purge", "-c", str(path), cwd=tmp_path)
            assert proc.returncode == 0, proc.stdout + proc.stderr
            assert f"left {len(bare)} record(s) benchd did not write" in proc.stdout
            assert {user: await read(user) for user in planted} == before
        finally:
            await session.aclose()


def test_a_write_tool_without_a_namespace_is_refused_saying_why(tmp_path: Path) -> None:
    path = tmp_path / "benchd.toml"
    target = server_memory_stdio(tmp_path / "m.jsonl", rest="")
    path.write_text(probe_toml(target, SERVER_MEMORY_TOOLS))
    proc = benchd("validate", "-c", str(path), cwd=tmp_path)
    assert proc.returncode == 2
    assert "no namespace of its own" in proc.stdout and "namespace_by" in proc.stdout


def benchd(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchd", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        timeout=300,
        env={**os.environ},
    )


def test_validate_check_store_names_the_missing_tool_in_one_line_and_exits_2(
    tmp_path: Path,
) -> None:
    tools = SERVER_MEMORY_TOOLS.replace('name = "search_nodes"', 'name = "search_memories"')
    path = tmp_path / "benchd.toml"
    path.write_text(probe_toml(server_memory_stdio(tmp_path / "m.jsonl"), tools))
    plain = benchd("validate", "-c", str(path), cwd=tmp_path)
    assert plain.returncode == 0, plain.stdout + plain.stderr  # plain validate contacts nothing
    proc = benchd("validate", "-c", str(path), "--check-store", cwd=tmp_path)
    assert proc.returncode == 2
    lines = [line for line in proc.stdout.splitlines() if "search_memories" in line]
    assert len(lines) == 1
    assert "probe mcp: [probe.target.tools.search]: the server has no tool 'search_memories'" in (
        lines[0]
    )
    assert "search_memories" not in proc.stderr  # once: stdout is the report, no log line too
    assert proc.stderr.strip() == "benchd validate: 1 problem in 1 of 2 files"


@pytest.mark.anyio
async def test_a_map_mismatch_fails_the_info_phase_with_one_log_line_per_mismatch(
    tmp_path: Path,
) -> None:
    tools = SERVER_MEMORY_TOOLS.replace('name = "search_nodes"', 'name = "search_memories"')
    tools = tools.replace('entityNames = "', 'names = "')
    config = probe_toml(server_memory_stdio(tmp_path / "m.jsonl"), tools)
    with capture_logs() as logs:
        (result,) = await cycles(config, tmp_path)
    assert result.outcome == "failed" and result.error_kind == "decode"
    assert set(result.phases) == {"info"}  # nothing written, nothing searched
    lines = [e["problem"] for e in logs if e["event"] == "tool map mismatch"]
    assert len(lines) == 3
    assert "no tool 'search_memories'" in lines[0]
    assert "tool 'delete_entities' has no argument 'names'" in lines[1]
    assert "requires argument 'entityNames'" in lines[2]
    assert result.error_message is not None and lines[0] in result.error_message
    assert not (tmp_path / "m.jsonl").exists()


def sdk_stdio(embedder: str, env: dict[str, str] | None = None) -> str:
    argv = sdk_server_argv("--embedder", embedder)
    return stdio_target(argv, env or {}, 'namespace_by = "argument"\ncleanup = "before"')


@pytest.mark.anyio
async def test_the_sdk_server_is_scored_ranked_and_a_dying_server_fails_one_cycle_with_connect(
    tmp_path: Path,
) -> None:
    flag = tmp_path / "die"
    config = probe_toml(
        sdk_stdio("hash:1024", {"MEMSERVER_DIE_FLAG": str(flag)}),
        MEM0_TOOLS,
        fixture=REPO / "fixtures" / "smoke.json",
        k="[5, 10]",
    )
    path = tmp_path / "benchd.toml"
    path.write_text(config)
    (probe,) = load_config(path).probes
    runner = ProbeRunner(probe)
    try:
        first = await runner.run_once()
        flag.touch()  # the next search the server answers is its last
        died = await runner.run_once()
        again = await runner.run_once()
    finally:
        await runner.aclose()
    assert first.outcome == "success", first.error_message
    assert {"mrr@10", "ndcg@10", "map@10", "precision@5"} <= set(first.aggregate)
    assert first.info is not None and first.info.model == "hash:1024"
    assert died.outcome == "failed" and died.error_kind == "connect"
    assert not flag.exists()
    assert again.outcome == "success", again.error_message
    assert again.aggregate == first.aggregate  # a fresh process, seeded again, ranks the same


@pytest.mark.anyio
async def test_a_delete_tool_that_answers_done_but_deletes_nothing_is_caught_by_listing(
    tmp_path: Path,
) -> None:
    target = sdk_stdio("hash:1024", {"MEMSERVER_FAKE_DELETE": "1"}).replace(
        'cleanup = "before"', 'cleanup = "after"'
    )
    config = probe_toml(target, MEM0_TOOLS, fixture=REPO / "fixtures" / "smoke.json")
    path = tmp_path / "benchd.toml"
    path.write_text(config)
    (probe,) = load_config(path).probes
    runner = ProbeRunner(probe)
    try:
        result = await runner.run_once()
        with pytest.raises(TargetProtocolError, match=r"answered success for .* still listed"):
            await runner.cleanup()  # on shutdown: the same delete, the same proof
        leftover = runner.cleanup_failed().leftover
    finally:
        await runner.aclose()
    assert result.outcome == "failed" and result.error_kind == "decode"
    assert result.error_message is not None and "still listed" in result.error_message
    assert leftover == 37  # what benchd wrote and could not delete: the corpus, the sentinel


@pytest.mark.anyio
async def test_a_closed_loop_load_pass_at_c8_has_no_errors(tmp_path: Path) -> None:
    config = probe_toml(
        sdk_stdio("hash:1024"),
        MEM0_TOOLS,
        fixture=REPO / "fixtures" / "smoke.json",
        load='mode = "closed"\nconcurrency = 8\nrequests = 400',
    )
    (result,) = await cycles(config, tmp_path)
    assert result.outcome == "success", result.error_message
    assert result.load is not None
    assert dict(result.load.requests) == {"ok": 400}
    assert result.load.aggregate == pytest.approx(result.aggregate)  # same rankings under load


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("mcp-drift") / "synth.json"
    write_synth(SynthSpec(memories=250, queries=50, seed=3), path)
    return path


def once_json(config: str, cwd: Path, name: str) -> dict[str, Any]:
    path = cwd / f"{name}.toml"
    path.write_text(config)
    proc = benchd("once", "-c", str(path), "--format", "json", cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    document: dict[str, Any] = json.loads(proc.stdout)
    return document


def test_an_embedder_switch_is_flagged_as_drift_with_model_changed_on_the_first_cycle(
    tmp_path: Path, synth: Path
) -> None:
    def config(embedder: str, baseline: str = "") -> str:
        return probe_toml(sdk_stdio(embedder), MEM0_TOOLS, fixture=synth, k="[5, 10]",
                          extra=baseline)

    before = once_json(config("hash:1024"), tmp_path, "before")
    (tmp_path / "before.json").write_text(json.dumps(before))
    out = tmp_path / "baseline.toml"
    saved = benchd("baseline", "save", "--from", "before.json", "--out", str(out), cwd=tmp_path)
    assert saved.returncode == 0, saved.stderr
    after = once_json(config("hash:16", f'baseline = "{out}"'), tmp_path, "after")
    drift = after["probes"][0]["drift"]
    assert drift["baseline"] == "pinned" and not drift["stale"]
    assert drift["detected"] is True and drift["model_changed"] is True
    assert after["probes"][0]["model"] == "hash:16"
    assert drift["change"]["label_changed"] is True
    same = once_json(config("hash:1024", f'baseline = "{out}"'), tmp_path, "same")
    assert same["probes"][0]["drift"]["detected"] is False


def test_the_shipped_tool_maps_load(tmp_path: Path) -> None:
    for name in ("mcp-server-memory.toml", "mcp-mem0-style.toml"):
        config = load_config(REPO / "configs" / name, secrets=False)
        assert config.probes[0].target.kind == "mcp"



@pytest.mark.anyio
async def test_a_tool_answering_is_error_is_counted_as_tool_error_not_as_an_http_status(
    tmp_path: Path,
) -> None:
    argv = sdk_server_argv("--embedder", "hash:64")
    target = stdio_target(argv, {"MEMSERVER_SEARCH_ERROR": "index offline"},
                          'namespace_by = "argument"')  # fmt: skip
    config = probe_toml(target, MEM0_TOOLS, fixture=REPO / "fixtures" / "smoke.json")
    (result,) = await cycles(config, tmp_path)
    assert set(result.errors) == {"tool_error"}, result.errors
    assert result.error_message is not None
    assert result.outcome == "failed" and result.error_kind == "tool_error"
    assert "tool 'search_memories' failed: " in result.error_message
    assert result.error_message.endswith(": index offline")  # the tool's own words
    book = ResultBook()
    book.record(result)
    metrics = generate_latest(build_registry(book)).decode()
    counted = [line for line in metrics.splitlines() if line.startswith("benchd_errors_total{")]
    assert counted and all('kind="tool_error"' in line for line in counted), counted


SET_THRESHOLDS = """
[probe.thresholds.serial]
recall = 0.5
"hit@all" = 0.5
"""


def test_thresholds_on_set_measures_are_checked_against_how_the_probe_answers(
    tmp_path: Path,
) -> None:
    """Set measures (hit, recall, recall_all, precision; ``@all`` as /metrics labels them)
    on a probe answering sets; a rank measure there, or a set one on a ranked probe, is a
    validate error naming the key."""
    unranked = server_memory_stdio(tmp_path / "m.jsonl")
    path = tmp_path / "benchd.toml"
    path.write_text(probe_toml(unranked, SERVER_MEMORY_TOOLS, extra=SET_THRESHOLDS))
    (probe,) = load_config(path).probes
    assert [t.name for t in probe.thresholds] == ["serial:recall>=0.5", "serial:hit>=0.5"]

    path.write_text(probe_toml(unranked, SERVER_MEMORY_TOOLS,
                               extra='[probe.thresholds.serial]\n"recall@10" = 0.5'))  # fmt: skip
    proc = benchd("validate", "-c", str(path), cwd=tmp_path)
    assert proc.returncode == 2
    assert "thresholds.serial.\"recall@10\"" in proc.stdout or "recall@10" in proc.stdout
    assert "answers a set (scored whole): recall@10 is not measured there" in proc.stdout
    assert "use recall (over the whole set)" in proc.stdout

    ranked = sdk_stdio("hash:64")
    path.write_text(probe_toml(ranked, MEM0_TOOLS, extra=SET_THRESHOLDS))
    proc = benchd("validate", "-c", str(path), cwd=tmp_path)
    assert proc.returncode == 2
    assert "recall without @k is the set measure" in proc.stdout
    assert "this probe ranks: write recall@K (k = 10)" in proc.stdout


def test_once_judges_a_set_measure_threshold_on_server_memory(tmp_path: Path) -> None:
    path = tmp_path / "benchd.toml"
    path.write_text(probe_toml(server_memory_stdio(tmp_path / "m.jsonl"), SERVER_MEMORY_TOOLS))
    recall = keyword_set_scores()["recall"]
    kept = benchd("once", "-c", str(path), "--threshold", f"recall@all>={recall - 0.01}",
                  "--fail-under", "hit=0.5", cwd=tmp_path)  # fmt: skip
    assert kept.returncode == 0, kept.stderr
    broken = benchd("once", "-c", str(path), "--threshold", f"recall>{recall}", "--format",
                    "json", cwd=tmp_path)  # fmt: skip
    assert broken.returncode == 1, broken.stderr
    (verdict,) = json.loads(broken.stdout)["probes"][0]["thresholds"]
    assert verdict["name"] == f"serial:recall>{recall:g}" and verdict["breached"]
    assert verdict["value"] == pytest.approx(recall)
    ranked_only = benchd("once", "-c", str(path), "--fail-under", "ndcg@10=0.5", cwd=tmp_path)
    assert ranked_only.returncode == 2
    assert "ndcg@10 is not measured there" in ranked_only.stderr


@pytest.mark.anyio
async def test_a_ranked_server_answering_short_is_counted_and_a_full_one_is_not(
    tmp_path: Path,
) -> None:
    smoke = REPO / "fixtures" / "smoke.json"
    full = probe_toml(sdk_stdio("hash:1024"), MEM0_TOOLS, fixture=smoke, k="[5, 10]")
    short = probe_toml(
        sdk_stdio("hash:1024", {"MEMSERVER_MAX_RESULTS": "3"}), MEM0_TOOLS, fixture=smoke,
        k="[5, 10]",
    )
    (healthy,) = await cycles(full, tmp_path)
    (cut,) = await cycles(short, tmp_path)
    assert healthy.outcome == "success", healthy.error_message
    # room is asked for the sentinel and the lease records: none of them takes a slot
    assert dict(healthy.short_answers) == {"serial": 0}
    assert dict(cut.short_answers) == {"serial": 16}  # every query: 3 of the 10 asked


@pytest.mark.anyio
async def test_a_server_killed_in_the_load_pass_is_connect_never_internal(
    tmp_path: Path,
) -> None:
    config = probe_toml(
        sdk_stdio("hash:1024", {"MEMSERVER_DIE_AFTER": "40"}),  # 16 serial searches first
        MEM0_TOOLS,
        fixture=REPO / "fixtures" / "smoke.json",
        load='mode = "closed"\nconcurrency = 8\nrequests = 200',
    )
    (result,) = await cycles(config, tmp_path)
    assert result.error_kind != "internal", result.error_message
    assert result.load is not None, result.error_message
    requests = dict(result.load.requests)
    assert "internal" not in requests and requests.get("connect", 0) >= 1, requests
    assert sum(requests.values()) == 200
