"""A cycle's ranked lists as a TREC run file, to score with ``trec_eval`` or ``benchd score``.

One line per ranked id of the serial pass: ``QID Q0 DOCID RANK SCORE TAG``.
``QID`` is the fixture's query id, ``DOCID`` the fixture id benchd mapped the
store's id back to (an id benchd did not write is kept as the store returned
it, without the ``!`` benchd's own results mark it with), ``TAG`` the probe
name. trec_eval re-sorts each topic by score
(descending, ties by docno descending), so ``SCORE`` is derived from the rank
(the list length minus the rank plus one): strictly decreasing, no ties, and
the re-sort keeps benchd's order.

trec_eval rejects a docno repeated within a topic, so a repeat (which benchd
scores as non-relevant at its own rank) is written as ``DOCID#repeatN`` (N
its rank); whitespace, which would split a column, is written as ``%20``
(``%09`` for a tab...). A query whose request failed is left out, as it is
left out of benchd's means; score with ``-c`` so an empty ranked list counts
as 0, as benchd counts it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from benchd import redact
from benchd.result import CycleResult

__all__ = ["render_trec_run", "trec_column", "trec_lines"]

_SPACE = re.compile(r"\s")


def trec_column(value: str) -> str:
    """An id as one whitespace-free column (``benchd qrels`` escapes ids the same way)."""
    if not value:
        return "%00"
    return _SPACE.sub(lambda m: f"%{ord(m.group()):02X}", redact.text(value))


def _as_returned(doc: str, relevant: frozenset[str]) -> str:
    """A record benchd did not write, under the id the store gave it.

    benchd labels such a record ``!<store id>`` so it can never score as a
    fixture id; the run drops that ``!`` unless the bare id is a relevant
    fixture id (then the label stays, and trec_eval scores it as benchd does).
    """
    if doc.startswith("!") and doc not in relevant and doc[1:] not in relevant:
        return doc[1:]
    return doc


def trec_lines(result: CycleResult) -> Iterator[str]:
    """The run lines of ``result``'s serial pass, topic by topic in fixture order."""
    tag = trec_column(result.probe)
    relevant = frozenset(doc for q in result.queries for doc in q.expected_ids)
    for query in result.queries:
        if query.error is not None:
            continue
        seen: set[str] = set()
        n = len(query.ranked_ids)
        qid = trec_column(query.id)
        for rank, doc in enumerate(query.ranked_ids, start=1):
            column = trec_column(_as_returned(doc, relevant))
            docno = column if doc not in seen else f"{column}#repeat{rank}"
            seen.add(doc)
            yield f"{qid} Q0 {docno} {rank} {n - rank + 1} {tag}"


def render_trec_run(result: CycleResult) -> str:
    """The whole run file (newline-terminated; empty when no query was answered)."""
    lines = list(trec_lines(result))
    return "".join(f"{line}\n" for line in lines)
