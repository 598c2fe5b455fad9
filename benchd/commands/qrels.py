"""``benchd qrels FIXTURE``: a fixture's judgments as TREC qrels, for trec_eval, ranx, pytrec_eval.

One line per judged id, ``QID 0 DOCID REL`` (trec_eval's qrels format), in
the fixture's order: the grade where the fixture grades (``relevance: {id:
grade}``, zero and negative grades included: judged non-relevant), else 1
for each of ``expected_ids``. Ids are written as ``benchd once --format
trec`` writes them (whitespace as ``%20``...), so the two files score
together: ``benchd score -c QRELS RUN`` gives benchd's own means.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchd.errors import EXIT_OK, UsageError

if TYPE_CHECKING:
    from benchd.fixtures.model import Fixture

__all__ = ["qrels_lines", "register"]

_PACKAGED = "packaged:"


def register(sub: Any) -> None:
    """Add ``benchd qrels``."""
    p = sub.add_parser(
        "qrels",
        help="write a fixture's judgments as TREC qrels (graded where the fixture grades)",
        description=(
            "Write FIXTURE's judgments as TREC qrels ('QID 0 DOCID REL' per judged id): "
            "the fixture's grades, or 1 for each expected id. Ids are escaped as "
            "'benchd once --format trec' writes them, so 'benchd score -c QRELS RUN' "
            "(or trec_eval, ranx, pytrec_eval) reproduces benchd's numbers."
        ),
    )
    p.add_argument(
        "fixture", metavar="FIXTURE", help="a fixture file (JSON or JSON Lines) or packaged:NAME"
    )
    p.add_argument(
        "--out", "-o", metavar="FILE", help="write here instead of standard output"
    )
    p.set_defaults(handler=_handle)


def qrels_lines(fixture: Fixture) -> Iterator[str]:
    """The qrels lines of ``fixture``, query by query in fixture order."""
    from benchd.surfacers.trec_run import trec_column

    for query in fixture.queries:
        qid = trec_column(query.id)
        for doc, grade in query.relevance.items():
            yield f"{qid} 0 {trec_column(doc)} {grade}"


def _packaged_hint(name: str) -> None:
    """A missing file named like a packaged fixture: say how to name the packaged one."""
    from benchd.inputs import PACKAGED_FIXTURES

    if name.startswith(_PACKAGED) or Path(name).exists():
        return
    stem = Path(name).name.removesuffix(".json")
    if stem in PACKAGED_FIXTURES:
        raise UsageError(
            f"{name}: no such file; the fixture shipped with benchd is "
            f"{_PACKAGED}{stem} (benchd qrels {_PACKAGED}{stem})"
        )


def _handle(args: argparse.Namespace) -> int:
    from benchd.fixtures.model import load_fixture
    from benchd.inputs import packaged_fixture

    name: str = args.fixture
    if args.out is not None and Path(args.out).is_dir():
        raise UsageError(f"--out {args.out}: is a directory; name the qrels file to write")
    path = packaged_fixture(name.removeprefix(_PACKAGED)) if name.startswith(_PACKAGED) else name
    _packaged_hint(name)
    text = "".join(f"{line}\n" for line in qrels_lines(load_fixture(path)))
    if args.out is None:
        sys.stdout.write(text)
    else:
        Path(args.out).write_text(text, encoding="utf-8")
        count = text.count("\n")
        print(f"wrote {args.out}: {count} judgments", file=sys.stderr)
    return EXIT_OK
