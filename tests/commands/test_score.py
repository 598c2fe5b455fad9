"""``benchd score``: output formats, notes and exit codes (mostly run in-process)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchd.cli import main

Capsys = pytest.CaptureFixture[str]


def _score(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchd", "score", *args],
        capture_output=True,
        text=True,
        check=False,
    )


def _inproc(capsys: Capsys, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``benchd score`` through cli.main in this process."""
    code = main(["score", *args])
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["benchd", "score", *args], code, out, err)


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    qrels = tmp_path / "qrels"
    qrels.write_text("q1 0 a 1\nq1 0 b 0\nq2 0 c 2\nq3 0 d 1\n")
    run = tmp_path / "run"
    run.write_text("q1 Q0 b 1 2.0 sys\nq1 Q0 a 2 1.0 sys\nq2 Q0 c 1 5 sys\n")
    return qrels, run


def test_text_output_is_trec_eval_lines(files: tuple[Path, Path], capsys: Capsys) -> None:
    proc = _inproc(capsys, "-q", "-m", "recip_rank", "-m", "num_ret", *map(str, files))
    assert proc.returncode == 0
    assert proc.stdout.splitlines() == [
        "num_ret               \tq1\t2",
        "recip_rank            \tq1\t0.5000",
        "num_ret               \tq2\t1",
        "recip_rank            \tq2\t1.0000",
        "num_ret               \tall\t3",
        "recip_rank            \tall\t0.7500",
    ]


def test_a_judged_topic_without_results_is_noted_and_c_counts_it(
    files: tuple[Path, Path], capsys: Capsys
) -> None:
    plain = _inproc(capsys, "-m", "recip_rank", *map(str, files))
    assert "1 qrels topic(s) have no results" in plain.stderr
    assert plain.stdout.endswith("all\t0.7500\n")
    complete = _inproc(capsys, "-c", "-m", "recip_rank", *map(str, files))
    assert complete.stderr == ""
    assert complete.stdout.endswith("all\t0.5000\n")  # (0.5 + 1 + 0) / 3


def test_json_output_carries_unrounded_values(files: tuple[Path, Path], capsys: Capsys) -> None:
    proc = _inproc(capsys, "--format", "json", "-q", "-m", "P.3", "-m", "num_rel", *map(str, files))
    assert proc.returncode == 0
    doc = json.loads(proc.stdout)
    assert doc["runid"] == "sys"
    assert doc["all"] == {"num_rel": 2, "P_3": pytest.approx((1 / 3 + 1 / 3) / 2)}
    assert doc["per_query"]["q1"] == {"num_rel": 1, "P_3": pytest.approx(1 / 3)}
    assert doc["topics_without_results"] == ["q3"]


def test_a_malformed_run_line_exits_2_with_file_and_line(files: tuple[Path, Path]) -> None:
    qrels, run = files
    run.write_text("q1 Q0 a 1 1.0 sys\nq1 Q0 b 2\n")
    proc = _score(str(qrels), str(run))
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == (
        f"benchd: error: {run}:2: 4 fields, not 6 (expected: qid Q0 docno rank score tag)\n"
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["-m", "nosuch"], "unknown measure 'nosuch'"),
        (["-l", "-1"], "-l -1: the relevance level must be 0 or more"),
        (["-M", "0"], "-M 0: the maximum documents per topic must be positive"),
    ],
)
def test_bad_flags_exit_2_in_one_line(
    files: tuple[Path, Path], flags: list[str], message: str, capsys: Capsys
) -> None:
    proc = _inproc(capsys, *flags, *map(str, files))
    assert proc.returncode == 2
    assert message in proc.stderr
    assert len(proc.stderr.splitlines()) == 1


def test_a_missing_file_exits_2(tmp_path: Path, files: tuple[Path, Path], capsys: Capsys) -> None:
    proc = _inproc(capsys, str(files[0]), str(tmp_path / "absent"))
    assert proc.returncode == 2
    assert f"{tmp_path / 'absent'}: cannot read" in proc.stderr
    assert "Traceback" not in proc.stderr
