"""The top of a probe's card: what changed, one line each, and since when.

Read from the ``/api/status`` document only (``changes``, the onset times,
``quality``, ``short_answers``), like the rest of the page. Every string is
escaped.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from benchd.surfacers.changes import QUALITY_WORDS

__all__ = ["changes_block", "quality_words", "short_answers_fact"]

_SHOWN = 6  # change lines shown open; the rest folded (the drift table has every metric@k)


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _fmt(value: object, sign: bool = False) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "–"
    return f"{value:+.3f}" if sign else f"{value:.3f}"


def quality_words(key: object) -> str:
    """A cycle's quality verdict in words (``quality`` of a probe or a history entry)."""
    return QUALITY_WORDS.get(str(key), str(key or "unknown"))


def _line(change: Mapping[str, Any]) -> str:
    since = change.get("since_iso")
    when = f", since {since}" if since else ""
    return (
        f'<li class="change" data-change="{_e(change.get("what"))}">'
        f"<strong>{_e(change.get('what'))}</strong>: "
        f'<span data-value="before">{_fmt(change.get("before"))}</span> → '
        f'<span data-value="now">{_fmt(change.get("now"))}</span> '
        f"({_fmt(change.get('delta'), sign=True)}), {_e(change.get('verdict'))}"
        f'<span class="since" data-since="{_e(since or "")}">{_e(when)}</span></li>'
    )


def changes_block(probe: Mapping[str, Any]) -> str:
    """``What changed``: one line per open change (metric, before → now, verdict, since)."""
    changes: Sequence[Mapping[str, Any]] = probe.get("changes") or []
    if not changes:
        return ""
    lines = [_line(c) for c in changes]
    shown, folded = lines[:_SHOWN], lines[_SHOWN:]
    rest = (
        f"<details><summary>{len(folded)} more</summary>"
        f'<ul class="changes">{"".join(folded)}</ul></details>'
        if folded
        else ""
    )
    return (
        f'<h3>What changed ({len(changes)})</h3><ul class="changes">{"".join(shown)}</ul>{rest}'
    )


def short_answers_fact(probe: Mapping[str, Any], last: Mapping[str, Any]) -> str | None:
    """Searches of the last cycle that answered fewer results than asked, beside the recall
    they lowered; None when there were none."""
    short = {p: n for p, n in (probe.get("short_answers") or {}).items() if n}
    if not short:
        return None
    counts = ", ".join(f"{n} in the {p} pass" for p, n in sorted(short.items()))
    aggregate = last.get("aggregate") or {}
    ks = last.get("ks") or []
    key = f"recall@{max(ks)}" if ks and aggregate.get(f"recall@{max(ks)}") is not None else "recall"
    value = aggregate.get(key)
    lowered = f"; {key} {_fmt(value)} counts them as misses" if value is not None else ""
    return f"{counts} answered fewer results than asked{lowered}"
