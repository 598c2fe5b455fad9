"""bench/load_throughput.py: its benchd side on a loopback server, and its process sampler."""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import benchd.cycle
from benchd.scoring.ranking import query_metrics

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from load_common import ProcessSampler, canned_search_body
from load_throughput import KS, QUERIES, RELEVANCE, Figures, run_benchd, scorer, summary


def _answer_forever(conn: socket.socket, answer: bytes) -> None:
    with conn:
        pending = b""
        while chunk := conn.recv(65536):
            pending += chunk
            while b"\r\n\r\n" in pending:
                _, _, pending = pending.partition(b"\r\n\r\n")
                conn.sendall(answer)


@contextmanager
def _canned_server() -> Iterator[str]:
    """A keep-alive server answering every request with the bench's canned search body."""
    body = canned_search_body()
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
    answer = head % len(body) + body
    sock = socket.create_server(("127.0.0.1", 0))

    def accept() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            threading.Thread(target=_answer_forever, args=(conn, answer), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


def test_the_benchd_side_measures_its_own_request_window() -> None:
    with _canned_server() as host:
        figures = run_benchd(host, 2, 0.5)
    assert figures.requests > 0
    assert figures.wall_s >= 0.5
    assert 0 < figures.cpu_s < 2 * figures.wall_s  # one thread: at most about a core
    assert figures.wait_s >= 0
    assert 0.0 <= figures.idle <= 1.0


def test_the_sampler_interpolates_between_samples_and_refuses_a_window_outside() -> None:
    sampler = ProcessSampler(pid=0, period_s=1.0)
    sampler.samples = [(10.0, 1.0, 0.0), (11.0, 2.0, 0.5), (12.0, 2.5, 1.5)]
    assert sampler.between(10.5, 12.0) == pytest.approx((1.0, 1.25))
    assert sampler.between(10.0, 12.5) == pytest.approx((1.5, 1.5))  # ended within a period
    with pytest.raises(SystemExit, match="no samples around"):
        sampler.between(9.0, 11.0)


def test_the_summary_gives_ratios_as_min_median_max() -> None:
    ours = [Figures(1000, 1.0, 0.1, 0.5, 3.0), Figures(3000, 1.0, 0.3, 0.6, 4.0)]
    theirs = [Figures(1000, 1.0, 0.2, 0.5, 3.5), Figures(1000, 1.0, 0.2, 0.7, 5.0)]
    line = summary(32, ours * 2, theirs * 2)
    assert "req/s 1.00/2.00/3.00" in line
    assert "CPU/req 0.50/0.50/0.50" in line  # 100 µs against 200 µs each time
    assert "load 3.0-5.0" in line


def test_the_benchd_side_scores_each_distinct_ranking_of_a_query_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As a cycle scores its load pass (benchd.cycle.load_quality), not once per answer."""
    calls: list[tuple[str, ...]] = []

    def counted(ranked: tuple[str, ...], relevance: dict[str, int], ks: tuple[int, ...]) -> object:
        calls.append(ranked)
        return query_metrics(ranked, relevance, ks)

    monkeypatch.setattr(benchd.cycle, "query_metrics", counted)
    score = scorer()
    ranked = tuple(f"mem-{i}" for i in range(10))
    answers = [(i % len(QUERIES), ranked) for i in range(10 * len(QUERIES))]
    quality = score(answers)
    assert len(calls) == len(QUERIES)  # 120 answers, 12 queries, one ranking each
    expected = [query_metrics(ranked, RELEVANCE[q], KS) for q in range(len(QUERIES))]
    for name, value in quality.items():
        assert value == pytest.approx(sum(m[name] for m in expected) / len(expected))
