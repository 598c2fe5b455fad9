"""run.sh hands flags to ``benchd run``; test.sh never stops a Prometheus it did not start."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def fake_tree(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A copy of scripts/ beside a venv whose ``benchd`` echoes its arguments."""
    shutil.copytree(ROOT / "scripts", tmp_path / "scripts")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    benchd = venv / "bin" / "benchd"
    benchd.write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    benchd.chmod(0o755)
    (venv / ".benchd-installed").touch()
    os.utime(tmp_path / "pyproject.toml", (0, 0))  # older than the stamp: no pip install
    return tmp_path, {**os.environ, "BENCHD_VENV": str(venv)}


@pytest.mark.parametrize(
    ("args", "received"),
    [
        ([], ["run"]),
        (["--listen", "127.0.0.1:9118"], ["run", "--listen", "127.0.0.1:9118"]),
        (["-c", "benchd.toml", "--pid-file", "/run/benchd.pid"],
         ["run", "-c", "benchd.toml", "--pid-file", "/run/benchd.pid"]),
        (["once", "--format", "json"], ["once", "--format", "json"]),
        (["--help"], ["--help"]),
        (["--version"], ["--version"]),
    ],
)  # fmt: skip
def test_run_sh_passes_flags_to_benchd_run(
    fake_tree: tuple[Path, dict[str, str]], args: list[str], received: list[str]
) -> None:
    tree, env = fake_tree
    proc = subprocess.run(
        ["bash", str(tree / "scripts" / "run.sh"), *args],
        capture_output=True, text=True, timeout=60, check=False, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == received


def test_test_sh_keeps_the_packaged_prometheus_from_starting_instead_of_killing_one() -> None:
    script = (ROOT / "scripts" / "test.sh").read_text()
    code = "\n".join(line.split("#")[0] for line in script.splitlines())
    assert not re.search(r"\b(pkill|killall|kill)\b", code)
    assert "systemctl stop" not in code and "service prometheus stop" not in code
    policy = script.index("printf '#!/bin/sh\\nexit 101\\n' >\"$policy\"")
    install = script.index("apt-get install -y -qq --no-install-recommends prometheus")
    assert policy < install < script.index("restore_policy\n", install)
