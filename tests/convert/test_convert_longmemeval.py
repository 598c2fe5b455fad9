"""``benchd convert longmemeval``: pooled haystacks, session and turn granularity."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchd.convert.longmemeval import parse_lme_date
from benchd.fixtures import load_fixture

FILLER = [
    {"role": "user", "content": "Can you suggest a pasta recipe?"},
    {"role": "assistant", "content": "Try cacio e pepe."},
]


def _question(qid: str, qtype: str, sessions: list[tuple[str, str, list[Any]]], answers: list[str]):
    return {
        "question_id": qid,
        "question_type": qtype,
        "question": f"question {qid}?",
        "answer": "an answer",
        "question_date": "2023/05/30 (Tue) 23:40",
        "haystack_session_ids": [sid for sid, _, _ in sessions],
        "haystack_dates": [date for _, date, _ in sessions],
        "haystack_sessions": [turns for _, _, turns in sessions],
        "answer_session_ids": answers,
    }


def _data() -> list[dict[str, Any]]:
    bike = [
        {"role": "user", "content": "I bought a red bike today.", "has_answer": True},
        {"role": "assistant", "content": "Enjoy the red bike!"},
    ]
    move = [
        {"role": "assistant", "content": "How was the move?"},
        {"role": "user", "content": "We moved to Lisbon in March.", "has_answer": True},
    ]
    said = [
        {"role": "user", "content": "Which color did you suggest?"},
        {"role": "assistant", "content": "I suggested teal.", "has_answer": True},
    ]
    shared = ("sharegpt_1", "2023/05/01 (Mon) 10:00", FILLER)
    bike_session = ("answer_1", "2023/05/20 (Sat) 02:21", bike)
    return [
        _question("q1", "single-session-user", [shared, bike_session], ["answer_1"]),
        _question("q2", "multi-session", [shared, ("answer_2", "2023/03/02 (Thu) 09:30", move)],
                  ["answer_2"]),
        _question("q3_abs", "temporal-reasoning", [("answer_9", "2023/01/01 (Sun) 00:00", bike)],
                  []),
        _question("q4", "single-session-assistant",
                  [("answer_4", "2023/04/04 (Tue) 12:00", said)], ["answer_4"]),
    ]  # fmt: skip


def _write(tmp_path: Path, data: list[dict[str, Any]], indent: int | None = 2) -> Path:
    path = tmp_path / "longmemeval_s.json"
    path.write_text(json.dumps(data, indent=indent))
    return path


def test_session_granularity_pools_haystacks_once(tmp_path: Path, run_benchd) -> None:
    out = tmp_path / "lme.json"
    code, stdout, _ = run_benchd("convert", "longmemeval", _write(tmp_path, _data()), "--out", out)
    assert code == 0
    fixture = load_fixture(out)
    ids = [m["id"] for m in fixture.memories]
    assert ids == ["sharegpt_1", "answer_1", "answer_2", "answer_4"]  # shared session once
    queries = {q.id: q for q in fixture.queries}
    assert queries["q1"].expected_ids == ("answer_1",)
    assert queries["q2"].category == "multi-session"
    assert "1 abstention questions skipped" in stdout


def test_dates_become_created_at_and_reference_date(tmp_path: Path, run_benchd) -> None:
    out = tmp_path / "lme.jsonl"
    code, _, _ = run_benchd("convert", "longmemeval", _write(tmp_path, _data()), "--out", out)
    assert code == 0
    fixture = load_fixture(out)
    created = {m["id"]: m["created_at"] for m in fixture.memories}
    assert created["answer_1"] == "2023-05-20T02:21:00Z"
    assert all(q.reference_date == "2023-05-30T23:40:00Z" for q in fixture.queries)


def test_session_text_keeps_roles_in_order(tmp_path: Path, run_benchd) -> None:
    out = tmp_path / "lme.json"
    run_benchd("convert", "longmemeval", _write(tmp_path, _data()), "--out", out)
    content = {m["id"]: m["content"] for m in load_fixture(out).memories}
    assert content["answer_2"] == "assistant: How was the move?\nuser: We moved to Lisbon in March."


def test_turn_granularity_judges_has_answer_turns(tmp_path: Path, run_benchd) -> None:
    out = tmp_path / "lme.json"
    path = _write(tmp_path, _data())
    code, _, _ = run_benchd("convert", "longmemeval", path, "--granularity", "turn", "--out", out)
    assert code == 0
    fixture = load_fixture(out)
    queries = {q.id: q for q in fixture.queries}
    # turns are numbered from 1 over the whole session, as the paper's code does
    assert queries["q2"].expected_ids == ("answer_2_2",)
    assert queries["q4"].expected_ids == ("answer_4_2",)
    assert {m["id"] for m in fixture.memories} >= {"sharegpt_1_1", "sharegpt_1_2", "answer_1_1"}


def test_user_only_drops_assistant_evidence_questions(tmp_path: Path, run_benchd) -> None:
    out = tmp_path / "lme.json"
    path = _write(tmp_path, _data())
    code, stdout, _ = run_benchd(
        "convert", "longmemeval", path, "--granularity", "turn", "--user-only", "--out", out
    )
    assert code == 0
    fixture = load_fixture(out)
    assert [q.id for q in fixture.queries] == ["q1", "q2"]  # q4's evidence is an assistant turn
    assert "1 queries dropped" in stdout
    assert not any(
        m["id"].endswith("_2") and m["id"].startswith("answer_1") for m in fixture.memories
    )


def test_reused_session_id_with_other_text_is_renamed(tmp_path: Path, run_benchd) -> None:
    data = _data()
    data[1]["haystack_sessions"][0] = [{"role": "user", "content": "A different filler."}]
    out = tmp_path / "lme.json"
    code, stdout, _ = run_benchd("convert", "longmemeval", _write(tmp_path, data), "--out", out)
    assert code == 0
    ids = {m["id"] for m in load_fixture(out).memories}
    assert {"sharegpt_1", "sharegpt_1@q2"} <= ids
    assert "1 sessions reused an id with different text" in stdout


def test_one_line_file_streams_too(tmp_path: Path, run_benchd) -> None:
    out = tmp_path / "lme.json"
    path = _write(tmp_path, _data(), indent=None)
    code, _, _ = run_benchd("convert", "longmemeval", path, "--max-queries", "2", "--out", out)
    assert code == 0
    fixture = load_fixture(out)
    assert [q.id for q in fixture.queries] == ["q1", "q2"]
    assert "answer_4" not in {m["id"] for m in fixture.memories}


def test_missing_field_names_file_line_and_question(tmp_path: Path, run_benchd) -> None:
    data = _data()
    del data[1]["question_type"]
    path = _write(tmp_path, data)
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if '"q2"' in text)
    code, _, err = run_benchd("convert", "longmemeval", path, "--out", tmp_path / "o.json")
    assert code == 2
    # the error points at the question object's opening line (just above its id)
    assert err.strip() == (
        f"benchd: error: {path}:{line - 1}: question 'q2': \"question_type\" must be a "
        "non-empty string"
    )


def test_truncated_file_is_a_one_line_error(tmp_path: Path, run_benchd) -> None:
    path = tmp_path / "cut.json"
    path.write_text(json.dumps(_data())[:-40])
    code, _, err = run_benchd("convert", "longmemeval", path, "--out", tmp_path / "o.json")
    assert code == 2
    assert err.startswith(f"benchd: error: {path}:1: not valid JSON")
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("raw", "iso"),
    [
        ("2023/05/20 (Sat) 02:21", "2023-05-20T02:21:00Z"),
        ("2023/05/20", "2023-05-20T00:00:00Z"),
        ("2024-01-03", "2024-01-03T00:00:00Z"),
        ("May 20", None),
        ("2023/02/30 (Thu) 10:00", None),
    ],
)
def test_longmemeval_dates_parse_to_iso(raw: str, iso: str | None) -> None:
    assert parse_lme_date(raw) == iso
