"""``benchd synth``: deterministic, valid, with near-miss distractors and categories."""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from pathlib import Path

import pytest

from benchd.cli import main
from benchd.fixtures import load_fixture
from benchd.synth import SynthSpec, synth_memories, synth_queries


def _synth(tmp_path: Path, name: str, *args: str) -> Path:
    out = tmp_path / name
    assert main(["synth", *args, "--out", str(out)]) == 0
    return out


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _terms(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def test_same_arguments_give_byte_identical_files(tmp_path: Path) -> None:
    args = ("--memories", "2000", "--queries", "100", "--seed", "42")
    first = _synth(tmp_path, "a.jsonl", *args)
    second = _synth(tmp_path, "b.jsonl", *args)
    assert _digest(first) == _digest(second)


def test_another_seed_gives_another_corpus(tmp_path: Path) -> None:
    base = ("--memories", "2000", "--queries", "100")
    one = _synth(tmp_path, "a.jsonl", *base, "--seed", "1")
    two = _synth(tmp_path, "b.jsonl", *base, "--seed", "2")
    assert _digest(one) != _digest(two)


def test_ten_thousand_memories_load_as_a_valid_fixture(tmp_path: Path) -> None:
    out = _synth(tmp_path, "s.jsonl", "--memories", "10000", "--queries", "1000", "--seed", "3")
    fixture = load_fixture(out)
    assert len(fixture.memories) == 10000
    assert len(fixture.queries) == 1000
    assert len({m["id"] for m in fixture.memories}) == 10000


def test_json_output_is_a_valid_fixture_too(tmp_path: Path) -> None:
    out = _synth(tmp_path, "s.json", "--memories", "50", "--queries", "5")
    assert len(load_fixture(out).queries) == 5


def test_each_query_judges_target_and_paraphrase_only(tmp_path: Path) -> None:
    spec = SynthSpec(memories=500, queries=40, seed=9)
    for query in synth_queries(spec):
        assert sorted(query["relevance"].values()) == [1, 2]


def test_distractors_share_most_terms_with_the_target() -> None:
    """Near misses: for every query, D unjudged memories carry >= 75% of the target's words."""
    spec = SynthSpec(memories=300, queries=30, seed=5, distractors=3)
    memories = {m["id"]: _terms(m["content"]) for m in synth_memories(spec)}
    for query in synth_queries(spec):
        target = memories[next(mid for mid, g in query["relevance"].items() if g == 2)]
        near = [
            mid
            for mid, terms in memories.items()
            if mid not in query["relevance"] and len(terms & target) >= 0.75 * len(target)
        ]
        assert len(near) == spec.distractors


def test_categories_rotate_over_queries_and_type_memories(tmp_path: Path) -> None:
    out = _synth(
        tmp_path, "s.jsonl", "--memories", "400", "--queries", "40", "--categories", "alpha,beta"
    )
    fixture = load_fixture(out)
    assert Counter(q.category for q in fixture.queries) == {"alpha": 20, "beta": 20}
    assert {m["type"] for m in fixture.memories} == {"alpha", "beta"}


def test_too_few_memories_for_the_queries_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "s.jsonl"
    code = main(["synth", "--memories", "10", "--queries", "5", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert "give --memories >= 25 or fewer queries" in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_bad_category_name_is_rejected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["synth", "--memories", "10", "--queries", "1", "--categories", "Has Space",
         "--out", str(tmp_path / "s.jsonl")]
    )  # fmt: skip
    assert code == 2
    assert "--categories 'Has Space'" in capsys.readouterr().err
