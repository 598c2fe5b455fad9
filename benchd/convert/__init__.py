"""Converters from public retrieval benchmarks to benchd fixtures.

Each converter streams its source's corpus into a :class:`FixtureWriter`
(memories first, then the judged queries) and counts what it had to leave
out in a :class:`Tally`::

    with FixtureWriter(Path("scifact.jsonl")) as writer:
        convert_beir(Path("scifact"), writer, tally := Tally())
"""

from benchd.convert.beir import convert_beir
from benchd.convert.common import ConvertSummary, Progress, Tally
from benchd.convert.cranfield import convert_cranfield, cranfield_grade
from benchd.convert.longmemeval import convert_longmemeval
from benchd.convert.trec import convert_trec
from benchd.convert.writer import FixtureWriter

__all__ = [
    "ConvertSummary",
    "FixtureWriter",
    "Progress",
    "Tally",
    "convert_beir",
    "convert_cranfield",
    "convert_longmemeval",
    "convert_trec",
    "cranfield_grade",
]
