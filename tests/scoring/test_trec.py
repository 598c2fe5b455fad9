"""Reading qrels and runs as trec_eval does: ordering, comments, limits and bad lines."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from benchd.errors import RunFileError, UsageError
from benchd.scoring.trec import format as trec_format
from benchd.scoring.trec import parallel as trec_parallel
from benchd.scoring.trec import read as trec_read
from benchd.scoring.trec.evaluate import ScoreOptions, read_qrels, read_run_topics, score_files
from benchd.scoring.trec.measures import parse_measures


def _file(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _topics(path: Path, max_docs: int | None = None) -> tuple[dict[str, list[str]], str]:
    gen = read_run_topics(path, max_docs)
    out: dict[str, list[str]] = {}
    while True:
        try:
            qid, docs = next(gen)
        except StopIteration as stop:
            return out, stop.value.decode()
        out[qid.decode()] = [d.decode() for d in docs]


def test_documents_are_ordered_by_score_then_docno_descending(tmp_path: Path) -> None:
    run = _file(
        tmp_path,
        "run",
        "q1 Q0 a 1 1.0 t\nq1 Q0 c 2 1.0 t\nq1 Q0 b 3 1.0 t\nq1 Q0 z 4 0.5 t\nq1 Q0 y 5 2 t\n",
    )
    topics, runid = _topics(run)
    assert topics == {"q1": ["y", "c", "b", "a", "z"]}  # the rank column is ignored
    assert runid == "t"


def test_max_docs_cuts_after_ordering(tmp_path: Path) -> None:
    run = _file(tmp_path, "run", "q1 Q0 a 1 1 t\nq1 Q0 b 2 3 t\nq1 Q0 c 3 2 t\n")
    assert _topics(run, max_docs=2)[0] == {"q1": ["b", "c"]}


def test_comments_and_blank_lines_are_skipped(tmp_path: Path) -> None:
    run = _file(tmp_path, "run", "# header\nq1 Q0 a 1 2 t\n\n   # indented\nq1 Q0 b#1 2 1 last\n")
    topics, runid = _topics(run)
    assert topics == {"q1": ["a", "b#1"]}
    assert runid == "last"  # the tag of the last line, as trec_eval reports it
    qrels = _file(tmp_path, "qrels", "# judged by\nq1 0 a 1\n\nq1 0 b#1 0\n")
    assert read_qrels(qrels) == {b"q1": {b"a": 1, b"b#1": 0}}


def test_interleaved_topics_are_grouped(tmp_path: Path) -> None:
    run = _file(tmp_path, "run", "q1 Q0 a 1 3 t\nq2 Q0 x 1 3 t\nq1 Q0 b 2 4 t\n")
    assert _topics(run)[0] == {"q1": ["b", "a"], "q2": ["x"]}


def test_small_chunks_give_the_same_topics(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Topics and qrels split across read chunks, fast and slow paths mixed."""
    lines = [f"q{i // 7} Q0 d{i % 7} {i} {(i * 37) % 5} t" for i in range(60)]
    lines.insert(30, "# a comment in the middle")
    run = _file(tmp_path, "run", "\n".join(lines) + "\n")
    judged = "".join(f"q{i // 7} 0 d{i % 7} {i % 3}\n" for i in range(60))
    qrels = _file(tmp_path, "qrels", judged)
    whole = (_topics(run), read_qrels(qrels))
    monkeypatch.setattr(trec_read, "_CHUNK", 50)
    assert (_topics(run), read_qrels(qrels)) == whole


@pytest.mark.parametrize(
    ("text", "line", "what"),
    [
        ("q1 Q0 a 1 1 t\nq1 Q0 b 2 t\n", 2, "5 fields, not 6"),
        ("q1 Q0 a 1 1 t\n# c\nq1 Q0 b 2 high t\n", 3, "score 'high' is not a number"),
        ("q1 Q0 a 1 nan t\n", 1, "score 'nan' is not a number"),
    ],
)
def test_a_malformed_run_line_names_file_and_line(
    tmp_path: Path, text: str, line: int, what: str
) -> None:
    run = _file(tmp_path, "run", text)
    with pytest.raises(RunFileError) as err:
        _topics(run)
    assert str(err.value) == f"{run}:{line}: {what} (expected: qid Q0 docno rank score tag)"


def test_a_docno_listed_twice_for_a_scored_topic_is_an_error(tmp_path: Path) -> None:
    qrels = _file(tmp_path, "qrels", "q1 0 a 1\n")
    run = _file(tmp_path, "run", "q1 Q0 a 1 2 t\nq1 Q0 b 2 1 t\nq1 Q0 a 3 0 t\n")
    with pytest.raises(
        RunFileError, match=r"topic q1 lists docno a more than once \(first at line 1\)"
    ):
        score_files(qrels, run, ScoreOptions(parse_measures(["map"])))


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("q1 0 a 1\nq1 0 b\n", r":2: 3 fields, not 4 \(expected: qid 0 docno rel\)"),
        ("q1 0 a yes\n", r":1: relevance 'yes' is not an integer"),
        ("q1 0 a 1\nq1 0 a 0\n", r":2: topic q1 judges a twice \(first at line 1\)"),
        ("# only a comment\n", r"no judgments found"),
    ],
)
def test_a_malformed_qrels_line_is_an_error(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(RunFileError, match=match):
        read_qrels(_file(tmp_path, "qrels", text))


def test_only_judged_topics_count_and_c_scores_missing_ones_zero(tmp_path: Path) -> None:
    qrels = _file(tmp_path, "qrels", "q1 0 a 1\nq2 0 b 1\n")
    run = _file(tmp_path, "run", "q1 Q0 a 1 1 t\nq9 Q0 b 1 1 t\n")
    plain = score_files(qrels, run, ScoreOptions(parse_measures(["map"])))
    assert plain.per_query == [("q1", [1.0])]
    assert plain.unscored == ["q2"]
    complete = score_files(qrels, run, ScoreOptions(parse_measures(["map"]), complete=True))
    assert complete.per_query == [("q1", [1.0]), ("q2", [0.0])]


def test_a_run_sharing_no_topic_with_the_qrels_is_an_error(tmp_path: Path) -> None:
    qrels = _file(tmp_path, "qrels", "q1 0 a 1\n")
    run = _file(tmp_path, "run", "q2 Q0 a 1 1 t\n")
    with pytest.raises(RunFileError, match="no topic of the run is in"):
        score_files(qrels, run, ScoreOptions(parse_measures([])))


def test_measure_parameters_are_merged_sorted_and_named_like_trec_eval() -> None:
    selection = parse_measures(["P.10,5", "P.20", "iprec_at_recall.0.5", "map"])
    assert selection.names() == ["map", "iprec_at_recall_0.50", "P_5", "P_10", "P_20"]
    assert parse_measures([]).names()[:3] == ["runid", "num_q", "num_ret"]


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("infAP", "unknown measure 'infAP'"),
        ("P.five", "parameter 'five' is not valid"),
        ("P.0", "must be positive"),
        ("map.5", "takes no parameters"),
    ],
)
def test_bad_measure_specs_are_usage_errors(spec: str, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        parse_measures([spec])


def _run_lines(topics: int, per_topic: int) -> list[str]:
    return [
        f"q{t:03d} Q0 d{d} {d + 1} {(t * 7 + d * 13) % 11 / 2} tag{t % 3}"
        for t in range(topics)
        for d in range(per_topic)
    ]


@pytest.mark.parametrize("jobs", [2, 3])
def test_scoring_in_forked_workers_gives_the_single_process_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int
) -> None:
    lines = _run_lines(40, 25)
    run = _file(tmp_path, "run", "\n".join(lines) + "\n")
    qrels = _file(
        tmp_path, "qrels", "".join(f"q{t:03d} 0 d{t % 25} {1 + t % 2}\n" for t in range(0, 40, 2))
    )
    options = ScoreOptions(parse_measures(["all_trec"]), complete=True)
    single = score_files(qrels, run, options)
    monkeypatch.setattr(trec_parallel, "PARALLEL_MIN_BYTES", 0)
    assert len(trec_parallel.topic_spans(run, jobs)) == jobs
    forked = score_files(qrels, run, ScoreOptions(options.selection, complete=True, jobs=jobs))
    assert forked == single


def test_interleaved_topics_across_spans_fall_back_to_one_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = _run_lines(20, 10)
    lines.append("q000 Q0 late 99 100 tag0")  # topic q000 again, at the very end
    run = _file(tmp_path, "run", "\n".join(lines) + "\n")
    qrels = _file(tmp_path, "qrels", "q000 0 late 1\nq001 0 d1 1\n")
    single = score_files(qrels, run, ScoreOptions(parse_measures(["recip_rank"])))
    monkeypatch.setattr(trec_parallel, "PARALLEL_MIN_BYTES", 0)
    forked = score_files(qrels, run, ScoreOptions(parse_measures(["recip_rank"]), jobs=2))
    assert forked == single
    assert forked.per_query[0] == ("q000", [1.0])


def test_a_bad_line_in_a_later_span_names_its_true_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = _run_lines(20, 10)
    lines[180] = "q018 Q0 broken"
    run = _file(tmp_path, "run", "\n".join(lines) + "\n")
    qrels = _file(tmp_path, "qrels", "q001 0 d1 1\n")
    monkeypatch.setattr(trec_parallel, "PARALLEL_MIN_BYTES", 0)
    with pytest.raises(RunFileError, match=rf"^{run}:181: 3 fields, not 6"):
        score_files(qrels, run, ScoreOptions(parse_measures(["map"]), jobs=2))


def test_the_summary_is_taken_with_the_collector_paused_and_restored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    qrels = _file(tmp_path, "qrels", "q1 0 a 1\nq2 0 b 1\n")
    run = _file(tmp_path, "run", "q1 Q0 a 1 1 t\nq2 Q0 c 1 2 t\nq2 Q0 b 2 1 t\n")
    options = ScoreOptions(parse_measures(["map", "P.1"]))
    scored = score_files(qrels, run, options)
    seen: list[bool] = []
    plain = trec_format._summarize

    def watched(*args: object) -> list[tuple[str, float | str]]:
        seen.append(gc.isenabled())
        return plain(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(trec_format, "_summarize", watched)
    assert gc.isenabled()
    lines = list(trec_format.format_text(scored, options, per_query=False))
    assert seen == [False] and gc.isenabled()
    assert lines == ["map                   \tall\t0.7500", "P_1                   \tall\t0.5000"]
