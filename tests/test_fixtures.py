"""Fixture loading and validation: the target API's format, benchd's extensions, every problem."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from benchd.errors import FixtureError
from benchd.fixtures import (
    PACKAGED_FIXTURES,
    check_fixture,
    fixture_name,
    load_fixture,
    packaged_fixture,
    validate_fixture,
    write_fixture,
)

REPO = Path(__file__).resolve().parents[1]
ZENGRAM_SMOKE = REPO.parent / "shared" / "fixtures-external" / "zengram-smoke.json"

Doc = dict[str, Any]


def base_doc() -> Doc:
    """A small valid fixture every problem test starts from."""
    return {
        "_comment": "ignored",
        "memories": [
            {"id": "m1", "type": "fact", "content": "The staging database runs on port 5544."},
            {"id": "m2", "type": "fact", "content": "The production database runs on port 5432."},
            {
                "id": "m3",
                "type": "event",
                "text": "Deployed ledger-api 7.4 on Tuesday.",
                "created_at": "2026-06-09T15:00:00Z",
                "tags": ["deploy"],
                "importance": "low",
            },
        ],
        "queries": [
            {"q": "staging database port", "expected_ids": ["m1"], "k": 5},
            {"q": "database ports", "relevance": {"m1": 2, "m2": 1, "m3": 0}, "category": "x"},
        ],
    }


def write_json(tmp_path: Path, doc: object, name: str = "fx.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def write_jsonl(tmp_path: Path, lines: list[object], name: str = "fx.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- the target's format


@pytest.mark.skipif(not ZENGRAM_SMOKE.exists(), reason="../shared/fixtures-external absent")
def test_target_api_fixture_loads_unchanged() -> None:
    raw = json.loads(ZENGRAM_SMOKE.read_text(encoding="utf-8"))
    fixture = load_fixture(ZENGRAM_SMOKE)
    assert [dict(m) for m in fixture.memories] == raw["memories"]
    assert [q.q for q in fixture.queries] == [q["q"] for q in raw["queries"]]
    assert [q.expected_ids for q in fixture.queries] == [
        tuple(q["expected_ids"]) for q in raw["queries"]
    ]
    assert [q.k for q in fixture.queries] == [q.get("k") for q in raw["queries"]]
    assert fixture.name == "zengram-smoke"


def test_memories_pass_through_with_every_field(tmp_path: Path) -> None:
    doc = base_doc()
    doc["memories"][0]["custom_field"] = {"nested": [1, 2]}
    fixture = load_fixture(write_json(tmp_path, doc))
    assert [dict(m) for m in fixture.memories] == doc["memories"]


def test_memory_without_id_gets_a_content_derived_id(tmp_path: Path) -> None:
    doc = base_doc()
    del doc["memories"][2]["id"]
    del doc["queries"][1]["relevance"]["m3"]
    first = load_fixture(write_json(tmp_path, doc, "a.json")).memories[2]["id"]
    doc["memories"].reverse()  # position does not matter, content does
    doc["queries"] = [{"q": "deploy", "expected_ids": [first]}]
    again = load_fixture(write_json(tmp_path, doc, "b.json"))
    assert again.memories[0]["id"] == first
    assert first.startswith("m-")
    assert "id" not in doc["memories"][0]  # the input record is not mutated


def test_reference_date_is_inherited_unless_the_query_sets_its_own(tmp_path: Path) -> None:
    doc = base_doc()
    doc["reference_date"] = "2026-06-15"
    doc["queries"][1]["reference_date"] = "2026-04-12"
    fixture = load_fixture(write_json(tmp_path, doc))
    assert fixture.reference_date == "2026-06-15"
    assert [q.reference_date for q in fixture.queries] == ["2026-06-15", "2026-04-12"]


def test_expected_ids_mean_grade_one_and_relevance_keeps_grades(tmp_path: Path) -> None:
    fixture = load_fixture(write_json(tmp_path, base_doc()))
    assert dict(fixture.queries[0].relevance) == {"m1": 1}
    assert dict(fixture.queries[1].relevance) == {"m1": 2, "m2": 1, "m3": 0}
    assert fixture.queries[1].expected_ids == ("m1", "m2")


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("fixtures/smoke.json", "smoke"),
        ("Data/My Corpus v2.JSONL", "my_corpus_v2"),
        ("x/---.json", "fixture"),
        ("x/" + "a" * 100 + ".json", "a" * 64),
    ],
)
def test_fixture_name_is_a_bounded_label(path: str, name: str) -> None:
    assert fixture_name(path) == name


# --------------------------------------------------------------------------- query ids


def test_derived_query_ids_do_not_depend_on_position(tmp_path: Path) -> None:
    doc = base_doc()
    ids = [q.id for q in load_fixture(write_json(tmp_path, doc, "a.json")).queries]
    doc["queries"].insert(0, {"q": "a new first query", "expected_ids": ["m2"]})
    moved = [q.id for q in load_fixture(write_json(tmp_path, doc, "b.json")).queries]
    assert moved[1:] == ids
    assert len(set(moved)) == 3


def test_repeated_query_text_gets_deterministic_suffixes(tmp_path: Path) -> None:
    doc = base_doc()
    doc["queries"] = [{"q": "same", "expected_ids": ["m1"]} for _ in range(3)]
    ids = [q.id for q in load_fixture(write_json(tmp_path, doc)).queries]
    assert ids[1:] == [f"{ids[0]}-2", f"{ids[0]}-3"]


def test_explicit_query_ids_are_kept_and_derived_ids_avoid_them(tmp_path: Path) -> None:
    doc = base_doc()
    derived = load_fixture(write_json(tmp_path, doc, "a.json")).queries[0].id
    doc["queries"][1]["id"] = derived  # an explicit id taking the derived one
    ids = [q.id for q in load_fixture(write_json(tmp_path, doc, "b.json")).queries]
    assert ids == [f"{derived}-2", derived]


# --------------------------------------------------------------------------- content hash


def test_content_hash_ignores_key_order_and_file_format(tmp_path: Path) -> None:
    doc = base_doc()
    reordered = copy.deepcopy(doc)
    reordered["memories"] = [dict(reversed(list(m.items()))) for m in doc["memories"]]
    reordered["queries"] = [dict(reversed(list(q.items()))) for q in doc["queries"]]
    a = load_fixture(write_json(tmp_path, doc, "a.json"))
    b = load_fixture(write_json(tmp_path, reordered, "b.json"))
    write_fixture(a, tmp_path / "c.jsonl")
    c = load_fixture(tmp_path / "c.jsonl")
    assert a.content_hash == b.content_hash == c.content_hash


def test_content_hash_treats_expected_ids_as_grade_one_relevance(tmp_path: Path) -> None:
    doc = base_doc()
    graded = copy.deepcopy(doc)
    graded["queries"][0] = {"q": "staging database port", "relevance": {"m1": 1}, "k": 5}
    a = load_fixture(write_json(tmp_path, doc, "a.json"))
    b = load_fixture(write_json(tmp_path, graded, "b.json"))
    assert a.content_hash == b.content_hash


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d["memories"][0].update(content="The staging database runs on port 5545."),
        lambda d: d["queries"][0].update(k=10),
        lambda d: d["queries"][1]["relevance"].update(m2=2),
        lambda d: d.update(reference_date="2026-01-01"),
    ],
)
def test_content_hash_changes_when_meaning_changes(
    tmp_path: Path, change: Callable[[Doc], None]
) -> None:
    doc = base_doc()
    before = load_fixture(write_json(tmp_path, doc, "a.json")).content_hash
    change(doc)
    assert load_fixture(write_json(tmp_path, doc, "b.json")).content_hash != before


# --------------------------------------------------------------------------- JSON Lines


def test_jsonl_round_trip_keeps_everything(tmp_path: Path) -> None:
    doc = base_doc()
    doc["reference_date"] = "2026-06-15"
    doc["queries"][0]["reference_date"] = "2026-05-01"
    original = load_fixture(write_json(tmp_path, doc, "corpus.json"))
    write_fixture(original, tmp_path / "corpus.jsonl")
    loaded = load_fixture(tmp_path / "corpus.jsonl")
    assert loaded.memories == original.memories
    assert loaded.queries == original.queries
    assert loaded.reference_date == original.reference_date
    assert loaded.content_hash == original.content_hash
    assert loaded.name == "corpus"


def test_jsonl_skips_blank_lines_and_reads_the_meta_line(tmp_path: Path) -> None:
    path = tmp_path / "fx.jsonl"
    path.write_text(
        '{"fixture": {"reference_date": "2026-06-15", "_comment": "x"}}\n\n'
        '{"memory": {"id": "a", "content": "alpha"}}\n   \n'
        '{"query": {"q": "alpha", "expected_ids": ["a"]}}\n',
        encoding="utf-8",
    )
    fixture = load_fixture(path)
    assert fixture.reference_date == "2026-06-15"
    assert fixture.queries[0].reference_date == "2026-06-15"


def test_jsonl_problems_name_the_line(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path,
        [
            {"memory": {"id": "a", "content": "alpha"}},
            {"memory": {"id": "a", "content": "beta"}},
            {"query": {"q": "alpha", "expected_ids": ["a", "nope"], "k": 0}},
            {"fixture": {}},
            {"memory": {}, "query": {}},
            [1, 2],
        ],
    )
    problems = validate_fixture(path)
    f = str(path)
    assert f'{f}:2: $.memory.id: duplicate id "a" (first at line 1)' in problems[0]
    assert any(p.startswith(f"{f}:3: $.query.k: 0 is not a positive integer") for p in problems)
    assert any(p.startswith(f'{f}:3: $.query.expected_ids[1]: "nope"') for p in problems)
    assert any(p.startswith(f"{f}:4: $.fixture: ") and "first line" in p for p in problems)
    assert any(p.startswith(f"{f}:5: $: expected exactly one key") for p in problems)
    assert any(p.startswith(f"{f}:6: $: expected an object") for p in problems)
    assert len(problems) == 6


def test_jsonl_invalid_line_reports_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "fx.jsonl"
    path.write_bytes(
        b'{"memory": {"id": "a", "content": "alpha"}}\n{"query": {"q": }\n\xff\xfe\n'
        b'{"query": {"q": "alpha", "expected_ids": ["a"]}}\n'
    )
    problems = validate_fixture(path)
    assert problems[0].startswith(f"{path}:2:17: invalid JSON: ")
    assert problems[1].startswith(f"{path}:3: not UTF-8 text")
    assert len(problems) == 2


def test_jsonl_without_queries_or_memories_is_reported(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path, [{"memory": {"id": "a", "content": "alpha"}}])
    assert validate_fixture(path) == [
        f'{path}: no query lines; add at least one {{"query": {{...}}}} line'
    ]


# --------------------------------------------------------------------------- every problem kind

PROBLEMS: list[tuple[str, Callable[[Doc], None], str]] = [
    (
        "duplicate memory id",
        lambda d: d["memories"][1].update(id="m1"),
        '$.memories[1].id: duplicate id "m1" (first at $.memories[0]); give each memory',
    ),
    (
        "unknown expected id",
        lambda d: d["queries"][0].update(expected_ids=["m1", "zz"]),
        '$.queries[0].expected_ids[1]: "zz" is not the id of any memory; fix the id',
    ),
    (
        "unknown graded id",
        lambda d: d["queries"][1]["relevance"].update(zz=1),
        '$.queries[1].relevance["zz"]: "zz" is not the id of any memory',
    ),
    (
        "empty expected_ids",
        lambda d: d["queries"][0].update(expected_ids=[]),
        "$.queries[0].expected_ids: no relevant ids; give a non-empty",
    ),
    (
        "no judgments at all",
        lambda d: d["queries"][0].pop("expected_ids"),
        "$.queries[0]: no relevant ids; give a non-empty",
    ),
    (
        "only non-relevant grades",
        lambda d: d["queries"][1].update(relevance={"m1": 0}),
        "$.queries[1].relevance: no relevant ids (every grade is <= 0)",
    ),
    (
        "empty content",
        lambda d: d["memories"][0].update(content="  "),
        "$.memories[0].content: empty content; write the memory's text",
    ),
    (
        "missing content",
        lambda d: d["memories"][2].pop("text"),
        '$.memories[2]: no content; give a non-empty "content" (or "text") string',
    ),
    (
        "content not a string",
        lambda d: d["memories"][0].update(content=["x"]),
        "$.memories[0].content: expected a string, got a list",
    ),
    (
        "k zero",
        lambda d: d["queries"][0].update(k=0),
        "$.queries[0].k: 0 is not a positive integer; give k >= 1 or omit it",
    ),
    (
        "k negative",
        lambda d: d["queries"][0].update(k=-3),
        "$.queries[0].k: -3 is not a positive integer",
    ),
    (
        "k string",
        lambda d: d["queries"][0].update(k="5"),
        '$.queries[0].k: "5" is not a positive integer',
    ),
    (
        "k float",
        lambda d: d["queries"][0].update(k=2.5),
        "$.queries[0].k: 2.5 is not a positive integer",
    ),
    (
        "k bool",
        lambda d: d["queries"][0].update(k=True),
        "$.queries[0].k: true is not a positive integer",
    ),
    (
        "bool grade",
        lambda d: d["queries"][1]["relevance"].update(m2=True),
        '$.queries[1].relevance["m2"]: grade true is not an integer; use an integer grade',
    ),
    (
        "float grade",
        lambda d: d["queries"][1]["relevance"].update(m2=1.5),
        '$.queries[1].relevance["m2"]: grade 1.5 is not an integer',
    ),
    (
        "relevance not an object",
        lambda d: d["queries"][1].update(relevance=["m1"]),
        "$.queries[1].relevance: expected an object",
    ),
    (
        "expected_ids not a list",
        lambda d: d["queries"][0].update(expected_ids="m1"),
        "$.queries[0].expected_ids: expected a list of memory ids, got a string",
    ),
    (
        "expected id not a string",
        lambda d: d["queries"][0].update(expected_ids=[1]),
        "$.queries[0].expected_ids[0]: expected a memory id string, got 1",
    ),
    (
        "repeated expected id",
        lambda d: d["queries"][0].update(expected_ids=["m1", "m1"]),
        '$.queries[0].expected_ids[1]: "m1" is listed twice; remove the repeat',
    ),
    (
        "both judgment forms",
        lambda d: d["queries"][0].update(relevance={"m1": 1}),
        '$.queries[0]: both "expected_ids" and "relevance" given; keep one',
    ),
    (
        "query text not a string",
        lambda d: d["queries"][0].update(q=5),
        "$.queries[0].q: expected a string, got an integer",
    ),
    (
        "missing query text",
        lambda d: d["queries"][0].pop("q"),
        '$.queries[0]: no query text; give a non-empty "q" string',
    ),
    (
        "empty query text",
        lambda d: d["queries"][0].update(q=""),
        "$.queries[0].q: empty query text",
    ),
    (
        "query not an object",
        lambda d: d["queries"].append("hello"),
        "$.queries[2]: expected an object",
    ),
    (
        "memory not an object",
        lambda d: d["memories"].append(7),
        "$.memories[3]: expected an object (an import record), got an integer",
    ),
    (
        "memory id not a string",
        lambda d: d["memories"][0].update(id=1),
        "$.memories[0].id: expected a non-empty string, got 1",
    ),
    (
        "tags not strings",
        lambda d: d["memories"][2].update(tags="deploy"),
        "$.memories[2].tags: expected a list of strings",
    ),
    (
        "type not a string",
        lambda d: d["memories"][0].update(type=3),
        "$.memories[0].type: expected a string, got an integer",
    ),
    (
        "importance bool",
        lambda d: d["memories"][0].update(importance=True),
        "$.memories[0].importance: expected a string",
    ),
    (
        "bad created_at",
        lambda d: d["memories"][2].update(created_at="last tuesday"),
        '$.memories[2].created_at: "last tuesday" is not an ISO 8601 date',
    ),
    (
        "inactive memory",
        lambda d: d["memories"][0].update(active=False),
        "$.memories[0].active: inactive record (active: false): benchd never seeds",
    ),
    (
        "inactive two-field record",
        lambda d: d["memories"].append({"content": "An old note.", "active": False}),
        "$.memories[3].active: inactive record (active: false)",
    ),
    (
        "active not a bool",
        lambda d: d["memories"][0].update(active="no"),
        "$.memories[0].active: expected true or false, got a string",
    ),
    (
        "duplicate content",
        lambda d: d["memories"][1].update(content=d["memories"][0]["content"]),
        "$.memories[1].content: same content and type as $.memories[0]",
    ),
    (
        "bad top reference_date",
        lambda d: d.update(reference_date="June 2026"),
        '$.reference_date: "June 2026" is not an ISO 8601 date; write it as "YYYY-MM-DD"',
    ),
    (
        "impossible query date",
        lambda d: d["queries"][0].update(reference_date="2026-02-30"),
        '$.queries[0].reference_date: "2026-02-30" is not an ISO 8601 date',
    ),
    (
        "reference_date not a string",
        lambda d: d.update(reference_date=20260615),
        '$.reference_date: expected an ISO date string like "2026-05-31", got an integer',
    ),
    (
        "unknown query key",
        lambda d: d["queries"][0].update(categry="x"),
        '$.queries[0]["categry"]: unknown query key; did you mean "category"?',
    ),
    (
        "category not a string",
        lambda d: d["queries"][0].update(category=1),
        "$.queries[0].category: expected a non-empty string, got 1",
    ),
    (
        "duplicate query id",
        lambda d: [q.update(id="same") for q in d["queries"]],
        '$.queries[1].id: duplicate query id "same" (first at $.queries[0])',
    ),
    (
        "empty memories",
        lambda d: d.update(memories=[]),
        "$.memories: empty list; add at least one of the import records",
    ),
    (
        "empty queries",
        lambda d: d.update(queries=[]),
        "$.queries: empty list; add at least one of the labeled queries",
    ),
    (
        "missing memories",
        lambda d: d.pop("memories"),
        '$: missing "memories"; add a non-empty list of import records',
    ),
    (
        "queries not a list",
        lambda d: d.update(queries={"q": "x"}),
        "$.queries: expected a list of labeled queries, got an object",
    ),
]


@pytest.mark.parametrize(
    ("change", "expected"), [p[1:] for p in PROBLEMS], ids=[p[0] for p in PROBLEMS]
)
def test_each_problem_is_reported_with_file_and_json_path(
    tmp_path: Path, change: Callable[[Doc], None], expected: str
) -> None:
    doc = base_doc()
    change(doc)
    path = write_json(tmp_path, doc)
    problems = validate_fixture(path)
    assert any(p.startswith(f"{path}: {expected}") for p in problems), problems
    assert all("\n" not in p for p in problems)


def test_comment_keys_in_queries_are_allowed(tmp_path: Path) -> None:
    doc = base_doc()
    doc["queries"][0]["_note"] = "why this query exists"
    assert validate_fixture(write_json(tmp_path, doc)) == []


def test_all_problems_are_reported_at_once(tmp_path: Path) -> None:
    doc = base_doc()
    doc["memories"][1]["id"] = "m1"
    doc["memories"][2]["text"] = ""
    doc["queries"][0]["k"] = 0
    doc["queries"][0]["expected_ids"] = ["gone"]
    doc["queries"][1]["relevance"]["m2"] = False
    path = write_json(tmp_path, doc)
    problems = validate_fixture(path)
    assert len(problems) == 5, problems
    with pytest.raises(FixtureError) as caught:
        load_fixture(path)
    assert list(caught.value.problems) == problems
    assert str(caught.value).endswith("(and 4 more problem(s))")


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"", "empty file; a fixture is a JSON object"),
        (b"  \n", "empty file; a fixture is a JSON object"),
        (b'{"memories": [', "1:15: invalid JSON: Expecting value"),
        (
            b'{"memories": []}\n{"queries": []}\n',
            "2:1: invalid JSON: Extra data; one JSON document",
        ),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "not UTF-8 text (bad byte at offset 0)"),
        (b"[" * 100_000, "JSON nested too deeply"),
        (b"[1, 2]", '$: expected an object with "memories" and "queries" lists, got a list'),
    ],
    ids=["empty", "blank", "truncated", "jsonl-as-json", "binary", "deep", "list"],
)
def test_unreadable_json_is_one_problem_with_its_position(
    tmp_path: Path, content: bytes, expected: str
) -> None:
    path = tmp_path / "fx.json"
    path.write_bytes(content)
    problems = validate_fixture(path)
    assert len(problems) == 1
    assert problems[0].startswith(str(path))
    assert expected in problems[0]


def test_missing_file_and_directory_are_problems_not_crashes(tmp_path: Path) -> None:
    assert validate_fixture(tmp_path / "nope.json") == [
        f"{tmp_path / 'nope.json'}: no such file; check the path"
    ]
    assert validate_fixture(tmp_path) == [
        f"{tmp_path}: is a directory; name a fixture file (.json or .jsonl)"
    ]


def test_check_fixture_counts_without_keeping_memories(tmp_path: Path) -> None:
    check = check_fixture(write_json(tmp_path, base_doc()))
    assert (check.ok, check.memories, check.queries, check.categories) == (True, 3, 2, 1)
    assert check.summary() == f"{tmp_path / 'fx.json'}: ok (3 memories, 2 queries, 1 category)"


# --------------------------------------------------------------------------- packaged fixtures


@pytest.mark.parametrize("name", PACKAGED_FIXTURES)
def test_packaged_fixture_is_valid_and_big_enough(name: str) -> None:
    path = packaged_fixture(name)
    fixture = load_fixture(path)
    assert fixture.name == name
    assert len(fixture.memories) >= 30
    assert len(fixture.queries) >= 10
    assert all(q.category for q in fixture.queries)
    assert any(len(q.expected_ids) > 1 for q in fixture.queries)


def test_packaged_fixtures_are_the_files_in_fixtures_dir() -> None:
    for name in PACKAGED_FIXTURES:
        assert (
            packaged_fixture(name).read_bytes() == (REPO / "fixtures" / f"{name}.json").read_bytes()
        )


def test_temporal_fixture_dates_every_memory() -> None:
    fixture = load_fixture(packaged_fixture("temporal"))
    assert fixture.reference_date is not None
    assert all("created_at" in m for m in fixture.memories)


def test_unknown_packaged_fixture_names_the_choices() -> None:
    with pytest.raises(FixtureError, match="choose one of smoke, knowledge-update"):
        packaged_fixture("nope")
