"""The numpy column splitter agrees with bytes.split and float() or declines the chunk."""

from __future__ import annotations

import re
from itertools import groupby, pairwise
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchd.errors import RunFileError
from benchd.scoring.trec import read as trec_read
from benchd.scoring.trec.columns import judged_lines, split_chunk, split_qrels_chunk
from benchd.scoring.trec.evaluate import ScoreOptions, score_files
from benchd.scoring.trec.measures import parse_measures

_IDS = st.text("abcxyz019._-", min_size=1, max_size=20)
_SCORES = st.one_of(
    st.integers(-(10**15) + 1, 10**15 - 1).map(str),
    st.builds(
        lambda n, places: f"{n / 10**places:.{places}f}",
        st.integers(-(10**9), 10**9),
        st.integers(0, 9),
    ),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),  # exponents: declined
    st.sampled_from(["1.", ".5", "-.25", "-0", "007.50", "1e3", "+2", "0x10", "-", "."]),
)


@st.composite
def chunks(draw: st.DrawFn) -> bytes:
    lines = draw(
        st.lists(st.tuples(st.sampled_from(["q1", "q2", "q10"]), _IDS, _SCORES), min_size=1)
    )
    sep = draw(st.sampled_from([" ", "\t", " "]))
    text = "".join(f"{q}{sep}Q0{sep}{d}{sep}1{sep}{s}{sep}tag\n" for q, d, s in lines)
    return text.encode()


def _plain(score: bytes) -> bool:
    """A decimal without exponent, with at least one and at most 15 digits."""
    digits = sum(c.isdigit() for c in score.decode())
    return bool(re.fullmatch(rb"-?[0-9]*\.?[0-9]*", score)) and 0 < digits <= 15


@settings(max_examples=300, deadline=None)
@given(chunks())
def test_split_chunk_matches_bytes_split_and_float(chunk: bytes) -> None:
    groups = split_chunk(chunk)
    rows = [line.split() for line in chunk.splitlines()]
    assert (groups is None) == (not all(_plain(r[4]) for r in rows))
    if groups is None:
        return
    assert groups.scores.tolist() == [float(r[4]) for r in rows]
    assert groups.docnos(0, len(rows)) == [r[2] for r in rows]
    heads = [(qid, len(list(members))) for qid, members in groupby(r[0] for r in rows)]
    assert groups.qids == [qid for qid, _ in heads]
    assert groups.tag == rows[-1][5]
    ends = [*groups.starts[1:], len(rows)]
    for pos, end, ordered in zip(groups.starts, ends, groups.ordered, strict=True):
        scores = [float(r[4]) for r in rows[pos:end]]
        assert ordered == all(a > b for a, b in pairwise(scores))
        docs = [r[2] for r in rows[pos:end]]
        if groups.distinct:
            assert len(set(docs)) == len(docs)


@settings(max_examples=150, deadline=None)
@given(chunks(), st.lists(_IDS, max_size=8))
def test_judged_lines_never_miss_a_judged_docno(chunk: bytes, extra: list[str]) -> None:
    groups = split_chunk(chunk)
    if groups is None or groups.hashes is None:
        return
    rows = [line.split() for line in chunk.splitlines()]
    judged = [{r[2] for r in rows[::2]} | {e.encode() for e in extra} for _ in groups.qids]
    found = judged_lines(groups, judged)
    assert found is not None
    ends = [*groups.starts[1:], len(rows)]
    for (lines, docs), pos, end, wanted in zip(found, groups.starts, ends, judged, strict=True):
        assert all(pos <= line < end for line in lines)
        assert docs == [rows[line][2] for line in lines]
        must = [i for i in range(pos, end) if rows[i][2] in wanted]
        assert set(must) <= set(lines)


@pytest.mark.parametrize(
    "text",
    [
        b"q1 Q0 a 1 2 t\n# a comment with six fields\n",
        b"q1 Q0 a 1 2 t\nq1  Q0 b 2 1 t\n",  # doubled separator
        b"q1 Q0 a 1 2 t\r\n",  # CR line ending
        b"q1 Q0 a 1 2 t extra\n",
        b"q1 Q0 a 1 nan t\n",
        b"q1 Q0 a 1 1e5 t\n",
        b"q1 Q0 a 1 1.2.3 t\n",
        b"q1 Q0 a 1 1234567890123456 t\n",  # 16 digits: beyond the exact fast path
        b"q1 Q0 a 1 1-2 t\n",  # a minus past the first byte
        b"q1 Q0 a 1 --1 t\n",
        b"q1 Q0 a 1 2 t\nq1 Q0 b 1 1x t\n",  # one score of many with a stray byte
    ],
)
def test_unusual_chunks_are_declined(text: bytes) -> None:
    assert split_chunk(text) is None


def test_a_repeated_docno_inside_a_chunk_is_still_an_error(tmp_path: Path) -> None:
    qrels = tmp_path / "qrels"
    qrels.write_text("q1 0 a 1\nq2 0 b 1\n")
    run = tmp_path / "run"
    run.write_text("q1 Q0 a 1 3 t\nq1 Q0 c 2 2 t\nq1 Q0 a 3 1 t\nq2 Q0 b 1 1 t\n")
    with pytest.raises(RunFileError, match="topic q1 lists docno a more than once"):
        score_files(qrels, run, ScoreOptions(parse_measures(["map"])))


def test_located_topics_score_like_ranked_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A whole ordered topic in a chunk is located; -M and judged negatives still apply."""
    qrels = tmp_path / "qrels"
    qrels.write_text("q1 0 a 2\nq1 0 c 1\nq1 0 d -1\nq2 0 x 1\n")
    run = tmp_path / "run"
    run.write_text(
        "q1 Q0 b 1 9.5 t\nq1 Q0 a 2 8.25 t\nq1 Q0 d 3 7 t\nq1 Q0 c 4 -1 t\nq2 Q0 x 1 1 t\n"
    )
    measures = parse_measures(["all_trec"])
    located = [score_files(qrels, run, ScoreOptions(measures, max_docs=m)) for m in (None, 2)]
    names = measures.names()
    assert located[0].per_query[0][1][names.index("map")] == (1 / 2 + 2 / 4) / 2
    assert located[1].per_query[0][1][names.index("map")] == (1 / 2) / 2  # -M 2: a only
    monkeypatch.setattr(trec_read, "_CHUNK", 16)  # one line per chunk: nothing is located
    ranked = [score_files(qrels, run, ScoreOptions(measures, max_docs=m)) for m in (None, 2)]
    assert located == ranked


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["q1", "q2", "q10"]),
            _IDS,
            st.one_of(st.integers(-3, 10**6).map(str), st.sampled_from(["1.0", "+1", "x"])),
        ),
        min_size=1,
    )
)
def test_split_qrels_chunk_matches_bytes_split_and_int(lines: list[tuple[str, str, str]]) -> None:
    chunk = "".join(f"{q} 0 {d} {g}\n" for q, d, g in lines).encode()
    cols = split_qrels_chunk(chunk)
    rows = [line.split() for line in chunk.splitlines()]
    plain = all(re.fullmatch(rb"-?[0-9]+", r[3]) for r in rows)
    assert (cols is not None) == plain
    if cols is None:
        return
    qids, starts, docs, grades = cols
    assert docs == [r[2] for r in rows]
    assert grades == [int(r[3]) for r in rows]
    assert qids == [qid for qid, _ in groupby(r[0] for r in rows)]
    assert [rows[s][0] for s in starts] == qids
