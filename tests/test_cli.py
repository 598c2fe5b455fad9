"""The command line's own contract: --version, help, bad flags."""

from __future__ import annotations

import subprocess
import sys

from benchd import __version__
from benchd.cli import main


def test_version_flag_prints_version(capsys: object) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "benchd", "--version"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"benchd {__version__}"


def test_unknown_flag_exits_2_with_one_line() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "benchd", "--no-such-flag"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "--no-such-flag" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_no_command_prints_help_and_exits_2() -> None:
    assert main([]) == 2
