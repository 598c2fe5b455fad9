"""``benchd convert SOURCE ... --out FIXTURE.json[l]``: public benchmarks → benchd fixtures."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchd.errors import InputError, UsageError
from benchd.fixtures.convert import (
    ConvertSummary,
    FixtureWriter,
    Progress,
    Tally,
    convert_beir,
    convert_cranfield,
    convert_longmemeval,
    convert_trec,
)

__all__ = ["register"]

_Run = Callable[[argparse.Namespace, FixtureWriter, Tally], None]


@dataclass(frozen=True, slots=True)
class _Source:
    """One input format: its help line, its own arguments, and how to run it."""

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: _Run
    describe: Callable[[argparse.Namespace], str]


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


# ------------------------------------------------------------------ per-source arguments


def _beir_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "dir",
        type=Path,
        metavar="DIR",
        help="a BEIR dataset folder (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv)",
    )
    p.add_argument("--split", default="test", help="qrels split to use (default: test)")


def _lme_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "file",
        type=Path,
        metavar="FILE",
        help="longmemeval_s.json, longmemeval_m.json or longmemeval_oracle.json",
    )
    p.add_argument(
        "--granularity",
        choices=("session", "turn"),
        default="session",
        help="one memory per session (relevant: answer_session_ids) or per turn "
        "(relevant: turns with has_answer); default: session",
    )
    p.add_argument(
        "--user-only",
        action="store_true",
        help="index user turns only, as the LongMemEval paper's retrieval runs do",
    )


def _trec_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--docs",
        type=Path,
        action="append",
        required=True,
        metavar="FILE",
        help="TREC <DOC> file (may be .gz); repeat for several files",
    )
    p.add_argument(
        "--topics", type=Path, required=True, metavar="FILE", help="TREC <top> topics file"
    )
    p.add_argument(
        "--qrels",
        type=Path,
        required=True,
        metavar="FILE",
        help="qrels: 'QID ITER DOCNO REL' per line",
    )
    p.add_argument(
        "--query-field",
        choices=("title", "desc", "title+desc"),
        default="title",
        help="which topic field becomes the query text (default: title)",
    )


def _cranfield_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "dir", type=Path, metavar="DIR", help="folder holding cran.all.1400, cran.qry and cranqrel"
    )


# ------------------------------------------------------------------ runners


def _run_beir(a: argparse.Namespace, w: FixtureWriter, t: Tally) -> None:
    convert_beir(a.dir, w, t, split=a.split, max_queries=a.max_queries)


def _run_lme(a: argparse.Namespace, w: FixtureWriter, t: Tally) -> None:
    convert_longmemeval(
        a.file,
        w,
        t,
        granularity=a.granularity,
        user_only=a.user_only,
        max_queries=a.max_queries,
    )


def _run_trec(a: argparse.Namespace, w: FixtureWriter, t: Tally) -> None:
    convert_trec(
        a.docs, a.topics, a.qrels, w, t, query_field=a.query_field, max_queries=a.max_queries
    )


def _run_cranfield(a: argparse.Namespace, w: FixtureWriter, t: Tally) -> None:
    convert_cranfield(a.dir, w, t, max_queries=a.max_queries)


_SOURCES: dict[str, _Source] = {
    "beir": _Source(
        "a BEIR dataset folder",
        _beir_args,
        _run_beir,
        lambda a: f"BEIR {a.dir.name} ({a.split} split)",
    ),
    "longmemeval": _Source(
        "a LongMemEval question file",
        _lme_args,
        _run_lme,
        lambda a: f"LongMemEval {a.file.name} ({a.granularity} granularity)",
    ),
    "trec": _Source(
        "TREC documents, topics and qrels",
        _trec_args,
        _run_trec,
        lambda a: f"TREC topics {a.topics.name}, qrels {a.qrels.name}",
    ),
    "cranfield": _Source(
        "the Cranfield 1400 collection",
        _cranfield_args,
        _run_cranfield,
        lambda a: "Cranfield 1400 (grade = 5 - Cleverdon code)",
    ),
}


def register(sub: Any) -> None:
    """Add ``benchd convert`` and one sub-command per source format."""
    p = sub.add_parser(
        "convert",
        help="convert a public benchmark (BEIR, LongMemEval, TREC, Cranfield) to a fixture",
        description="Convert a public retrieval benchmark into a benchd fixture. The corpus is "
        "streamed; only judgments and query texts are held in memory. Name the output *.jsonl "
        "for large corpora.",
    )
    kinds = p.add_subparsers(dest="source", metavar="SOURCE", required=True, parser_class=type(p))
    for name, source in _SOURCES.items():
        sp = kinds.add_parser(name, help=source.help, description=f"Convert {source.help}.")
        source.add_arguments(sp)
        sp.add_argument(
            "--out",
            type=Path,
            required=True,
            metavar="FIXTURE",
            help="fixture to write: *.json, or *.jsonl (JSON Lines) for big corpora",
        )
        sp.add_argument(
            "--max-queries",
            type=_positive,
            metavar="N",
            help="keep only the first N judged queries",
        )
        sp.set_defaults(handler=_handle)


def run_conversion(args: argparse.Namespace, source_name: str) -> ConvertSummary:
    """Run one conversion from parsed arguments and return its summary (used by bench/)."""
    source = _SOURCES[source_name]
    tally = Tally()
    out: Path = args.out
    if out.is_dir():
        raise UsageError(f"--out {out}: is a directory; name the fixture file to write")
    described = source.describe(args)
    progress = Progress(f"converting {described}")
    meta = {"_comment": f"Converted from {described} by benchd convert."}
    with FixtureWriter(out, meta=meta, progress=progress) as writer:
        source.run(args, writer, tally)
        if writer.queries == 0 or writer.memories == 0:
            raise InputError(
                f"{described}: nothing to write ({writer.memories} memories, {writer.queries} "
                "judged queries); check the input files and the chosen split"
            )
    return ConvertSummary.of(described, str(out), writer.memories, writer.queries, tally)


def _handle(args: argparse.Namespace) -> int:
    summary = run_conversion(args, args.source)
    print(summary.describe(), file=sys.stdout)
    return 0
