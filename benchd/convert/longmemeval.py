"""LongMemEval (``longmemeval_s.json`` / ``_m`` / ``_oracle``) → fixture.

Each LongMemEval instance is a question with its own haystack of chat
sessions. benchd pools every haystack into one corpus (a session shared by
several questions becomes one memory) and keeps each question's judgments:

* ``session`` granularity: one memory per session, id = the session id;
  relevant = ``answer_session_ids``.
* ``turn`` granularity: one memory per turn, id = ``SESSION_N`` with N the
  turn's 1-based position in its session (the paper's own numbering);
  relevant = the turns marked ``has_answer: true``.

``question_type`` becomes the query's ``category``; ``haystack_dates`` become
``created_at`` and ``question_date`` the query's ``reference_date`` (so date
words in a question resolve as they would have on that day). Abstention
questions (``question_id`` ending in ``_abs``) have no evidence and are
skipped whole, as the paper's retrieval evaluation does. ``user_only`` indexes
only user turns, like the paper's retrieval runs (session text = the user
turns joined by spaces). A session id met again with *different* text gets
the id ``SESSION@QUESTION`` so no question's judgments point at foreign text.

The file is decoded one question at a time, so LongMemEval_M (2.7 GB) costs
the memory of one question's haystack plus the ids seen so far.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from benchd.convert.common import CorpusTracker, Tally
from benchd.convert.reading import bad_line, iter_json_array, require_file
from benchd.convert.writer import FixtureWriter

__all__ = ["convert_longmemeval", "parse_lme_date"]

_LME_DATE = re.compile(r"^(\d{4})/(\d{2})/(\d{2})(?: \(\w+\))?(?: (\d{2}):(\d{2}))?$")


def parse_lme_date(value: str) -> str | None:
    """``"2023/05/20 (Sat) 02:21"`` (or an ISO date) → ``"2023-05-20T02:21:00Z"``; None if not."""
    match = _LME_DATE.match(value.strip())
    try:
        if match is not None:
            year, month, day, hour, minute = match.groups()
            moment = datetime(int(year), int(month), int(day), int(hour or 0), int(minute or 0))
        else:
            moment = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    if moment.tzinfo is not None:
        return moment.isoformat()
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class _Turn:
    role: str
    content: str
    has_answer: bool


@dataclass(frozen=True, slots=True)
class _Session:
    id: str
    date: str
    turns: tuple[_Turn, ...]


@dataclass(frozen=True, slots=True)
class _Question:
    id: str
    type: str
    text: str
    answer: Any
    date: str | None
    sessions: tuple[_Session, ...]
    answer_session_ids: tuple[str, ...]


class _Shape:
    """Field checks for one instance; every failure is a ``FILE:LINE: ...`` error."""

    def __init__(self, path: Path, line: int, item: Any) -> None:
        self.path, self.line = path, line
        if not isinstance(item, dict):
            raise bad_line(path, line, "expected each question to be a JSON object")
        self.item = item
        self.qid = self.string("question_id")

    def fail(self, what: str) -> Exception:
        return bad_line(self.path, self.line, f"question {self.qid!r}: {what}")

    def string(self, key: str) -> str:
        value = self.item.get(key)
        if not isinstance(value, str) or not value.strip():
            who = f"question {self.item.get('question_id')!r}: " if key != "question_id" else ""
            raise bad_line(self.path, self.line, f'{who}"{key}" must be a non-empty string')
        return value

    def strings(self, key: str) -> list[str]:
        value = self.item.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(f'"{key}" must be a list of strings')
        return value

    def date(self, value: str, where: str) -> str:
        parsed = parse_lme_date(value)
        if parsed is None:
            raise self.fail(f"{where} {value!r} is not a date like '2023/05/20 (Sat) 02:21'")
        return parsed

    def turns(self, index: int, raw: Any) -> tuple[_Turn, ...]:
        if not isinstance(raw, list):
            raise self.fail(f"haystack_sessions[{index}] must be a list of turns")
        turns = []
        for n, turn in enumerate(raw):
            ok = isinstance(turn, dict) and isinstance(turn.get("content"), str)
            if not ok or not isinstance(turn.get("role"), str):
                raise self.fail(f"haystack_sessions[{index}][{n}] needs string role and content")
            turns.append(_Turn(turn["role"], turn["content"], turn.get("has_answer") is True))
        return tuple(turns)


def _parse_question(path: Path, line: int, item: Any) -> _Question:
    shape = _Shape(path, line, item)
    ids = shape.strings("haystack_session_ids")
    dates = shape.strings("haystack_dates")
    raw_sessions = item.get("haystack_sessions")
    if not isinstance(raw_sessions, list) or not len(raw_sessions) == len(ids) == len(dates):
        raise shape.fail(
            "haystack_sessions, haystack_session_ids and haystack_dates must be lists of "
            "the same length"
        )
    sessions = tuple(
        _Session(sid, shape.date(d, f"haystack_dates[{i}]"), shape.turns(i, raw))
        for i, (sid, d, raw) in enumerate(zip(ids, dates, raw_sessions, strict=True))
    )
    raw_date = item.get("question_date")
    qdate = shape.date(raw_date, "question_date") if isinstance(raw_date, str) else None
    return _Question(
        id=shape.qid,
        type=shape.string("question_type"),
        text=shape.string("question"),
        answer=item.get("answer"),
        date=qdate,
        sessions=sessions,
        answer_session_ids=tuple(shape.strings("answer_session_ids")),
    )


@dataclass(frozen=True, slots=True)
class _Memory:
    """One memory a session yields, and whether it answers the question."""

    id: str
    content: str
    relevant: bool


def _memories(q: _Question, s: _Session, granularity: str, user_only: bool) -> Iterator[_Memory]:
    kept = [(n, t) for n, t in enumerate(s.turns, start=1) if not user_only or t.role == "user"]
    if granularity == "turn":
        for n, turn in kept:
            yield _Memory(f"{s.id}_{n}", turn.content, turn.has_answer)
        return
    if user_only:
        content = " ".join(turn.content for _, turn in kept)
    else:
        content = "\n".join(f"{turn.role}: {turn.content}" for _, turn in kept)
    yield _Memory(s.id, content, s.id in q.answer_session_ids)


class _Pool:
    """The pooled corpus: writes each memory once and resolves ids across questions."""

    def __init__(self, writer: FixtureWriter, tally: Tally) -> None:
        self._writer, self._tally = writer, tally
        self._digest: dict[str, bytes] = {}
        self._corpus = CorpusTracker()
        self.renamed = 0

    def add(self, mem: _Memory, created_at: str, qid: str) -> str | None:
        """Write ``mem`` unless known; return the memory id that stands for it (None: empty)."""
        digest = hashlib.blake2b(mem.content.encode("utf-8"), digest_size=16).digest()
        mid = mem.id
        known = self._digest.get(mid)
        if known is not None and known != digest:
            mid = f"{mem.id}@{qid}"
            known = self._digest.get(mid)
            self.renamed += known is None
        if known is None:
            self._digest[mid] = digest
            if self._corpus.admit(mid, mem.content, self._tally):
                self._writer.add_memory(
                    {"id": mid, "content": mem.content, "created_at": created_at}
                )
        return self._corpus.owner(mid)


def _query(q: _Question, pool: _Pool, granularity: str, user_only: bool) -> dict[str, Any]:
    """Pool the question's haystack and build its query record (expected_ids may be empty)."""
    expected: list[str] = []
    for session in q.sessions:
        for mem in _memories(q, session, granularity, user_only):
            owner = pool.add(mem, session.date, q.id)
            if mem.relevant and owner is not None and owner not in expected:
                expected.append(owner)
    record: dict[str, Any] = {"id": q.id, "q": q.text, "expected_ids": expected}
    record["category"] = q.type
    if q.date is not None:
        record["reference_date"] = q.date
    record["_answer"] = q.answer
    return record


def convert_longmemeval(
    path: Path,
    writer: FixtureWriter,
    tally: Tally,
    *,
    granularity: str = "session",
    user_only: bool = False,
    max_queries: int | None = None,
) -> None:
    """Write the pooled haystack memories, then the answerable questions, to ``writer``."""
    require_file(path, "a LongMemEval JSON file")
    pool = _Pool(writer, tally)
    queries: list[dict[str, Any]] = []
    abstentions = 0
    for line, item in iter_json_array(path):
        if max_queries is not None and len(queries) >= max_queries:
            break
        question = _parse_question(path, line, item)
        if question.id.endswith("_abs"):
            abstentions += 1
            continue
        record = _query(question, pool, granularity, user_only)
        if record["expected_ids"]:
            queries.append(record)
        else:
            tally.dropped_queries += 1
    if abstentions:
        tally.notes.append(f"{abstentions} abstention questions skipped (no evidence to find)")
    if pool.renamed:
        tally.notes.append(f"{pool.renamed} sessions reused an id with different text (renamed)")
    for record in queries:
        writer.add_query(record)
