"""Fuzzing with hypothesis: config, fixtures, store answers and the command line.

Inputs are generated from the real key names (taken from the config
dataclasses, so the fuzzer follows the code) with values of every JSON/TOML
type, plus plain garbage. The property is always the same: the input is
accepted, or rejected with a :class:`~benchd.errors.BenchdError` whose message
is one line — never another exception, never a hang. About 10,500 examples
in all, sized to run in under a minute. The regressions the fuzzer found are
pinned as plain tests at the end.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import json
import os
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import anyio
import httpx
import pytest
import tomli_w
from answer_support import parse_answer
from drill_support import write_tiny_fixture
from fake_store import FakeStore
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from listing_support import listed_in

from benchd.cli import main
from benchd.config.load import ServerConfig, _ProbeTable, load_config
from benchd.drift.tracker import DriftSettings
from benchd.errors import BenchdError
from benchd.fixtures.model import load_fixture
from benchd.http import answers as store_answers
from benchd.kinds import TARGET_KINDS, zengram_wire
from benchd.kinds.zengram import ZengramConfig, ZengramTarget
from benchd.load import LoadProfile
from benchd.refstore.server import RefStoreThread
from benchd.refstore.testing import make_config
from benchd.store.target import SearchQuery


def fuzz(examples: int) -> settings:
    """CI-sized settings: a fixed example count, no per-example deadline."""
    return settings(
        max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )


KEY_VAR = "BENCHD_FUZZ_KEY"


def assert_one_line(exc: BaseException) -> None:
    """The contract for every rejection: a BenchdError with a one-line message."""
    assert isinstance(exc, BenchdError), f"{type(exc).__name__}: {exc}"
    message = str(exc)
    assert message and "\n" not in message, repr(message)


@contextlib.contextmanager
def clean_rejection() -> Iterator[None]:
    """Accept success or a clean rejection; tally which (see --hypothesis-show-statistics)."""
    try:
        yield
    except BenchdError as exc:
        event(f"rejected: {type(exc).__name__}")
        assert_one_line(exc)
    else:
        event("accepted")


# --------------------------------------------------------------------------- values

finite = st.floats(allow_nan=False, allow_infinity=False, width=32)
words = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
toml_scalar = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-3, 200),
    st.floats(width=32),
    finite,
    words,
    st.sampled_from(
        [
            "",
            "global",
            "http://127.0.0.1:1",
            "https://[::1]:9/x",
            "127.0.0.1:0",
            ":9108",
            "[::1]:70000",
            "packaged:smoke",
            "packaged:nope",
            "${BENCHD_FUZZ_KEY}",
            "${BENCHD_FUZZ_UNSET}",
            "$$",
            "${",
            KEY_VAR,
            "serial",
            "closed",
            "open",
            "before",
            "after",
            "recall@5",
        ]
    ),
)
toml_value = st.recursive(
    toml_scalar,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(words, inner, max_size=3)),
    max_leaves=6,
)


def table_of(cls: Any, extra: dict[str, st.SearchStrategy[Any]] | None = None) -> Any:
    """Random tables over a few of the dataclass's own keys, sometimes a stray one."""
    names = [f.name for f in dataclasses.fields(cls) if f.init] + ["bogus_key"]
    plain = st.dictionaries(st.sampled_from(names), toml_scalar | toml_value, max_size=4)
    if not extra:
        return plain
    special = st.fixed_dictionaries({}, optional=extra)
    return st.builds(lambda a, b: {**a, **b}, plain, special)


target_table = st.one_of(
    *(
        table_of(kind.settings_type).map(lambda t, name=name: {"kind": name, **t})
        for name, kind in TARGET_KINDS.items()
    ),
    table_of(ZengramConfig).map(
        lambda t: {"kind": "zengram", "url": "http://127.0.0.1:1", "api_key_env": KEY_VAR, **t}
    ),
    toml_value,
)
probe_table = st.one_of(
    table_of(
        _ProbeTable,
        {
            "target": target_table,
            "load": st.one_of(table_of(LoadProfile), toml_value),
            "drift": st.one_of(table_of(DriftSettings), toml_value),
            "fixture": st.sampled_from(["packaged:smoke", "fixture.json", "missing.json", ""]),
            "name": st.one_of(st.sampled_from(["p", "p", "a.b-c", "x" * 65]), words),
        },
    ),
    toml_value,
)
DELETE = object()


def mutate(doc: Any, path: tuple[Any, ...], new: Any) -> Any:
    """A deep copy of ``doc`` with the value at ``path`` replaced (or deleted).

    When an earlier change already replaced a parent of ``path``, ``doc`` is kept.
    """
    copy = json.loads(json.dumps(doc))
    *head, last = path
    node = copy
    for step in head:
        node = node[step] if isinstance(node, dict | list) and _has(node, step) else None
    if not isinstance(node, dict):
        return doc
    if new is DELETE:
        node.pop(last, None)
    else:
        node[last] = new
    return copy


def _has(node: dict[Any, Any] | list[Any], step: Any) -> bool:
    if isinstance(node, list):
        return isinstance(step, int) and step < len(node)
    return step in node


def mutations(base: Any, paths: list[tuple[Any, ...]], values: Any) -> Any:
    """``base`` with one to three of ``paths`` set to random values or deleted."""
    change = st.tuples(st.sampled_from(paths), st.one_of(values, st.just(DELETE)))

    def apply(changes: list[tuple[tuple[Any, ...], Any]]) -> Any:
        doc = base
        for path, new in changes:
            doc = mutate(doc, path, new)
        return doc

    return st.lists(change, min_size=1, max_size=3).map(apply)


def fields_of(cls: Any) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if f.init] + ["bogus_key"]


VALID_CONFIG = {
    "server": {"listen": "127.0.0.1:0", "history": 5},
    "probe": [
        {
            "name": "p",
            "fixture": "fixture.json",
            "k": [1, 3],
            "interval_s": 1.0,
            "timeout_s": 5.0,
            "load": {"mode": "closed", "concurrency": 2, "duration_s": 1.0},
            "drift": {"min_delta": 0.05},
            "target": {"kind": "zengram", "url": "http://127.0.0.1:1", "api_key_env": KEY_VAR},
        }
    ],
}
CONFIG_PATHS = [
    *(("server", k) for k in fields_of(ServerConfig)),
    *(("probe", 0, k) for k in fields_of(_ProbeTable)),
    *(("probe", 0, "target", k) for k in fields_of(ZengramConfig)),
    *(("probe", 0, "load", k) for k in fields_of(LoadProfile)),
    *(("probe", 0, "drift", k) for k in fields_of(DriftSettings)),
]
near_valid_config = mutations(VALID_CONFIG, CONFIG_PATHS, toml_value)
config_doc = near_valid_config | st.fixed_dictionaries(
    {},
    optional={
        "server": st.one_of(table_of(ServerConfig), toml_value),
        "probe": st.one_of(st.lists(probe_table, max_size=3), toml_value),
        "junk": toml_value,
    },
)


def toml_text(doc: dict[str, Any], cut: int | None) -> str:
    text = tomli_w.dumps(doc)
    return text if cut is None else text[: cut % (len(text) + 1)] + "=" + text[cut:]


@fuzz(2000)
@given(doc=config_doc, cut=st.one_of(st.none(), st.none(), st.integers(0, 400)))
def test_any_config_loads_or_fails_with_one_line(doc: Any, cut: Any) -> None:
    path = FILES.config
    path.write_text(toml_text(doc, cut), encoding="utf-8")
    with mock.patch.dict(os.environ, {KEY_VAR: "fuzz-key-0000"}), clean_rejection():
        config = load_config(path)
        assert all(p.name for p in config.probes)


@fuzz(300)
@given(raw=st.binary(max_size=200))
def test_config_bytes_that_are_not_toml_fail_with_one_line(raw: bytes) -> None:
    FILES.config.write_bytes(raw)
    with clean_rejection():
        load_config(FILES.config)


# --------------------------------------------------------------------------- fixtures

json_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(),
    words,
    st.sampled_from(["m1", "m2", "2026-05-01", "2026-13-40", "", "fact"]),
)
json_value = st.recursive(
    json_scalar,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(words, inner, max_size=3)),
    max_leaves=8,
)
ids = st.sampled_from(["m1", "m2", "m3", ""]) | json_scalar
memory = st.fixed_dictionaries(
    {},
    optional={
        "id": ids,
        "content": st.one_of(words, json_value),
        "text": json_value,
        "type": json_value,
        "created_at": json_scalar,
        "tags": json_value,
        "active": json_value,
        "client_id": json_value,
    },
)
query = st.fixed_dictionaries(
    {},
    optional={
        "q": st.one_of(words, json_value),
        "expected_ids": st.one_of(st.lists(ids, max_size=3), json_value),
        "relevance": st.one_of(st.dictionaries(st.sampled_from(["m1", "m2", "x"]), json_scalar)),
        "k": json_scalar,
        "id": json_scalar,
        "category": json_scalar,
        "reference_date": json_scalar,
    },
)
VALID_FIXTURE = {
    "memories": [{"id": f"m{i}", "content": f"memory number {i}"} for i in range(3)],
    "queries": [
        {"q": "first", "expected_ids": ["m0"]},
        {"q": "second", "relevance": {"m1": 2, "m2": 1}, "k": 5, "category": "c"},
    ],
}
MEMORY_KEYS = ["id", "content", "text", "type", "created_at", "tags", "active", "importance"]
QUERY_KEYS = ["q", "expected_ids", "relevance", "k", "id", "category", "reference_date"]
FIXTURE_PATHS = [
    *((top,) for top in ("memories", "queries", "reference_date", "_comment", "name")),
    *(("memories", i, k) for i in range(3) for k in MEMORY_KEYS),
    *(("queries", i, k) for i in range(2) for k in QUERY_KEYS),
]
fixture_doc = mutations(VALID_FIXTURE, FIXTURE_PATHS, json_value) | st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "memories": st.one_of(st.lists(memory, max_size=4), json_value),
            "queries": st.one_of(st.lists(query, max_size=4), json_value),
            "reference_date": json_scalar,
            "_comment": json_value,
        },
    ),
    json_value,
)
jsonl_line = st.one_of(
    memory.map(lambda m: {"memory": m}),
    query.map(lambda q: {"query": q}),
    json_value.map(lambda v: {"fixture": v}),
    json_value,
)


def dumps(value: Any) -> str:
    return json.dumps(value, allow_nan=True)


@fuzz(1500)
@given(doc=fixture_doc, garbage=st.one_of(st.none(), st.none(), st.binary(max_size=40)))
def test_any_json_fixture_loads_or_fails_with_one_line(doc: Any, garbage: bytes | None) -> None:
    data = dumps(doc).encode()
    FILES.fixture.write_bytes(data if garbage is None else data[: len(garbage)] + garbage)
    with clean_rejection():
        fixture = load_fixture(FILES.fixture)
        assert fixture.queries and all(q.expected_ids for q in fixture.queries)


@fuzz(1000)
@given(lines=st.lists(jsonl_line.map(dumps) | words, max_size=6))
def test_any_jsonl_fixture_loads_or_fails_with_one_line(lines: list[str]) -> None:
    FILES.jsonl.write_text("\n".join(lines), encoding="utf-8")
    with clean_rejection():
        load_fixture(FILES.jsonl)


# --------------------------------------------------------------------------- store answers

TARGET = ZengramTarget(ZengramConfig(url="http://127.0.0.1:1"), None)
result_item = st.one_of(
    st.fixed_dictionaries({"id": json_scalar}, optional={"effective_score": json_value}),
    json_value,
)
search_body = st.one_of(
    st.fixed_dictionaries(
        {}, optional={"results": st.one_of(st.lists(result_item, max_size=4), json_value)}
    ).map(dumps),
    json_value.map(dumps),
).map(str.encode) | st.binary(max_size=64)
statuses = st.sampled_from([200, 200, 200, 201, 204, 301, 400, 401, 403, 404, 429, 500, 503])
headers = st.fixed_dictionaries({}, optional={"retry-after": st.one_of(words, st.just("2"))})


@fuzz(3500)
@given(status=statuses, head=headers, body=search_body)
def test_any_search_answer_parses_or_fails_with_one_line(
    status: int, head: Any, body: bytes
) -> None:
    with clean_rejection():
        ranked = parse_answer(TARGET, status, head, body)
        assert all(isinstance(i, str) for i in ranked)


def export_page(records: Any, has_more: Any) -> Any:
    return {"memories": records, "has_more": has_more, "total": 3}


counts_body = st.one_of(
    st.fixed_dictionaries(
        {}, optional={"imported": json_scalar, "skipped": json_scalar, "errors": json_scalar}
    ),
    json_value,
)
export_body = st.one_of(
    st.builds(export_page, st.lists(memory, max_size=3) | json_value, json_scalar),
    json_value,
)
raw_or = st.one_of  # a JSON document or bytes that are not one


def encoded(doc: st.SearchStrategy[Any]) -> st.SearchStrategy[bytes]:
    return raw_or(doc.map(dumps).map(str.encode), st.binary(max_size=32))


@dataclasses.dataclass(frozen=True)
class Answers:
    """What the fake store answers, per route (status, body)."""

    health: tuple[int, bytes]
    export: tuple[int, bytes]
    imports: tuple[int, bytes]
    search: tuple[int, bytes]
    delete: tuple[int, bytes]

    def respond(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        route = {
            "/health": self.health,
            "/export": self.export,
            "/export/import": self.imports,
            "/memory/search": self.search,
        }.get(path, self.delete)
        return httpx.Response(route[0], content=route[1])


def answer(body: st.SearchStrategy[bytes]) -> st.SearchStrategy[tuple[int, bytes]]:
    return st.tuples(statuses, body)


answers = st.builds(
    Answers,
    health=answer(encoded(json_value)),
    export=answer(encoded(export_body)),
    imports=answer(encoded(counts_body)),
    search=answer(search_body),
    delete=answer(encoded(json_value)),
)
MEMORIES = [{"id": "m1", "content": "alpha"}, {"id": "m2", "content": "beta"}]


CURRENT: list[Answers] = []  # what the fake store answers right now


def _respond(request: httpx.Request) -> httpx.Response:
    return CURRENT[-1].respond(request)


def targets() -> dict[str, ZengramTarget]:
    """One adapter per cleanup mode, built once: an httpx client costs an SSL context.

    Each takes the fuzzer's answers from a fake store, over benchd's own pool.
    """
    return {
        mode: ZengramTarget(
            ZengramConfig(
                url="http://store.test",
                max_retries=0,
                cleanup=mode,  # type: ignore[arg-type]
                searchable_timeout_s=0.01,
            ),
            None,
            connect=FakeStore(_respond),
        )
        for mode in ("before", "after", "never")
    }


TARGETS = targets()


async def drive(answers: Answers, cleanup: str) -> None:
    target = TARGETS[cleanup]
    target.namespace.fixture_ids.clear()
    CURRENT[:] = [answers]
    for step in (
        target.info,
        lambda: target.seed(MEMORIES),
        lambda: target.search(SearchQuery(q="alpha", limit=5)),
        lambda: target.cleanup(["m1", "m2"]),
    ):
        with clean_rejection(), anyio.fail_after(5):
            await step()


@fuzz(1200)
@given(answers=answers, cleanup=st.sampled_from(["before", "after", "never"]))
def test_any_store_answers_to_seed_and_cleanup_fail_with_one_line(
    answers: Answers, cleanup: str
) -> None:
    anyio.run(drive, answers, cleanup)


# --------------------------------------------------------------------------- the answer decoder

nested = st.integers(0, 1500).map(lambda n: b'{"results":' + b"[" * n + b"]" * n + b"}")
objects = st.integers(0, 1500).map(lambda n: b'{"a":' * n + b"1" + b"}" * n)
many_ids = st.integers(0, 3000).map(
    lambda n: dumps({"results": [{"id": i} for i in range(n)]}).encode()
)
answer_bytes = st.one_of(
    search_body,
    nested,
    objects,
    many_ids,
    st.tuples(search_body, st.integers(0, 200)).map(lambda t: t[0][: t[1]]),  # cut short
)


@fuzz(1500)
@given(body=answer_bytes, limit=st.integers(-2, 12))
def test_the_answer_decoder_bounds_depth_and_cuts_results_to_the_limit(
    body: bytes, limit: int
) -> None:
    with clean_rejection():
        ranked = parse_answer(TARGET, 200, {}, body, limit=limit)
        assert len(ranked) <= max(limit, 0) and all(isinstance(i, str) for i in ranked)


@fuzz(300)
@given(levels=st.integers(1, 1500), objects=st.booleans())
def test_nesting_past_max_depth_is_a_decode_error_at_any_depth(levels: int, objects: bool) -> None:
    body = b'{"a":' * levels + b"1" + b"}" * levels if objects else b"[" * levels + b"]" * levels
    try:
        store_answers.loads(body, "GET /health")
    except BenchdError as exc:
        assert_one_line(exc)
        assert levels > store_answers.MAX_DEPTH and "deeper than 64" in str(exc)
    else:
        assert levels <= store_answers.MAX_DEPTH


count_value = st.one_of(json_scalar, st.integers(-5, 8), st.just(10**30), st.just(1e30))


@fuzz(800)
@given(
    counts=st.fixed_dictionaries(
        {}, optional={"imported": count_value, "skipped": count_value, "errors": count_value}
    ),
    sent=st.integers(0, 6),
)
def test_import_counts_are_non_negative_integers_never_above_what_was_sent(
    counts: dict[str, Any], sent: int
) -> None:
    reduce = functools.partial(zengram_wire.import_counts, sent, "POST /export/import")
    with clean_rejection():
        got = store_answers.reduced(dumps(counts).encode(), "POST /export/import", reduce)
        assert all(isinstance(n, int) and n >= 0 for n in got) and sum(got) <= sent


@fuzz(500)
@given(
    page=st.one_of(st.lists(memory, max_size=8), json_value),
    more=json_scalar,
    size=st.integers(0, 5),
)
def test_an_export_page_is_cut_to_the_page_size_asked_for(page: Any, more: Any, size: int) -> None:
    reduce = functools.partial(zengram_wire.export_page, size, "GET /export")
    with clean_rejection():
        body = dumps(export_page(page, more)).encode()
        records, _ = store_answers.reduced(body, "GET /export", reduce)
        assert len(records) <= size and all(isinstance(r, dict) for r in records)


# --------------------------------------------------------------------------- command line

SAFE_COMMANDS = ("validate", "score", "qrels", "convert", "synth", "baseline", "compare", "init")
FLAGS = [
    "--help", "-h", "--config", "-c", "--format", "--output", "-o", "--probe", "--force",
    "--fail-under", "--seed", "--memories", "--queries", "-k", "--k", "--from", "--split",
    "--json", "--quiet", "--", "-", "show", "save", "trec", "beir", "cranfield",
    "longmemeval",
]  # fmt: skip


def arg_values() -> st.SearchStrategy[str]:
    names = ["cfg.toml", "fixture.json", "fixture.jsonl", "qrels.txt", "missing", ".", "out"]
    return st.one_of(
        st.sampled_from(FLAGS),
        st.sampled_from(names),
        st.integers(-2, 10**6).map(str),
        st.sampled_from(["recall@5=0.5", "x=y", "1e309", "nan", "-1", "0"]),
        words,
    )


# An operating system cannot pass a NUL byte inside an argument; everything else goes.
argv = st.tuples(
    st.sampled_from(SAFE_COMMANDS),
    st.lists(arg_values().filter(lambda a: "\x00" not in a), max_size=6),
).map(lambda t: [t[0], *t[1]])


@fuzz(1000)
@given(args=argv)
def test_the_cli_exits_with_a_documented_code_never_a_traceback(args: list[str]) -> None:
    err, out = io.StringIO(), io.StringIO()
    with (
        contextlib.chdir(FILES.folder),
        contextlib.redirect_stderr(err),
        contextlib.redirect_stdout(out),
        mock.patch.dict(os.environ, {KEY_VAR: "fuzz-key-0000"}),
    ):
        try:
            code: int | str | None = main(args)
        except SystemExit as exc:  # argparse: --help/--version (0) or a usage error (2)
            code = exc.code
    assert code in (0, 1, 2, 3), (args, code, err.getvalue()[-500:])
    assert "Traceback" not in err.getvalue() and "internal error" not in err.getvalue()
    assert len([ln for ln in err.getvalue().splitlines() if ln.startswith("benchd: error")]) <= 1


# --------------------------------------------------------------------------- files


@dataclasses.dataclass
class Files:
    """One scratch folder for every example (hypothesis re-runs a test many times)."""

    folder: Path = Path()

    @property
    def config(self) -> Path:
        return self.folder / "cfg.toml"

    @property
    def fixture(self) -> Path:
        return self.folder / "fixture.json"

    @property
    def jsonl(self) -> Path:
        return self.folder / "fixture.jsonl"


FILES = Files()


@pytest.fixture(autouse=True, scope="module")
def _scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    FILES.folder = tmp_path_factory.mktemp("fuzz")
    write_tiny_fixture(FILES.folder / "fixture.json")
    (FILES.folder / "qrels.txt").write_text("1 0 m1 1\n")
    yield


# --------------------------------------------------------------------------- regressions


def test_a_config_key_with_a_newline_is_quoted_in_the_one_line_error() -> None:
    FILES.config.write_text('[server.listen]\n"a\\nb" = "${BENCHD_FUZZ_UNSET}"\n')
    with pytest.raises(BenchdError) as caught:
        load_config(FILES.config)
    assert_one_line(caught.value)
    assert 'server.listen."a\\nb": ${BENCHD_FUZZ_UNSET} is not set' in str(caught.value)


def test_a_path_holding_a_line_break_is_escaped_in_the_one_line_error() -> None:
    """Found by the config fuzzer (web_config = "\\n"): the path is a valid file name."""
    probe = '[[probe]]\nname = "p"\nfixture = "packaged:smoke"\n[probe.target]\n'
    probe += 'kind = "zengram"\nurl = "http://127.0.0.1:1"\n'
    FILES.config.write_text('[server]\nweb_config = "\\n"\n' + probe)
    with pytest.raises(BenchdError) as caught:
        load_config(FILES.config)
    assert_one_line(caught.value)
    assert f"{FILES.folder}/\\n: cannot read web config" in str(caught.value)
    # a value from the environment stays hidden, escaped as it is
    FILES.config.write_text(probe + 'api_key_file = "${BENCHD_FUZZ_FILE}"\n')
    env = {"BENCHD_FUZZ_FILE": "private\nkey"}
    with mock.patch.dict(os.environ, env), pytest.raises(BenchdError) as caught:
        load_config(FILES.config)
    assert_one_line(caught.value)
    assert "private" not in str(caught.value) and "${BENCHD_FUZZ_FILE}" in str(caught.value)


def test_a_redirect_with_a_non_ascii_retry_after_is_a_redirect_error() -> None:
    with pytest.raises(BenchdError) as caught:
        parse_answer(TARGET, 301, {"Retry-After": "\udc80"}, b"{}", what="GET /s")
    assert_one_line(caught.value)
    assert caught.value.kind == "redirect"  # type: ignore[attr-defined]


def test_an_export_that_pages_forever_is_a_decode_error_not_a_hang() -> None:
    page = dumps(export_page([{"id": "m1", "content": "a"}], True)).encode()
    stuck = Answers(
        health=(200, b"{}"), export=(200, page), imports=(200, b"{}"),
        search=(200, b"{}"), delete=(200, b"{}"),
    )  # fmt: skip

    async def export() -> None:
        target = TARGETS["never"]
        CURRENT[:] = [stuck]
        with anyio.fail_after(5):
            await listed_in(target)

    with pytest.raises(BenchdError, match="has_more is true but the page at offset 1") as caught:
        anyio.run(export)
    assert_one_line(caught.value)


def test_a_nul_character_anywhere_in_a_config_is_a_one_line_error() -> None:
    FILES.config.write_text('[server]\nweb_config = "web\\u0000.toml"\n')
    with pytest.raises(BenchdError, match=r"server.web_config: contains a NUL") as caught:
        load_config(FILES.config)
    assert_one_line(caught.value)


# --------------------------------------------------------------------------- validate, then run

edge_number = st.one_of(
    st.sampled_from([0, 1, -1, 2, 3, 100, 101, 500, 501, 2**31, 2**53, 2**62, 2**63 - 1]),
    st.sampled_from([-(2**63), 0.0, 1e-300, 0.001, 0.5, 1.5, 1e6, 1e9, -1e9]),
    st.integers(-5, 1000),
    st.floats(-1e9, 1e9, allow_nan=False),
)
edge_value = st.one_of(edge_number, edge_number, toml_scalar, toml_value)
FIXTURE_EDGE = st.one_of(json_scalar, st.sampled_from([10**6, 2**53, 1e308, -(2**53), 1000]))


@pytest.fixture(scope="module")
def refstore() -> Iterator[RefStoreThread]:
    with RefStoreThread(make_config(api_key="fuzz-refstore-key-7e1a")) as store:
        yield store


def _main(*args: str) -> int:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        return main(list(args))


edge_int = st.one_of(
    st.sampled_from([0, 1, -1, 2, 3, 100, 101, 500, 501, 2**31, 2**53, 2**62, 2**63 - 1, -(2**63)]),
    st.integers(-5, 1000),
)
edge_float = st.one_of(
    edge_int,
    st.sampled_from([0.0, 1e-300, 0.001, 0.5, 1.5, 1e6, 1e9, -1e9, 5e-324]),
    st.floats(-1e9, 1e9, allow_nan=False),
)


def typed_values(tp: Any) -> st.SearchStrategy[Any]:
    """Values of a field's own type, at the edges: what a careful user might still write."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (types.UnionType, typing.Union):
        return st.one_of(*(typed_values(a) for a in args if a is not type(None)))
    if origin is typing.Literal:
        return st.sampled_from(args)
    if origin is tuple:
        return st.lists(typed_values(args[0]), min_size=0, max_size=3)
    if tp is bool:
        return st.booleans()
    if tp is int:
        return edge_int
    if tp is float:
        return edge_float
    if tp is str:
        return st.one_of(words, st.sampled_from(["", "x", "recall", "global"]))
    return toml_scalar


def run_paths() -> list[tuple[tuple[Any, ...], st.SearchStrategy[Any]]]:
    tables = [
        (("probe", 0), _ProbeTable),
        (("probe", 0, "target"), ZengramConfig),
        (("probe", 0, "load"), LoadProfile),
        (("probe", 0, "drift"), DriftSettings),
    ]
    out = []
    for prefix, cls in tables:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if f.init and not dataclasses.is_dataclass(hints[f.name]):
                out.append(((*prefix, f.name), typed_values(hints[f.name])))
    return out


RUN_PATHS = [
    (path, values)
    for path, values in run_paths()
    if path[-1] not in ("name", "fixture", "target", "url", "api_key_env", "api_key_file")
]


def typed_mutations(base: Any) -> Any:
    change = st.sampled_from(RUN_PATHS).flatmap(lambda pv: st.tuples(st.just(pv[0]), pv[1]))

    def apply(changes: list[tuple[tuple[Any, ...], Any]]) -> Any:
        doc = base
        for path, new in changes:
            doc = mutate(doc, path, new)
        return doc

    return st.lists(change, min_size=1, max_size=3).map(apply)


@fuzz(150)
@given(
    doc=st.one_of(typed_mutations(VALID_CONFIG), mutations(VALID_CONFIG, CONFIG_PATHS, edge_value)),
    fixture=st.one_of(
        *[st.just(VALID_FIXTURE)] * 3, mutations(VALID_FIXTURE, FIXTURE_PATHS, FIXTURE_EDGE)
    ),
)
def test_whatever_validate_accepts_once_runs_without_a_crash(
    refstore: RefStoreThread, doc: Any, fixture: Any
) -> None:
    """validate means run will work: an accepted config never makes ``once`` exit 2 or 4.

    Configs and fixtures one to three edits away from valid ones (edge numbers,
    wrong types, stray keys) run against the reference store. Whatever
    ``validate`` accepts, ``once`` ends in 0, 1 or 3 — never 4 (a bug), never 2
    (an input validate should have rejected). ``timeout_s`` is held at 3 s so
    that a load pass of 10^9 seconds ends in a cycle timeout, not a long test.
    """
    probe = doc["probe"][0] if isinstance(doc.get("probe"), list) and doc["probe"] else None
    if isinstance(probe, dict):
        probe["timeout_s"] = 3.0
        if (
            isinstance(probe.get("target"), dict)
            and probe["target"].get("url") == "http://127.0.0.1:1"
        ):
            probe["target"]["url"] = refstore.url
    FILES.config.write_text(tomli_w.dumps(doc), encoding="utf-8")
    (FILES.folder / "fixture.json").write_text(dumps(fixture), encoding="utf-8")
    with mock.patch.dict(os.environ, {KEY_VAR: refstore.api_key}):
        checked = _main("validate", "--config", str(FILES.config))
        assert checked in (0, 2), f"validate exited {checked}"
        event(f"validate exit {checked}")

        if checked != 0:
            return
        code = _main("once", "--config", str(FILES.config))
    event(f"once exit {code}")
    assert code in (0, 1, 3), f"validate accepted it, but once exited {code}"
