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


def _set_scored() -> object:
    import dataclasses

    from benchd.scoring.ranking import RANK_ONLY_REASON, rank_only_keys

    result = make_result(ks=(5, 10), load=False)
    whole = {"hit": 1.0, "recall": 0.964, "recall_all": 0.75, "precision": 0.889}
    queries = tuple(dataclasses.replace(q, metrics=whole) for q in result.queries)
    return dataclasses.replace(
        result, queries=queries, aggregate=whole, ci={"recall": (0.9, 1.0)},
        unranked=RANK_ONLY_REASON, omitted=rank_only_keys((5, 10)),
    )  # fmt: skip


def test_a_set_scored_probe_prints_its_set_measures_not_dashes() -> None:
    text = render_cycle(_set_scored())  # type: ignore[arg-type]
    head = next(line for line in text.splitlines() if line.strip().startswith("query"))
    assert head.split()[1:] == ["hit", "recall", "precision"]
    aggregate = next(line for line in text.splitlines() if "AGGREGATE" in line)
    assert aggregate.split()[1:] == ["1.000", "0.964", "0.889"]
    rows = [line for line in text.splitlines() if "what about topic" in line]
    assert rows and all(" -  " not in row for row in rows)
    assert "  recall      0.964 [0.90,1.00]" in text
    assert "no rank measures: the store's search answers an unordered set" in text


def test_short_answers_are_shown_beside_the_recall_they_lowered() -> None:
    import dataclasses

    result = dataclasses.replace(make_result(ks=(5, 10)), short_answers={"serial": 2, "load": 0})
    text = render_cycle(result)
    assert (
        "short answers: 2 of the serial pass answered fewer results than asked; "
        "recall above (recall@10 0.520) counts them as misses"
    ) in text
    assert "short answers" not in render_cycle(make_result(ks=(5, 10)))
