"""The terminal table of ``benchd once``: columns that line up, words that agree with numbers."""

from __future__ import annotations

import re

from cycles import make_result

from benchd.surfacers.table import render_cycle


def _block(text: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("metric"))
    return lines[start : start + 8]


def test_the_ci_block_columns_are_aligned_and_never_run_together() -> None:
    result = make_result(ks=(5, 10))
    block = _block(render_cycle(result))
    head, *rows = block
    assert [row.split()[0] for row in rows] == [
        "hit", "recall", "recall_all", "precision", "mrr", "ndcg", "map"
    ]  # fmt: skip
    col = head.index("@10")
    for row in rows:
        assert row[col - 2 : col] == "  "  # two spaces before every second column
        assert not re.search(r"\]\d", row)  # a CI never touches the next value
    recall = next(r for r in rows if r.split()[0] == "recall")
    assert recall[head.index("@5") :].startswith("0.515 [0.40,0.70]")
    assert recall[col:].startswith("0.520 [0.40,0.70]")
    assert len({len(r) for r in rows if "[" in r}) == 1
