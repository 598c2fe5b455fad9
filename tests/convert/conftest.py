"""Fixtures shared by the converter tests: run ``benchd`` in-process, find shared data."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from benchd.cli import main

RunBenchd = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run_benchd(capsys: pytest.CaptureFixture[str]) -> RunBenchd:
    """``run_benchd(*argv)`` runs ``benchd ARGV...`` in-process: (exit code, stdout, stderr)."""

    def run(*argv: str | Path) -> tuple[int, str, str]:
        code = main([str(arg) for arg in argv])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


@pytest.fixture
def shared_dir() -> Path:
    """The project's read-only ``../shared`` data folder next to the repository."""
    return Path(__file__).resolve().parents[2].parent / "shared"
