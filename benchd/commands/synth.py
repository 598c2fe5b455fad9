"""``benchd synth``: write a deterministic synthetic fixture for load runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from benchd.fixtures.convert import FixtureWriter, Progress
from benchd.fixtures.synth import DEFAULT_CATEGORIES, SynthSpec, synth_memories, synth_queries

__all__ = ["register", "write_synth"]


def _count(text: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} must not be negative")
    return value


def _categories(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def register(sub: Any) -> None:
    """Add ``benchd synth``."""
    p = sub.add_parser(
        "synth",
        help="write a deterministic synthetic corpus with near-miss distractors",
        description="Write a synthetic fixture: each query has a target (grade 2), a paraphrase "
        "(grade 1) and near-miss distractors sharing most of the target's terms; the rest is "
        "filler. The same arguments always give a byte-identical file. Streams: 10^6 memories "
        "take constant memory (name the output *.jsonl).",
    )
    _add_arguments(p)
    p.set_defaults(handler=_handle)


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--memories",
        type=_count,
        required=True,
        metavar="N",
        help="number of memories (at least QUERIES x (2 + DISTRACTORS))",
    )
    p.add_argument(
        "--queries", type=_count, required=True, metavar="M", help="number of labeled queries"
    )
    p.add_argument("--seed", type=int, default=0, metavar="S", help="random seed (default: 0)")
    p.add_argument(
        "--distractors",
        type=_count,
        default=3,
        metavar="D",
        help="near-miss memories per query (default: 3)",
    )
    p.add_argument(
        "--categories",
        type=_categories,
        default=DEFAULT_CATEGORIES,
        metavar="A,B",
        help="comma-separated categories, rotated over queries "
        f"(default: {','.join(DEFAULT_CATEGORIES)})",
    )
    p.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="FIXTURE",
        help="fixture to write (*.jsonl, or *.json for small corpora)",
    )


def write_synth(spec: SynthSpec, out: Path, *, progress: Progress | None = None) -> FixtureWriter:
    """Generate ``spec`` into ``out``; return the closed writer (for its counts)."""
    meta = {
        "_comment": (
            f"benchd synth --memories {spec.memories} --queries {spec.queries} --seed {spec.seed} "
            f"--distractors {spec.distractors} --categories {','.join(spec.categories)}"
        )
    }
    with FixtureWriter(out, meta=meta, progress=progress) as writer:
        for memory in synth_memories(spec):
            writer.add_memory(memory)
        for query in synth_queries(spec):
            writer.add_query(query)
    return writer


def _handle(args: argparse.Namespace) -> int:
    spec = SynthSpec(
        memories=args.memories,
        queries=args.queries,
        seed=args.seed,
        categories=args.categories,
        distractors=args.distractors,
    )
    writer = write_synth(spec, args.out, progress=Progress("synthesising"))
    print(
        f"wrote {args.out}: {writer.memories} memories, {writer.queries} queries", file=sys.stdout
    )
    return 0
