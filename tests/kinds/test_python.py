"""The python target: factories, the wrapped retriever protocol, and the shipped example."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from benchd.config.load import TargetConfig, parse_config
from benchd.errors import ConfigError, TargetProtocolError, TargetUnreachable
from benchd.examples.retrievers import BM25Retriever, TagRetriever
from benchd.fixtures.model import load_fixture, packaged_fixture
from benchd.kinds import build_target
from benchd.kinds.python import PythonConfig, PythonTarget, RetrieverTarget
from benchd.store.owned import owned_id
from benchd.store.target import SearchQuery, Target

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[2]
MEMORIES = [
    {"id": "m-port", "content": "The staging database listens on port 5544.", "tags": ["db"]},
    {"id": "m-deploy", "content": "We deploy every Thursday at 14:00 UTC.", "tags": ["deploy"]},
    {"id": "m-cert", "content": "The payments outage was an expired TLS cert.", "key": "tls-cert"},
]

USER_MODULE = """
class Broken:
    def index(self, memories):
        self.n = len(memories)
    def search(self, q, k):
        if q == "boom":
            raise RuntimeError("index corrupted")
        return "not-a-list" if q == "text" else [{"id": 1}]

class FullTarget:
    async def info(self): ...
    async def seed(self, memories, *, progress=None): ...
    async def search(self, query): return ("x",)
    async def cleanup(self, ids): return 0
    async def aclose(self): ...

CALLS = []

def flaky():
    CALLS.append(1)
    if len(CALLS) == 1:
        raise ConnectionError("first call fails")
    return Broken()

class Shared:
    # a store with records of its own: the corpus is indexed beside them
    private = False
    def __init__(self):
        self.ids = ["m-port"]  # someone else's record under a fixture's id
        self.deleted = []
    def index(self, memories):
        self.ids += [m["id"] for m in memories]
    def search(self, q, k):
        return self.ids[:k]
    def delete(self, ids):
        self.deleted += ids
        return len(ids)

class Private(Shared):
    private = True
    def __init__(self):
        self.ids, self.deleted = [], []

def shared(): return Shared()
def private(): return Private()
def broken(): return Broken()
def full(): return FullTarget()
def nothing(): return 42
NOT_CALLABLE = 3
"""


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """An importable module of odd retrievers; returns its name."""
    (tmp_path / "benchd_test_retrievers.py").write_text(textwrap.dedent(USER_MODULE))
    (tmp_path / "benchd_test_explodes.py").write_text("raise RuntimeError('at import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return "benchd_test_retrievers"


def parse_target(target: dict[str, Any]) -> TargetConfig:
    data = {"probe": [{"name": "p", "fixture": "f.json", "target": {"kind": "python", **target}}]}
    return parse_config(data, file="t.toml", base=Path(".")).probes[0].target


def built(factory: str, **options: Any) -> Target:
    parsed = parse_target({"factory": factory, "options": options})
    return build_target("python", parsed.settings, parsed.secret)


@pytest.mark.parametrize(
    ("factory", "problem"),
    [
        ("benchd.examples.retrievers", "expected 'module:callable'"),
        ("benchd_no_such_module:make", "cannot import module 'benchd_no_such_module'"),
        ("benchd.examples.retrievers:nope", "module 'benchd.examples.retrievers' has no attribute"),
        ("benchd_test_retrievers:NOT_CALLABLE", "is not callable (type int)"),
        ("benchd_test_explodes:f", "raised RuntimeError: at import"),
    ],
)
def test_bad_factories_are_config_errors_naming_the_key(
    user_module: str, factory: str, problem: str
) -> None:
    with pytest.raises(ConfigError) as err:
        parse_target({"factory": factory})
    message = str(err.value)
    assert message.startswith("t.toml: probe[0].target.factory: ")
    assert problem in message and "\n" not in message


def test_unknown_keys_and_options_the_factory_cannot_take_are_config_errors() -> None:
    with pytest.raises(ConfigError, match=r"probe\[0\]\.target\.option: unknown key"):
        parse_target({"factory": "benchd.examples.retrievers:bm25", "option": {}})
    with pytest.raises(ConfigError) as err:
        built("benchd.examples.retrievers:bm25", k3=1.0)
    assert str(err.value) == (
        "t.toml: probe[0].target: options: benchd.examples.retrievers:bm25 cannot take them "
        "(got an unexpected keyword argument 'k3'); its parameters: k1, b"
    )


async def test_a_failing_factory_is_a_target_error_and_is_retried(user_module: str) -> None:
    bad_value = built("benchd.examples.retrievers:bm25", b=2.0)
    with pytest.raises(TargetUnreachable, match=r"factory \(with b\) raised ValueError: need k1"):
        await bad_value.info()
    flaky = built(f"{user_module}:flaky")
    with pytest.raises(TargetUnreachable, match="raised ConnectionError: first call fails"):
        await flaky.seed(MEMORIES)
    assert (await flaky.seed(MEMORIES)).verified == 3  # called again, and it works now
    wrong = built(f"{user_module}:nothing")
    with pytest.raises(TargetProtocolError, match=r"returned an object of type int"):
        await wrong.search(SearchQuery("q", 5))


async def test_a_full_target_is_used_as_it_is(user_module: str) -> None:
    target = built(f"{user_module}:full")
    assert await target.search(SearchQuery("q", 5)) == ("x",)
    assert isinstance(target, PythonTarget)
    assert type(await target.target()).__name__ == "FullTarget"


async def test_a_simple_retriever_is_wrapped_into_a_target() -> None:
    target = built("benchd.examples.retrievers:bm25", k1=1.5, b=0.5)
    report = await target.seed(MEMORIES)
    assert (report.requested, report.imported, report.verified) == (3, 3, 3)
    assert (await target.search(SearchQuery("staging database port", 2)))[0] == "m-port"
    info = await target.info()
    assert (info.kind, info.model) == ("python", "bm25(k1=1.5,b=0.5)")
    assert await target.cleanup(["m-port"]) == 0  # the retriever has no delete()
    await target.aclose()


async def test_a_shared_retriever_gets_benchds_ids_and_a_foreign_result_is_never_mapped(
    user_module: str,
) -> None:
    target = built(f"{user_module}:shared")
    await target.seed(MEMORIES)
    inner = (await target.target()).retriever  # type: ignore[attr-defined]
    assert inner.ids[1:] == [owned_id("benchd-p", m["id"]) for m in MEMORIES]
    ranked = await target.search(SearchQuery("anything", 4))
    assert ranked == ("!m-port", "m-port", "m-deploy", "m-cert")  # its own m-port is not ours
    assert await target.cleanup(["m-port"]) == 1
    assert inner.deleted == [owned_id("benchd-p", "m-port")]


async def test_a_retriever_that_declares_its_store_private_sees_fixture_ids(
    user_module: str,
) -> None:
    target = built(f"{user_module}:private")
    await target.seed(MEMORIES)
    assert await target.search(SearchQuery("anything", 2)) == ("m-port", "m-deploy")


@pytest.mark.parametrize(
    ("q", "problem"),
    [
        ("boom", r"search\(\) raised RuntimeError: index corrupted"),
        ("text", r"search\(\) returned str, expected a list of ids"),
        ("other", r"search\(\) returned an id of type dict"),
    ],
)
async def test_retriever_failures_are_target_errors_naming_the_factory(
    user_module: str, q: str, problem: str
) -> None:
    target = built(f"{user_module}:broken")
    await target.seed(MEMORIES)
    with pytest.raises(TargetProtocolError, match=problem) as err:
        await target.search(SearchQuery(q, 5))
    assert f"python target {user_module}:broken" in str(err.value)


def test_bm25_prefers_rare_terms_and_breaks_ties_by_corpus_order() -> None:
    bm25 = BM25Retriever()
    bm25.index(
        [
            {"id": "common", "content": "service service restart"},
            {"id": "rare", "content": "service kafka restart"},
            {"id": "twin", "content": "service kafka restart"},
            {"id": "none", "content": "nothing relevant"},
        ]
    )
    assert bm25.search("kafka service", 10) == ["rare", "twin", "common"]
    assert bm25.search("kafka service", 1) == ["rare"]
    assert bm25.search("the of", 10) == []


def test_tag_scorer_ranks_tag_matches_above_content_matches() -> None:
    tags = TagRetriever(content_weight=0.1)
    tags.index(
        [
            {"id": "text-only", "content": "postgres tuning notes"},
            {"id": "tagged", "content": "notes", "tags": ["postgres-db"]},
        ]
    )
    assert tags.search("postgres", 10) == ["tagged", "text-only"]
    pure = TagRetriever(content_weight=0.0)
    pure.index([{"id": "text-only", "content": "postgres"}, {"id": "k", "key": "pg-postgres"}])
    assert pure.search("postgres", 10) == ["k"]


def run_benchd(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchd", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_two_retrievers_compared_side_by_side_end_to_end(tmp_path: Path) -> None:
    config = REPO / "configs" / "python-bm25-vs-tags.toml"
    once = run_benchd("once", "-c", str(config), "--format", "json", cwd=tmp_path)
    assert once.returncode == 0, once.stderr
    (tmp_path / "r.json").write_text(once.stdout)
    probes = {p["name"]: p for p in json.loads(once.stdout)["probes"]}
    assert {p["target"] for p in probes.values()} == {"python"}
    compared = run_benchd("compare", "r.json", "--format", "json", cwd=tmp_path)
    assert compared.returncode == 0, compared.stderr
    (pair,) = json.loads(compared.stdout)["pairs"]
    assert (pair["a"], pair["b"]) == ("bm25", "tags")
    assert pair["n"] == len(load_fixture(packaged_fixture("smoke")).queries)
    for side, name in (("a", "bm25"), ("b", "tags")):
        assert pair["metrics"]["recall@5"][side] == pytest.approx(
            probes[name]["aggregate"]["recall@5"]
        )


def test_a_bad_factory_exits_2_with_one_line(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(
        '[[probe]]\nname = "p"\nfixture = "packaged:smoke"\n'
        '[probe.target]\nkind = "python"\nfactory = "benchd.examples.retrievers:bm26"\n'
    )
    result = run_benchd("once", "-c", str(config), cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "probe[0].target.factory" in lines[0]
    assert "has no attribute 'bm26'" in lines[0]


class _Overlapping:
    """Each search waits (bounded) until another search is inside too."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active = 0
        self.most = 0
        self.barrier = threading.Barrier(2, timeout=10)

    def index(self, memories: Any) -> None:
        pass

    def search(self, q: str, k: int) -> list[str]:
        with self.lock:
            self.active += 1
            self.most = max(self.most, self.active)
        self.barrier.wait()
        with self.lock:
            self.active -= 1
        return [q]


async def test_concurrency_bounds_the_retriever_calls_in_flight() -> None:
    retriever = _Overlapping()
    config = PythonConfig(factory="benchd.examples.retrievers:bm25", concurrency=2)
    target = RetrieverTarget(retriever, config)
    async with anyio.create_task_group() as tg:
        for i in range(6):
            tg.start_soon(target.search, SearchQuery(f"q{i}", 5))
    assert retriever.most == 2  # pairs met at the barrier, never a third
