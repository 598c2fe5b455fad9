"""The terminal progress line of ``benchd once``: phase, seeding rate and ETA, waits on 429s."""

from __future__ import annotations

import io

from benchd.progress import CycleProgress, PollProgress
from benchd.surfacers.table import TerminalProgress, render_progress


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_line_names_the_phase_shows_rate_and_eta_and_says_when_it_waits() -> None:
    out, clock = io.StringIO(), Clock()
    progress = TerminalProgress("staging", out, clock)
    assert isinstance(progress, CycleProgress)
    progress.phase("seed")
    clock.now += 4.0
    progress(100, 500)  # 25 records/s: 400 more take 16 s
    progress.waiting(12.0, "429 Retry-After")
    clock.now += 16.0
    progress(500, 500)
    progress.phase("verify")
    assert out.getvalue() == (
        "staging: seed\n"
        "\rstaging: seed: 100/500 ( 20.0%) 25.0 records/s, ETA 16 s\n"
        "staging: seed: waiting 12.0 s on 429 Retry-After\n"
        "\rstaging: seed: 500/500 (100.0%) 25.0 records/s\n"
        "staging: verify\n"
    )


def test_render_progress_without_a_clock_is_the_plain_count() -> None:
    assert render_progress("p: seed", 3, 4) == "\rp: seed: 3/4 ( 75.0%)"


def test_verify_serial_and_searchable_show_their_counts_while_they_run() -> None:
    out, clock = io.StringIO(), Clock()
    progress = TerminalProgress("staging", out, clock)
    assert isinstance(progress, PollProgress)
    progress.phase("verify")
    progress(36, 36)
    progress.phase("searchable")
    clock.now += 0.5
    progress.polling(1, 0.5, 30.0)
    progress.polling(2, 1.25, 30.0)
    progress.phase("serial")
    clock.now += 2.0
    progress(4, 16)  # 2 queries/s: 12 more take 6 s
    progress(16, 16)
    assert out.getvalue() == (
        "staging: verify\n"
        "\rstaging: verify: 36/36 (100.0%)\n"
        "staging: searchable\n"
        "\rstaging: searchable: poll 1, 0.5 s (gives up at 30 s)"
        "\rstaging: searchable: poll 2, 1.2 s (gives up at 30 s)\n"
        "staging: serial\n"
        "\rstaging: serial: 4/16 ( 25.0%) 2.0 queries/s, ETA 6 s"
        "\rstaging: serial: 16/16 (100.0%) 8.0 queries/s\n"
    )
