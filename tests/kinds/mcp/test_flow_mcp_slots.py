"""An MCP server ranking benchd's own records among the results: they cost no slot of k.

The SDK-framework memory server (tests/kinds/mcp/memory_server.py) ranks
every record of the namespace, benchd's sentinel and lease record included.
A query worded like them puts both at the top; the flow asks the server for
k plus those records and still scores k of the corpus.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "mcp"))

from test_mcp_kind import MEM0_TOOLS, REPO, probe_toml, sdk_stdio

from benchd.config.load import load_config
from benchd.probe import ProbeRunner
from benchd.store.target import SearchQuery

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(600)]


async def test_a_ranked_mcp_search_keeps_k_results_of_the_corpus_beside_benchds_records(
    tmp_path: Path,
) -> None:
    smoke = REPO / "fixtures" / "smoke.json"
    config = probe_toml(sdk_stdio("hash:1024"), MEM0_TOOLS, fixture=smoke)
    path = tmp_path / "benchd.toml"
    path.write_text(config)
    (probe,) = load_config(path).probes
    runner = ProbeRunner(probe)
    try:
        result = await runner.run_once()
        assert result.outcome == "success", result.error_message
        ns = probe.target.namespace
        words = (
            f"benchd sentinel record namespace {ns} holds benchd's probe corpus written and "
            f"deleted by benchd only benchd lease namespace {ns} is written by benchd instance"
        )
        flow = runner.target
        got = await flow.search(SearchQuery(q=words, limit=10))
        assert len(got) == 10 and not [i for i in got if i.startswith("benchd-")]
        store = flow.store  # type: ignore[attr-defined]
        assert store.lease_records == 1
        raw = await store.search(flow.asked(SearchQuery(q=words, limit=10)))  # type: ignore[attr-defined]
        # asked 12: the lease record answered and dropped by the kind, the sentinel kept
        assert len(raw.ids) == 11 and raw.ids[0].startswith("benchd-sentinel:")
    finally:
        await runner.aclose()
