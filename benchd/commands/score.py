"""``benchd score``: trec_eval's offline scorer, same inputs, flags and output."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from benchd.errors import UsageError
from benchd.scoring.trec.evaluate import ScoreOptions, score_files
from benchd.scoring.trec.format import format_json, format_text
from benchd.scoring.trec.measures import parse_measures

__all__ = ["options_from_args", "register", "run_score"]

_DESCRIPTION = """\
Score a TREC run file against a qrels file the way trec_eval does, and print
trec_eval's table (measure, qid or "all", value). QRELS lines are
"qid 0 docno rel"; RUN lines are "qid Q0 docno rank score tag". Documents are
ranked by score descending, ties broken by docno descending. With no -m the
"official" measures are printed; -m all_trec prints every measure benchd
implements; parameters select cut-offs, e.g. -m P.5,10 -m ndcg_cut.10.
"""


def register(sub: Any) -> None:
    """Add the ``score`` subcommand."""
    p = sub.add_parser(
        "score",
        help="score a TREC run against qrels, trec_eval-compatible",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("-q", action="store_true", help="also print each topic's values")
    p.add_argument(
        "-c",
        action="store_true",
        help="average over every qrels topic; topics missing from the run score 0",
    )
    p.add_argument(
        "-l",
        type=int,
        default=1,
        metavar="LEVEL",
        help="lowest grade that counts as relevant (default 1)",
    )
    p.add_argument(
        "-M", type=int, default=None, metavar="N", help="use at most N documents per topic"
    )
    p.add_argument(
        "-m",
        action="append",
        default=[],
        metavar="MEASURE",
        help="measure, nickname (official, all_trec) or measure.params; repeatable",
    )
    p.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="processes for a run of 32 MiB or more (default 1; benchd only)",
    )
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format")
    p.add_argument("qrels", type=Path, metavar="QRELS", help="trec_eval qrels file")
    p.add_argument("run", type=Path, metavar="RUN", help="trec_eval run (results) file")
    p.set_defaults(handler=run_score)


def options_from_args(args: argparse.Namespace) -> ScoreOptions:
    """Check the flags and turn them into :class:`ScoreOptions`."""
    if args.l < 0:
        raise UsageError(f"-l {args.l}: the relevance level must be 0 or more")
    if args.M is not None and args.M <= 0:
        raise UsageError(f"-M {args.M}: the maximum documents per topic must be positive")
    if args.jobs <= 0:
        raise UsageError(f"-j {args.jobs}: the number of processes must be positive")
    return ScoreOptions(
        selection=parse_measures(args.m),
        rel_level=args.l,
        max_docs=args.M,
        complete=args.c,
        jobs=args.jobs,
    )


def run_score(args: argparse.Namespace) -> int:
    """Score ``args.run`` against ``args.qrels`` and print the table (or JSON)."""
    options = options_from_args(args)
    run = score_files(args.qrels, args.run, options)
    out = sys.stdout
    if args.format == "json":
        json.dump(format_json(run, options, args.q), out, indent=2)
        out.write("\n")
    else:
        out.writelines(line + "\n" for line in format_text(run, options, args.q))
    if run.unscored and not args.c:
        print(
            f"benchd score: note: {len(run.unscored)} qrels topic(s) have no results in "
            f"{args.run} and were left out of the averages (pass -c to count them as 0)",
            file=sys.stderr,
        )
    return 0
