"""``benchd validate``: one line per problem or valid file, exit 2 on any problem, no tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from benchd.commands.validate import validate_paths
from benchd.fixtures.model import PACKAGED_FIXTURES, packaged_fixture

REPO = Path(__file__).resolve().parents[2]
GOOD = {
    "memories": [{"id": "a", "content": "alpha"}, {"id": "b", "content": "beta"}],
    "queries": [{"q": "alpha", "expected_ids": ["a"], "category": "x"}],
}


def benchd(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchd", "validate", *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
    )


def test_valid_fixtures_print_one_ok_line_each_and_exit_0() -> None:
    proc = benchd("fixtures/smoke.json", "fixtures/temporal.json")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "fixtures/smoke.json: ok (36 memories, 16 queries, 3 categories)",
        "fixtures/temporal.json: ok (33 memories, 14 queries, 1 category)",
    ]
    assert proc.stderr == ""


def test_problems_print_one_per_line_and_exit_2(tmp_path: Path) -> None:
    bad = dict(GOOD, queries=[{"q": "alpha", "expected_ids": ["zz"], "k": 0}])
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad), encoding="utf-8")
    proc = benchd(path, "fixtures/smoke.json")
    assert proc.returncode == 2
    assert proc.stdout.splitlines() == [
        f"{path}: $.queries[0].k: 0 is not a positive integer; give k >= 1 or omit it",
        f'{path}: $.queries[0].expected_ids[0]: "zz" is not the id of any memory; '
        "fix the id or add that memory",
        "fixtures/smoke.json: ok (36 memories, 16 queries, 3 categories)",
    ]
    assert proc.stderr == "benchd validate: 2 problems in 1 of 2 files\n"


def test_json_format_lists_each_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("{}", encoding="utf-8")
    proc = benchd("--format", "json", "fixtures/smoke.json", path)
    assert proc.returncode == 2
    results = json.loads(proc.stdout)
    assert [r["ok"] for r in results] == [True, False]
    assert results[0] == {
        "path": "fixtures/smoke.json",
        "ok": True,
        "memories": 36,
        "queries": 16,
        "categories": 3,
        "problems": [],
        "warnings": [],
    }
    assert len(results[1]["problems"]) == 2  # missing memories, missing queries


UNREADABLE = {
    "empty.json": (b"", "empty file"),
    "binary.json": (b"\x00\x01\x02\xff\xfe binary", "not UTF-8 text"),
    "garbage.json": (b"garbage {{{", "invalid JSON"),
    "null.json": (b"null", "got null"),
}


def test_unreadable_files_exit_2_with_one_line_each_and_no_traceback(tmp_path: Path) -> None:
    for name, (content, _) in UNREADABLE.items():
        (tmp_path / name).write_bytes(content)
    proc = benchd(*(tmp_path / name for name in UNREADABLE))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == len(UNREADABLE)
    for line, (name, (_, expected)) in zip(lines, UNREADABLE.items(), strict=True):
        assert line.startswith(str(tmp_path / name))
        assert expected in line


def test_binary_jsonl_file_exits_2_without_traceback(tmp_path: Path) -> None:
    path = tmp_path / "fx.jsonl"
    path.write_bytes(bytes(range(256)) * 4)
    proc = benchd(path)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stdout + proc.stderr
    assert all(line.startswith(f"{path}:") for line in proc.stdout.splitlines())


def test_directory_means_its_fixture_files(tmp_path: Path) -> None:
    (tmp_path / "b.json").write_text(json.dumps(GOOD), encoding="utf-8")
    (tmp_path / "a.jsonl").write_text(
        '{"memory": {"id": "a", "content": "alpha"}}\n'
        '{"query": {"q": "alpha", "expected_ids": ["a"]}}\n',
        encoding="utf-8",
    )
    (tmp_path / "notes.txt").write_text("not a fixture", encoding="utf-8")
    proc = benchd(tmp_path)
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.splitlines() == [
        f"{tmp_path / 'a.jsonl'}: ok (1 memory, 1 query, 0 categories)",
        f"{tmp_path / 'b.json'}: ok (2 memories, 1 query, 1 category)",
    ]


def test_empty_directory_and_missing_file_exit_2(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    proc = benchd(tmp_path / "empty", tmp_path / "missing.json")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stdout.splitlines() == [
        f"{tmp_path / 'empty'}: no .json or .jsonl files in this directory; name a fixture file",
        f"{tmp_path / 'missing.json'}: no such file; check the path",
    ]


def test_no_fixture_argument_is_a_usage_error() -> None:
    proc = benchd()
    assert proc.returncode == 2
    assert proc.stderr.startswith("benchd: error: validate: name at least one FIXTURE")
    assert "Traceback" not in proc.stderr


CONFIG = """
[[probe]]
name = "{name}"
fixture = "{fixture}"

[probe.target]
kind = "zengram"
url = "http://127.0.0.1:8084"
api_key_env = "BENCHD_VALIDATE_TEST_KEY"
namespace = "benchd-{name}"
"""


def test_config_checks_every_fixture_its_probes_name(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(dict(GOOD, queries=[])), encoding="utf-8")
    config = tmp_path / "benchd.toml"
    config.write_text(
        CONFIG.format(name="a", fixture="packaged:smoke")
        + CONFIG.format(name="b", fixture="bad.json")
        + CONFIG.format(name="c", fixture="bad.json"),
        encoding="utf-8",
    )
    proc = subprocess.run(
        [sys.executable, "-m", "benchd", "validate", "--config", str(config)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "BENCHD_VALIDATE_TEST_KEY": "k"},
    )
    assert proc.returncode == 2
    lines = proc.stdout.splitlines()
    assert lines[0] == f"{config}: ok (3 probes)"
    assert lines[1].endswith("smoke.json: ok (36 memories, 16 queries, 3 categories)")
    assert lines[2:] == [f"{bad}: $.queries: empty list; add at least one of the labeled queries"]


def test_bad_config_exits_2_with_one_line(tmp_path: Path) -> None:
    config = tmp_path / "benchd.toml"
    config.write_text("[[probe]]\nname = 1\n", encoding="utf-8")
    proc = benchd("--config", config)
    assert proc.returncode == 2
    lines = proc.stdout.splitlines()
    assert lines and all(line.startswith(f"{config}: probe[0].") for line in lines)
    assert proc.stderr == f"benchd validate: {len(lines)} problems in 1 of 1 file\n"


def test_validate_paths_returns_problems_and_ok_lines(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(dict(GOOD, memories=[])), encoding="utf-8")
    problems, ok = validate_paths([packaged_fixture(n) for n in PACKAGED_FIXTURES] + [path])
    assert len(ok) == len(PACKAGED_FIXTURES)
    assert problems[0] == (
        f"{path}: $.memories: empty list; add at least one of the import records"
    )


def _two_probes_on_one_key(tmp_path: Path, cleanup: str, budget: str = "") -> Path:
    path = tmp_path / "benchd.toml"
    probes = "".join(
        f"""
[[probe]]
name = "{name}"
fixture = "packaged:smoke"
interval_s = 30.0
{budget}
[probe.target]
kind = "zengram"
url = "http://127.0.0.1:8084"
api_key_env = "BUDGET_KEY"
namespace = "benchd-{name}"
cleanup = "{cleanup}"
"""
        for name in ("alpha", "beta")
    )
    path.write_text(probes, encoding="utf-8")
    return path


def _validate_config(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchd", "validate", "--config", str(path)],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
        env={**os.environ, "BUDGET_KEY": "budget-test-key-0042"},
    )


def test_two_probes_sharing_a_key_that_overspend_its_write_budget_get_a_warning(
    tmp_path: Path,
) -> None:
    proc = _validate_config(_two_probes_on_one_key(tmp_path, "before"))
    assert proc.returncode == 0, proc.stderr  # a warning, not a problem
    (warning,) = [line for line in proc.stdout.splitlines() if line.startswith("warning:")]
    # 36 deletes + 1 import + 2 lease writes per cycle, two probes, every 30 s: 156 writes/min.
    assert "key api_key_env BUDGET_KEY at http://127.0.0.1:8084" in warning
    assert "probes alpha, beta" in warning
    assert "156.0 writes/min of writes_per_min = 60" in warning
    assert "writes 39 (sentinel 2, import 1, delete 36)" in warning
    assert 'cleanup = "never"' in warning
    assert "budget-test-key-0042" not in proc.stdout + proc.stderr


def test_the_same_probes_with_cleanup_never_fit_and_get_no_warning(tmp_path: Path) -> None:
    proc = _validate_config(_two_probes_on_one_key(tmp_path, "never"))
    assert proc.returncode == 0, proc.stderr
    assert "warning:" not in proc.stdout


def test_probes_sharing_a_key_must_declare_one_budget(tmp_path: Path) -> None:
    path = _two_probes_on_one_key(tmp_path, "never")
    text = path.read_text(encoding="utf-8")
    marker = 'name = "beta"\nfixture = "packaged:smoke"\ninterval_s = 30.0\n'
    path.write_text(
        text.replace(marker, marker + "[probe.budget]\nreads_per_min = 600\n"), encoding="utf-8"
    )
    proc = _validate_config(path)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "declare the same one" in proc.stderr


def test_two_probes_on_one_namespace_are_a_validate_error(tmp_path: Path) -> None:
    config = tmp_path / "benchd.toml"
    shared = CONFIG.replace('namespace = "benchd-{name}"', 'namespace = "benchd-shared"')
    config.write_text(
        shared.format(name="a", fixture="packaged:smoke")
        + shared.format(name="b", fixture="packaged:smoke"),
        encoding="utf-8",
    )
    proc = subprocess.run(
        [sys.executable, "-m", "benchd", "validate", "--config", str(config)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "BENCHD_VALIDATE_TEST_KEY": "k"},
    )
    assert proc.returncode == 2
    assert "probes 'a' and 'b' both use namespace 'benchd-shared'" in proc.stdout + proc.stderr
