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


def test_test_sh_keeps_packaged_services_from_starting_instead_of_killing_them() -> None:
    script = (ROOT / "scripts" / "test.sh").read_text()
    code = "\n".join(line.split("#")[0] for line in script.splitlines())
    # the one signal it sends: SIGINT to its own pytest parts, when it is stopped itself
    kills = re.findall(r"\b(?:pkill|killall|kill)\b[^\n]*", code)
    assert kills == ['kill -INT "$pid" 2>/dev/null || true; done']
    assert not re.search(r"systemctl\s+stop|service\s+\S+\s+stop", code)
    start = script.index("apt_install() {")
    body = script[start : script.index("\n}\n", start)]
    policy = body.index("printf '#!/bin/sh\\nexit 101\\n' >\"$policy\"")
    install = body.index("apt-get install -y -qq --no-install-recommends \"$@\"")
    assert policy < install < body.index('mv -f "$saved" "$policy"')
    installs = re.findall(r"apt-get install -y[^\n]*", code)
    assert installs == ['apt-get install -y -qq --no-install-recommends "$@" >/dev/null || rc=$?']


def test_test_sh_installs_through_the_policy_even_when_apt_fails(tmp_path: Path) -> None:
    """The install helper restores the machine's policy-rc.d whatever apt-get does."""
    script = (ROOT / "scripts" / "test.sh").read_text()
    start = script.index("apt_install() {")
    helper = script[start : script.index("\n}\n", start) + 3]
    policy = tmp_path / "policy-rc.d"
    policy.write_text("#!/bin/sh\nexit 0\n")
    fake = tmp_path / "bin"
    fake.mkdir()
    seen = tmp_path / "seen"
    (fake / "apt-get").write_text(f'#!/bin/sh\ncat "{policy}" >> "{seen}"\nexit 100\n')
    (fake / "apt-get").chmod(0o755)
    program = helper.replace("/usr/sbin/policy-rc.d", str(policy)) + "apt_install prometheus\n"
    proc = subprocess.run(
        ["bash", "-c", program], capture_output=True, text=True, timeout=30, check=False,
        env={**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"},
    )  # fmt: skip
    assert proc.returncode == 100  # apt's failure is the helper's
    assert seen.read_text() == "#!/bin/sh\nexit 101\n"  # apt ran under the forbidding policy
    assert policy.read_text() == "#!/bin/sh\nexit 0\n"  # and the machine's policy is back
