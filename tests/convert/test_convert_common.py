"""Shared converter pieces: the progress counter."""

from __future__ import annotations

import io

from benchd.convert.common import Progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_counts_on_a_terminal() -> None:
    stream = _Terminal()
    progress = Progress("converting", stream)
    for n in range(1, 10001):
        progress.tick(n, 0)
    progress.close()
    assert stream.getvalue() == (
        "\rconverting: 5000 memories, 0 queries\rconverting: 10000 memories, 0 queries\n"
    )


def test_progress_is_silent_when_not_a_terminal() -> None:
    stream = io.StringIO()
    progress = Progress("converting", stream)
    for n in range(1, 10001):
        progress.tick(n, 0)
    progress.close()
    assert stream.getvalue() == ""
