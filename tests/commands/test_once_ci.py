"""``benchd once`` as a CI gate: thresholds checked up front, JUnit XML, a TREC run.

Each test runs ``python -m benchd`` as a subprocess against a reference store
on loopback, the way a pipeline would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import junitparser
import pytest

from benchd.refstore.server import RefStoreThread
from benchd.refstore.testing import refstore_fixture

KEY = "once-ci-key-123456789"
ENV = {"CI_KEY": KEY}


def benchd(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchd", *args],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, **(env or {})},
    )  # fmt: skip


store = refstore_fixture("store", scope="module", api_key=KEY, retriever="bm25")


def config_file(
    tmp_path: Path, url: str, *, namespace: str = "benchd-ci", extra: str = "", mode: str = "serial"
) -> Path:
    path = tmp_path / "benchd.toml"
    path.write_text(f"""
[[probe]]
name = "smoke"
fixture = "packaged:smoke"
k = [5, 10]

[probe.target]
kind = "zengram"
url = "{url}"
api_key_env = "CI_KEY"
namespace = "{namespace}"

[probe.load]
mode = "{mode}"
concurrency = 2
requests = 20
{extra}
""")
    return path


DEAD = "http://127.0.0.1:9"  # nothing listens: a cycle that ran would exit 3


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--fail-under", "recal@10=0.5"], "--fail-under 'recal@10=0.5': unknown measure"),
        (["--fail-under", "recall@10=1.5"], "--fail-under 'recall@10=1.5': recall@10 is a ratio"),
        (["--fail-under", "mrr=0.5"], "mrr needs a cut-off"),
        (["--fail-under", "recall=0.5"], "probe smoke: recall without @k is the set measure"),
        (["--fail-under", "p99=0.5"], "p99 is not a ranking measure"),
        (["--threshold", "p99<0"], "--threshold 'p99<0': p99 is a latency in seconds"),
        (["--threshold", "error_ratio<2"], "error_ratio is a ratio in 0..1"),
        (["--threshold", "warm:p99<0.2"], "unknown pass 'warm'"),
        (["--threshold", "p99 = fast"], "--threshold 'p99 = fast': expected"),
        (["--fail-under", "recall@20=0.5"], "probe smoke: the probe measures k = 5, 10, not 20"),
        (["--threshold", "load:p99<0.2"], "probe smoke: the probe has no load pass"),
    ],
)
def test_a_bad_threshold_is_rejected_before_any_cycle(
    tmp_path: Path, flags: list[str], named: str
) -> None:
    proc = benchd("once", "-c", str(config_file(tmp_path, DEAD)), *flags, env=ENV)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert named in proc.stderr
    assert DEAD not in proc.stderr  # the target was never contacted


def test_bad_config_thresholds_name_the_key_and_every_problem(tmp_path: Path) -> None:
    extra = """
[probe.thresholds.serial]
"recall@10" = 1.5
"ndcg@20" = 0.5
p99 = 0.2
[probe.thresholds.load]
error_ratio = 0.01
"""
    path = config_file(tmp_path, DEAD, extra=extra)
    proc = benchd("validate", "-c", str(path), env=ENV)
    assert proc.returncode == 2
    lines = proc.stdout.strip().splitlines()
    assert f'{path}: probe[0].thresholds.serial."recall@10": recall@10 is a ratio' in lines[0]
    assert any('thresholds.serial."ndcg@20": the probe measures k = 5, 10' in x for x in lines)
    assert any("thresholds.load.error_ratio: the probe has no load pass" in x for x in lines)
    assert not any("p99" in x for x in lines)  # the good one is not reported
    once = benchd("once", "-c", str(path), env=ENV)
    assert once.returncode == 2 and once.stderr.count("\n") == 1
    assert "and 2 more problems" in once.stderr


def test_latency_and_error_thresholds_gate_the_exit_code(
    store: RefStoreThread, tmp_path: Path
) -> None:
    path = config_file(tmp_path, store.url, namespace="benchd-ci-gate", mode="closed")
    holds = ["-t", "p99<60", "-t", "error_ratio<=0", "-t", "load:error_ratio<0.5",
             "-t", "load:p99<60", "--fail-under", "hit@10=0.1"]  # fmt: skip
    ok = benchd("once", "-c", str(path), "--format", "json", *holds, env=ENV)
    assert ok.returncode == 0, ok.stderr
    (probe,) = json.loads(ok.stdout)["probes"]
    names = [t["name"] for t in probe["thresholds"]]
    assert names == ["serial:hit@10>=0.1", "serial:p99<60", "serial:error_ratio<=0",
                     "load:error_ratio<0.5", "load:p99<60"]  # fmt: skip
    assert not any(t["breached"] for t in probe["thresholds"])
    assert probe["thresholds"][2]["value"] == 0.0
    slow = benchd("once", "-c", str(path), "-t", "load:p99<1e-9", env=ENV)
    assert slow.returncode == 1, slow.stderr
    assert "threshold breached: probe smoke: load:p99<1e-09: p99 = " in slow.stderr


def test_junit_has_one_case_per_probe_and_threshold(store: RefStoreThread, tmp_path: Path) -> None:
    extra = """
[probe.thresholds.serial]
"recall@10" = 0.1
p99 = 1e-9
"""
    path = config_file(tmp_path, store.url, namespace="benchd-ci-junit", extra=extra)
    proc = benchd("once", "-c", str(path), "--format", "junit", "-t", "error_ratio<0.5", env=ENV)
    assert proc.returncode == 1, proc.stderr  # p99 < 1 ns cannot hold
    report = tmp_path / "report.xml"
    report.write_text(proc.stdout)
    xml = junitparser.JUnitXml.fromfile(str(report))
    (suite,) = list(xml)
    assert suite.name == "smoke"
    assert (suite.tests, suite.failures, suite.errors) == (4, 1, 0)
    cases = {case.name: case for case in suite}
    assert list(cases) == ["cycle", "serial:recall@10>=0.1", "serial:p99<=1e-09",
                           "serial:error_ratio<0.5"]  # fmt: skip
    assert all(case.classname == "benchd.smoke" for case in cases.values())
    assert cases["cycle"].is_passed and cases["serial:recall@10>=0.1"].is_passed
    (failure,) = cases["serial:p99<=1e-09"].result
    assert isinstance(failure, junitparser.Failure) and "needs <= 1e-09" in failure.message
    props = {p.name: p.value for p in suite.properties()}
    assert props["target"] == "zengram" and props["outcome"] == "success"


def test_junit_reports_a_failed_cycle_as_an_error(tmp_path: Path) -> None:
    path = config_file(tmp_path, DEAD)
    proc = benchd("once", "-c", str(path), "--format", "junit", "-t", "p99<1", env=ENV)
    assert proc.returncode == 3
    xml = junitparser.JUnitXml.fromstring(proc.stdout)
    (suite,) = list(xml)
    assert (suite.tests, suite.failures, suite.errors) == (2, 1, 1)
    cycle, threshold = list(suite)
    (error,) = cycle.result
    assert isinstance(error, junitparser.Error) and error.type == "connect"
    (failure,) = threshold.result
    assert "not measured" in failure.message


def _qrels(path: Path) -> None:
    proc = benchd("qrels", "packaged:smoke", "--out", str(path))  # the fixture's judgments
    assert proc.returncode == 0, proc.stderr


# benchd's name for a measure -> trec_eval's
TREC_NAMES = {
    **{f"precision@{k}": f"P_{k}" for k in (5, 10)},
    **{f"recall@{k}": f"recall_{k}" for k in (5, 10)},
    **{f"ndcg@{k}": f"ndcg_cut_{k}" for k in (5, 10)},
    **{f"map@{k}": f"map_cut_{k}" for k in (5, 10)},
    **{f"hit@{k}": f"success_{k}" for k in (5, 10)},
    "rr": "recip_rank",
    "ap": "map",
    "r_precision": "Rprec",
}


def test_trec_run_scores_to_benchds_own_numbers(store: RefStoreThread, tmp_path: Path) -> None:
    namespace = "benchd-ci-trec"
    # A record benchd did not write, in benchd's namespace: adopted, returned, kept as is.
    foreign = {"id": "alien record 7", "content": "ledger database primary port listen",
               "client_id": namespace}  # fmt: skip
    reply = httpx.post(
        f"{store.url}/export/import",
        json={"data": [foreign], "operator_approved": True},
        headers={"x-api-key": KEY},
    )
    assert reply.status_code == 200 and reply.json()["imported"] == 1
    path = config_file(tmp_path, store.url, namespace=namespace)
    args = ["once", "-c", str(path), "--adopt-namespace", namespace]
    trec = benchd(*args, "--format", "trec", env=ENV)
    assert trec.returncode == 0, trec.stderr
    run = tmp_path / "smoke.run"
    run.write_text(trec.stdout)
    lines = [line.split() for line in trec.stdout.splitlines()]
    assert lines and all(len(cols) == 6 and cols[1] == "Q0" for cols in lines)
    assert {cols[5] for cols in lines} == {"smoke"}
    assert "alien%20record%207" in {cols[2] for cols in lines}
    for qid in {cols[0] for cols in lines}:
        topic = [cols for cols in lines if cols[0] == qid]
        ranks = [int(cols[3]) for cols in topic]
        scores = [float(cols[4]) for cols in topic]
        assert ranks == list(range(1, len(topic) + 1))
        assert scores == sorted(set(scores), reverse=True)  # strictly decreasing: no ties
    qrels = tmp_path / "smoke.qrels"
    _qrels(qrels)
    measures = ["-m", "P.5,10", "-m", "recall.5,10", "-m", "ndcg_cut.5,10", "-m", "map_cut.5,10",
                "-m", "success.5,10", "-m", "recip_rank", "-m", "map", "-m", "Rprec"]  # fmt: skip
    scored = benchd("score", "-c", *measures, "--format", "json", str(qrels), str(run))
    assert scored.returncode == 0, scored.stderr
    trec_eval = json.loads(scored.stdout)["all"]
    own = benchd(*args, "--format", "json", env=ENV)
    assert own.returncode == 0, own.stderr
    (probe,) = json.loads(own.stdout)["probes"]
    ranked = {q["id"]: q["ranked_ids"] for q in probe["queries"]}
    by_topic: dict[str, list[str]] = {}
    for cols in lines:
        by_topic.setdefault(cols[0], []).append(cols[2].replace("%20", " "))
    foreign = {"!alien record 7": "alien record 7"}  # benchd's label -> the store's id
    as_returned = {qid: [foreign.get(i, i) for i in ids] for qid, ids in ranked.items() if ids}
    assert by_topic == as_returned  # the same cycle's lists
    for ours, theirs in TREC_NAMES.items():
        assert trec_eval[theirs] == pytest.approx(probe["aggregate"][ours], abs=1e-9), ours


def test_trec_needs_exactly_one_probe(tmp_path: Path) -> None:
    path = config_file(tmp_path, DEAD)
    text = path.read_text()
    second = text.replace('name = "smoke"', 'name = "smoke2"').replace("benchd-ci", "benchd-ci2")
    path.write_text(text + second)
    proc = benchd("once", "-c", str(path), "--format", "trec", env=ENV)
    assert proc.returncode == 2 and "--format trec writes one run" in proc.stderr
