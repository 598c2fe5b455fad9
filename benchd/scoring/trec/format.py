"""trec_eval's output: per-topic rows, the ``all`` summary, and a JSON form.

The summary follows trec_eval's ``meas_avg.c``: arithmetic means over the
scored topics (over every qrels topic with ``-c``), sums for the counts
(``num_ret``, ``num_rel``, ``num_rel_ret``, ``num_nonrel_judged_ret``) and a
geometric mean, floored at 1e-5 before the log, for ``gm_map`` / ``gm_bpref``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

from benchd.scoring.trec.evaluate import ScoredRun, ScoreOptions, gc_paused
from benchd.scoring.trec.measures import MIN_GEO_MEAN

__all__ = ["format_json", "format_text", "summarize"]


def _mean(column: Sequence[float]) -> float:
    total = 0.0
    for value in column:  # in topic order, like trec_eval's accumulator
        total += value
    return total / len(column) if column else 0.0


def _geometric_mean(column: Sequence[float]) -> float:
    logs = 0.0
    for value in column:
        logs += math.log(max(value, MIN_GEO_MEAN))
    return math.exp(logs / len(column)) if column else 0.0


def summarize(run: ScoredRun, options: ScoreOptions) -> list[tuple[str, float | str]]:
    """The ``all`` rows, one per output name, in output order."""
    with gc_paused():  # the rows are acyclic: the collector would only walk them again
        return _summarize(run, options)


def _summarize(run: ScoredRun, options: ScoreOptions) -> list[tuple[str, float | str]]:
    rows: list[tuple[str, float | str]] = []
    names = options.selection.columns()
    # Transposed in one pass: each topic's row is visited once, not once per column.
    columns = list(zip(*(row for _, row in run.per_query), strict=True)) or [()] * len(names)
    for (name, fam), column in zip(names, columns, strict=True):
        if fam.aggregate == "runid":
            rows.append((name, run.runid))
        elif fam.aggregate == "count":
            rows.append((name, float(len(column))))
        elif fam.aggregate == "sum":
            total = float(sum(column))
            if name == "num_rel" and options.complete:
                # trec_eval's -c recounts judged rel > 0 over the whole qrels here.
                total = float(run.num_rel_all)
            rows.append((name, total))
        elif fam.aggregate == "gmean":
            rows.append((name, _geometric_mean(column)))
        else:
            rows.append((name, _mean(column)))
    return rows


def _cell(value: float | str, integer: bool) -> str:
    if isinstance(value, str):
        return value
    return str(int(value)) if integer else f"{value:6.4f}"


def format_text(run: ScoredRun, options: ScoreOptions, per_query: bool) -> Iterator[str]:
    """trec_eval's lines, ``printf("%-22s<TAB>%s<TAB>%6.4f")``, counts as integers.

    Per-topic rows (with ``per_query``) come first, in qrels qid order, then the
    ``all`` rows.
    """
    columns = options.selection.columns()
    if per_query:
        for qid, row in run.per_query:
            for (name, fam), value in zip(columns, row, strict=True):
                if fam.per_query:
                    yield f"{name:<22}\t{qid}\t{_cell(value, fam.integer)}"
    for (name, fam), (_, summary) in zip(columns, summarize(run, options), strict=True):
        yield f"{name:<22}\tall\t{_cell(summary, fam.integer)}"


def _json_value(value: float | str, integer: bool) -> float | int | str:
    if isinstance(value, str) or not integer:
        return value
    return int(value)


def format_json(run: ScoredRun, options: ScoreOptions, per_query: bool) -> dict[str, object]:
    """The same numbers, unrounded: ``{"runid", "all", "per_query"?, ...}``."""
    columns = options.selection.columns()
    summary: dict[str, float | int | str] = {
        name: _json_value(value, fam.integer)
        for (name, fam), (_, value) in zip(columns, summarize(run, options), strict=True)
    }
    out: dict[str, object] = {"runid": run.runid, "all": summary}
    if per_query:
        out["per_query"] = {
            qid: {
                name: _json_value(value, fam.integer)
                for (name, fam), value in zip(columns, row, strict=True)
                if fam.per_query
            }
            for qid, row in run.per_query
        }
    if run.unscored:
        out["topics_without_results"] = run.unscored
    return out
