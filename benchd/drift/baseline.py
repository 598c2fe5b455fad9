"""Pinned baselines: one probe's per-query quality, frozen to a TOML file.

A baseline is what "before" means when drift is decided against a fixed
point (see :mod:`benchd.drift.tracker`): per-query metric values, the 1-based rank of
each expected id in the ranked list, the aggregates, and what the numbers
depend on — the fixture's content hash (a different corpus makes the
baseline *stale*), the store's model label, the date and benchd's version.

It is written from the JSON of ``benchd once --format json`` (each entry of
``probes[]`` needs ``name``, ``outcome``, ``queries[]`` with ``id``,
``expected_ids``, ``ranked_ids`` and ``metrics``, plus ``fixture_hash`` and
``model``) or straight from one or more :class:`~benchd.result.CycleResult`
of the same probe: pinned from ``repeats = N`` cycles (``benchd baseline
save --repeats N``), a baseline carries its own noise — per query the value
of every repeat (``samples``) and the overlap of each later repeat's ranking
with the first (``overlap``). File layout (``format = 1``; ``repeats``,
``ranked_ids``, ``samples``, ``overlap`` and ``top_scores`` are optional, so older files
still load)::

    [baseline]
    format = 1
    probe = "default"
    corpus = "smoke"
    fixture_hash = "…sha256…"
    model = "hash:1024"
    created_at = "2026-11-29T23:00:00Z"
    benchd_version = "0.1.0"
    ks = [1, 5, 10]
    repeats = 3
    key_scheme = "namespaced"   # absent: pinned before benchd namespaced facts' keys

    [aggregate]
    "recall@10" = 0.83

    [[queries]]
    id = "q-001"
    expected_ids = ["m1", "m7"]
    ranks = { m1 = 2 }          # ids missing here were not returned
    metrics = { "recall@10" = 0.5, "mrr@10" = 0.5 }      # the mean over repeats
    ranked_ids = ["m7", "m1", "m3"]                      # the first repeat's top ids
    samples = { "recall@10" = [0.5, 0.5, 0.5] }          # every repeat (repeats >= 2)
    overlap = [1.0, 1.0]                                 # RBO of repeats 2.. with the first
    top_scores = [0.61, 0.61, 0.61]                      # the store's top score, each repeat

    [canary]                    # on a probe that embeds on the client (benchd.embed.canary)
    texts = ["q one", "q two"]
    vectors = [[0.1, …], [0.2, …]]   # the first repeat's vectors of the texts
    similarity = 1.0            # the lowest of the later repeats' with the first
    threshold = 0.999           # below this, the model changed
"""

from __future__ import annotations

import dataclasses
import math
import os
import tempfile
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import tomli_w

from benchd import __version__
from benchd.embed.canary import learned_threshold, min_cosine
from benchd.errors import ConfigError, InputError, OutputError
from benchd.inputs import read_input
from benchd.result import CycleResult, scores_of

__all__ = [
    "BASELINE_FORMAT",
    "KEY_SCHEME",
    "Baseline",
    "BaselineQuery",
    "PinnedCanary",
    "baseline_from_probe_json",
    "baseline_from_result",
    "baseline_from_results",
    "baseline_header",
    "expected_ranks",
    "load_baseline",
    "save_baseline",
    "select_probe",
    "write_baseline",
]

BASELINE_FORMAT = 1


KEY_SCHEME = "namespaced"
"""Facts' ``key`` and statuses' ``subject`` are written as ``benchd:<namespace>:...``.

A store that ranks on them (the reference store's tag scorer) ranks a corpus
written the old way differently: a baseline pinned before is stale there."""


@dataclass(frozen=True, slots=True)
class BaselineQuery:
    """One query's frozen answer: metric values and where each expected id ranked."""

    id: str
    expected_ids: tuple[str, ...]
    ranks: Mapping[str, int | None]  # expected id -> 1-based rank, None when not returned
    metrics: Mapping[str, float]  # the mean over the repeats
    ranked_ids: tuple[str, ...] = ()  # the first repeat's top ids, () in older files
    samples: Mapping[str, tuple[float, ...]] = field(default_factory=dict)  # key -> each repeat
    overlap: tuple[float, ...] = ()  # RBO of repeats 2..N with the first repeat's ranking
    top_scores: tuple[float, ...] = ()  # the store's top score in each repeat, where it gave one


@dataclass(frozen=True, slots=True)
class PinnedCanary:
    """The embedding canary's texts and their vectors when pinned, and the threshold learned."""

    texts: tuple[str, ...]
    vectors: tuple[tuple[float, ...], ...]
    similarity: float  # the lowest similarity of a later repeat with the first (1.0: one)
    threshold: float


@dataclass(frozen=True, slots=True)
class Baseline:
    """A probe's pinned quality, with what it depends on."""

    probe: str
    fixture_hash: str
    model: str
    created_at: str  # ISO 8601, UTC
    benchd_version: str
    queries: Mapping[str, BaselineQuery]  # by query id, in file order
    aggregate: Mapping[str, float] = field(default_factory=dict)
    ks: tuple[int, ...] = ()
    corpus: str = ""
    source: str = ""  # the file it was loaded from, for messages
    repeats: int = 1  # cycles it was measured over
    # How benchd wrote the store's global keys when this was pinned: KEY_SCHEME,
    # or "" for a baseline pinned before facts' key / statuses' subject were namespaced.
    key_scheme: str = ""
    canary: PinnedCanary | None = None  # on a probe that embeds on the client


def expected_ranks(expected_ids: Sequence[str], ranked_ids: Sequence[str]) -> dict[str, int | None]:
    """1-based rank of each expected id in ``ranked_ids`` (first occurrence), else None."""
    first: dict[str, int] = {}
    for position, doc in enumerate(ranked_ids, start=1):
        first.setdefault(doc, position)
    return {e: first.get(e) for e in expected_ids}


def _now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def baseline_from_result(result: CycleResult) -> Baseline:
    """Freeze a successful cycle as a baseline (queries that errored are left out)."""
    return baseline_from_results([result])


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def _frozen_query(qid: str, answers: Sequence[Any], depth: int) -> BaselineQuery:
    """One query over the repeats: mean metrics, every repeat's values, first repeat's ranks."""
    from benchd.drift.stats import rbo  # numpy: only when a baseline is made, not read

    first = answers[0]
    keys = [k for k in first.metrics if all(k in a.metrics for a in answers)]
    samples = {k: tuple(float(a.metrics[k]) for a in answers) for k in keys}
    top = tuple(first.ranked_ids[:depth])
    return BaselineQuery(
        id=qid,
        expected_ids=tuple(first.expected_ids),
        ranks=expected_ranks(first.expected_ids, first.ranked_ids),
        metrics={k: _mean(v) for k, v in samples.items()},
        ranked_ids=top,
        samples=samples if len(answers) > 1 else {},
        overlap=tuple(rbo(a.ranked_ids, top, depth) for a in answers[1:]),
        top_scores=_top_scores(answers),
    )


def _top_scores(answers: Sequence[Any]) -> tuple[float, ...]:
    """The store's top score of each repeat, or () unless every repeat has one."""
    scores = [scores_of(a.ranked_ids) for a in answers]
    firsts = [s[0] if s else None for s in scores]
    if any(f is None for f in firsts):
        return ()
    return tuple(float(f) for f in firsts if f is not None)


def baseline_from_results(results: Sequence[CycleResult]) -> Baseline:
    """Freeze ``len(results)`` successful cycles of one probe as one baseline with its noise.

    Only queries answered without error in every repeat are kept; every
    cycle must have succeeded on the same fixture.
    """
    if not results:
        raise InputError("no cycle to pin a baseline from")
    for result in results:
        if not result.ok:
            raise InputError(
                f"probe {result.probe!r}: cycle {result.cycle} ended {result.outcome!r}; "
                "pin a baseline from successful cycles"
            )
    first = results[0]
    if any(r.fixture_hash != first.fixture_hash for r in results):
        raise InputError(f"probe {first.probe!r}: the fixture changed between repeats")
    depth = max(first.ks, default=10)
    by_cycle = [{q.id: q for q in r.queries if q.error is None} for r in results]
    kept = [q.id for q in first.queries if all(q.id in c for c in by_cycle)]
    queries = {qid: _frozen_query(qid, [c[qid] for c in by_cycle], depth) for qid in kept}
    keys = set(first.aggregate).intersection(*(r.aggregate for r in results))
    return Baseline(
        probe=first.probe,
        fixture_hash=first.fixture_hash,
        model=first.info.model if first.info else "",
        created_at=_now_iso(),
        benchd_version=__version__,
        queries=queries,
        aggregate={k: _mean([r.aggregate[k] for r in results]) for k in sorted(keys)},
        ks=tuple(first.ks),
        corpus=first.corpus,
        repeats=len(results),
        key_scheme=KEY_SCHEME,
        canary=pinned_canary(results),
    )


def pinned_canary(results: Sequence[CycleResult]) -> PinnedCanary | None:
    """The canary of ``results``: the first repeat's vectors, the threshold from the others'.

    None unless every repeat read the canary (a probe that embeds on the
    client, its call answered each time) with the same texts.
    """
    readings = [r.info.canary if r.info is not None else None for r in results]
    first = readings[0]
    if first is None or not first.vectors:
        return None
    if any(c is None or not c.vectors or c.texts != first.texts for c in readings):
        return None
    seen = [min_cosine(c.vectors, first.vectors) for c in readings[1:] if c is not None]
    return PinnedCanary(
        texts=first.texts,
        vectors=first.vectors,
        similarity=min([1.0, *seen]),
        threshold=learned_threshold(seen),
    )


def select_probe(document: Mapping[str, Any], probe: str | None, source: str) -> Mapping[str, Any]:
    """The ``probes[]`` entry named ``probe`` (or the only one) of a result JSON document."""
    probes = document.get("probes") if isinstance(document, Mapping) else None
    if not isinstance(probes, list) or not probes:
        raise InputError(
            f"{source}: no 'probes' list; expected the output of `benchd once --format json`"
        )
    named = [p for p in probes if isinstance(p, Mapping)]
    names = [str(p.get("name", "?")) for p in named]
    if probe is None:
        if len(named) == 1:
            return named[0]
        raise InputError(
            f"{source}: holds {len(named)} probes ({', '.join(names)}); pick one with --probe NAME"
        )
    for entry, name in zip(named, names, strict=True):
        if name == probe:
            return entry
    raise InputError(f"{source}: no probe named {probe!r} (it has: {', '.join(names)})")


def _need(mapping: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    value = mapping.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise InputError(
            f"{where}.{key}: expected {kind.__name__}, got {type(value).__name__}"
            + ("" if key in mapping else " (missing)")
        )
    return value


def _number_map(value: Any, where: str) -> dict[str, float]:
    if not isinstance(value, Mapping):
        raise InputError(f"{where}: expected an object of metric -> number")
    out: dict[str, float] = {}
    for key, number in value.items():
        ok = isinstance(number, int | float) and not isinstance(number, bool)
        if not ok or not math.isfinite(number):
            raise InputError(f"{where}.{key}: expected a finite number, got {number!r}")
        out[str(key)] = float(number)
    return out


def _query_from_json(entry: Any, where: str) -> BaselineQuery:
    if not isinstance(entry, Mapping):
        raise InputError(f"{where}: expected an object")
    expected = [str(e) for e in _need(entry, "expected_ids", list, where)]
    ranked = [str(r) for r in _need(entry, "ranked_ids", list, where)]
    return BaselineQuery(
        id=str(_need(entry, "id", str, where)),
        expected_ids=tuple(expected),
        ranks=expected_ranks(expected, ranked),
        metrics=_number_map(entry.get("metrics"), f"{where}.metrics"),
        ranked_ids=tuple(ranked),
    )


def baseline_from_probe_json(entry: Mapping[str, Any], source: str) -> Baseline:
    """Build a baseline from one ``probes[]`` entry of ``benchd once --format json``."""
    name = str(entry.get("name", "?"))
    where = f"{source}: probes[{name}]"
    if entry.get("outcome") != "success":
        raise InputError(
            f"{where}.outcome is {entry.get('outcome')!r}; pin a baseline from a successful cycle"
        )
    fixture_hash = _need(entry, "fixture_hash", str, where)
    if not fixture_hash:
        raise InputError(f"{where}.fixture_hash is empty; rerun `benchd once` with a fixture")
    model = entry.get("model") or ""
    raw = _need(entry, "queries", list, where)
    queries = [_query_from_json(q, f"{where}.queries[{i}]") for i, q in enumerate(raw)]
    ks = entry.get("ks") or ()
    depth = max((int(k) for k in ks if isinstance(k, int)), default=10)
    kept = {
        q.id: dataclasses.replace(q, ranked_ids=q.ranked_ids[:depth])
        for q, src in zip(queries, raw, strict=True)
        if not src.get("error")
    }
    if not kept:
        raise InputError(f"{where}.queries: no query answered without error; nothing to pin")
    return Baseline(
        probe=name,
        fixture_hash=fixture_hash,
        model=str(model),
        created_at=_now_iso(),
        benchd_version=__version__,
        queries=kept,
        aggregate=_number_map(entry.get("aggregate") or {}, f"{where}.aggregate"),
        ks=tuple(int(k) for k in ks if isinstance(k, int)),
        corpus=str(entry.get("corpus") or ""),
        key_scheme=KEY_SCHEME,
    )


def baseline_header(baseline: Baseline) -> dict[str, Any]:
    """What the baseline describes: probe, corpus, fixture hash, model, when, which benchd."""
    return {
        "probe": baseline.probe,
        "corpus": baseline.corpus,
        "fixture_hash": baseline.fixture_hash,
        "model": baseline.model,
        "created_at": baseline.created_at,
        "benchd_version": baseline.benchd_version,
        "ks": list(baseline.ks),
        "repeats": baseline.repeats,
    }


def _query_table(q: BaselineQuery) -> dict[str, Any]:
    table: dict[str, Any] = {
        "id": q.id,
        "expected_ids": list(q.expected_ids),
        "ranks": {e: r for e, r in q.ranks.items() if r is not None},
        "metrics": dict(q.metrics),
    }
    if q.ranked_ids:
        table["ranked_ids"] = list(q.ranked_ids)
    if q.samples:
        table["samples"] = {k: list(v) for k, v in q.samples.items()}
    if q.overlap:
        table["overlap"] = list(q.overlap)
    if q.top_scores:
        table["top_scores"] = list(q.top_scores)
    return table


def _to_toml(baseline: Baseline) -> dict[str, Any]:
    head: dict[str, Any] = {"format": BASELINE_FORMAT, **baseline_header(baseline)}
    if baseline.key_scheme:
        head["key_scheme"] = baseline.key_scheme
    queries = [_query_table(q) for q in baseline.queries.values()]
    document = {"baseline": head, "aggregate": dict(baseline.aggregate), "queries": queries}
    if baseline.canary is not None:
        document["canary"] = _canary_table(baseline.canary)
    return document


def _canary_table(canary: PinnedCanary) -> dict[str, Any]:
    return {
        "texts": list(canary.texts),
        "vectors": [list(v) for v in canary.vectors],
        "similarity": canary.similarity,
        "threshold": canary.threshold,
    }


def write_baseline(baseline: Baseline, path: str | os.PathLike[str]) -> None:
    """Write ``baseline`` to ``path`` atomically (a reader never sees half a file).

    A path that exists and is not a regular file (``/dev/stdout``, a FIFO) is
    written in place, never replaced. A failed write is an
    :class:`~benchd.errors.OutputError` (exit 5).
    """
    target = Path(path)
    data = tomli_w.dumps(_to_toml(baseline)).encode()
    tmp: str | None = None
    try:
        if target.exists() and not target.is_file():
            with target.open("wb") as handle:
                handle.write(data)
            return
        fd, tmp = tempfile.mkstemp(dir=target.parent or ".", prefix=f".{target.name}.")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, target)
        tmp = None
    except OSError as exc:
        raise OutputError.from_os_error(exc, f"writing the baseline {target}") from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def save_baseline(
    result_json: Mapping[str, Any],
    probe: str | None,
    path: str | os.PathLike[str],
    *,
    source: str = "result",
) -> Baseline:
    """Pin ``probe`` (or the only probe) of a ``benchd once --format json`` document."""
    baseline = baseline_from_probe_json(select_probe(result_json, probe, source), source)
    write_baseline(baseline, path)
    return baseline


def load_baseline(path: str | os.PathLike[str]) -> Baseline:
    """Read and strictly validate a baseline file; errors name the file and the key."""
    source = str(path)
    try:
        document = tomllib.loads(read_input(path, limit=MAX_BASELINE_BYTES).decode("utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(
            f"{source}: baseline file not found; create it with `benchd baseline save`"
        ) from exc
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read the baseline: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from exc
    except UnicodeDecodeError:
        raise ConfigError(f"{source}: not UTF-8 text; is this a baseline file?") from None
    except ValueError as exc:  # not a regular file, too large, a 4,300+ digit integer
        raise ConfigError(f"{source}: {_read_problem(exc)}") from None
    except RecursionError:
        raise ConfigError(f"{source}: not valid TOML: nested too deeply") from None
    return _parse(document, source)


MAX_BASELINE_BYTES = 64 * 2**20


def _read_problem(exc: ValueError) -> str:
    if "digits" in str(exc):  # int() inside tomllib, past Python's digit limit
        return "not valid TOML: an integer with thousands of digits"
    return str(exc)


_HEAD_KEYS = {
    "format": int,
    "probe": str,
    "corpus": str,
    "fixture_hash": str,
    "model": str,
    "created_at": str,
    "benchd_version": str,
    "ks": list,
    "repeats": int,
    "key_scheme": str,
}
_QUERY_KEYS = {
    "id": str,
    "expected_ids": list,
    "ranks": dict,
    "metrics": dict,
    "ranked_ids": list,
    "samples": dict,
    "overlap": list,
    "top_scores": list,
}


def _check_table(table: Any, allowed: Mapping[str, type], where: str) -> Mapping[str, Any]:
    """Reject a non-table, unknown keys and wrongly typed values, naming the key."""
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: expected a table")
    for key, value in table.items():
        if key not in allowed:
            raise ConfigError(
                f"{where}.{key}: unknown key (allowed: {', '.join(allowed)}); "
                "was this file written by `benchd baseline save`?"
            )
        kind = allowed[key]
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            raise ConfigError(f"{where}.{key}: expected {kind.__name__}, got {value!r}")
    return table


def _toml_numbers(value: Any, where: str) -> dict[str, float]:
    try:
        return _number_map(value, where)
    except InputError as exc:
        raise ConfigError(exc.message) from exc


def _parse_query(entry: Any, where: str) -> BaselineQuery:
    table = _check_table(entry, _QUERY_KEYS, where)
    for key in ("id", "expected_ids", "metrics"):
        if key not in table:
            raise ConfigError(f"{where}.{key}: missing")
    expected = table["expected_ids"]
    if not expected or not all(isinstance(e, str) for e in expected):
        raise ConfigError(f"{where}.expected_ids: expected a non-empty list of id strings")
    ranks: dict[str, int | None] = dict.fromkeys(expected)
    for doc, rank in table.get("ranks", {}).items():
        if doc not in ranks:
            raise ConfigError(f"{where}.ranks.{doc}: not one of expected_ids")
        if not isinstance(rank, int) or isinstance(rank, bool) or rank < 1:
            raise ConfigError(f"{where}.ranks.{doc}: expected a rank >= 1, got {rank!r}")
        ranks[doc] = rank
    ranked = table.get("ranked_ids", [])
    if not all(isinstance(r, str) for r in ranked):
        raise ConfigError(f"{where}.ranked_ids: expected a list of id strings")
    return BaselineQuery(
        id=table["id"],
        expected_ids=tuple(expected),
        ranks=ranks,
        metrics=_toml_numbers(table["metrics"], f"{where}.metrics"),
        ranked_ids=tuple(ranked),
        samples=_parse_samples(table.get("samples", {}), f"{where}.samples"),
        overlap=_unit_list(table.get("overlap", []), f"{where}.overlap"),
        top_scores=_number_list(table.get("top_scores", []), f"{where}.top_scores"),
    )


def _number_list(value: Any, where: str) -> tuple[float, ...]:
    ok = isinstance(value, list) and all(
        isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) for x in value
    )
    if not ok:
        raise ConfigError(f"{where}: expected a list of finite numbers")
    return tuple(float(x) for x in value)


def _unit_list(value: Any, where: str) -> tuple[float, ...]:
    ok = isinstance(value, list) and all(
        isinstance(x, int | float) and not isinstance(x, bool) and 0.0 <= x <= 1.0 for x in value
    )
    if not ok:
        raise ConfigError(f"{where}: expected a list of numbers between 0 and 1")
    return tuple(float(x) for x in value)


def _parse_samples(value: Any, where: str) -> dict[str, tuple[float, ...]]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a table of metric -> list of numbers")
    out = {str(k): _unit_list(v, f"{where}.{k}") for k, v in value.items()}
    if len({len(v) for v in out.values()}) > 1:
        raise ConfigError(f"{where}: every metric needs one value per repeat")
    return out


def _parse_queries(raw: Any, source: str) -> dict[str, BaselineQuery]:
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{source}: queries: expected a non-empty array of tables")
    queries: dict[str, BaselineQuery] = {}
    for i, entry in enumerate(raw):
        query = _parse_query(entry, f"{source}: queries[{i}]")
        if query.id in queries:
            raise ConfigError(f"{source}: queries[{i}].id: duplicate query id {query.id!r}")
        queries[query.id] = query
    return queries


def _parse(document: Mapping[str, Any], source: str) -> Baseline:
    unknown = set(document) - {"baseline", "aggregate", "queries", "canary"}
    if unknown:
        raise ConfigError(f"{source}: {sorted(unknown)[0]}: unknown top-level key")
    head = _check_table(document.get("baseline"), _HEAD_KEYS, f"{source}: baseline")
    if head.get("format") != BASELINE_FORMAT:
        raise ConfigError(
            f"{source}: baseline.format: expected {BASELINE_FORMAT}, got {head.get('format')!r}; "
            "re-pin with this benchd version"
        )
    for key in ("probe", "fixture_hash"):
        if not head.get(key):
            raise ConfigError(f"{source}: baseline.{key}: missing or empty")
    ks = head.get("ks", [])
    if not all(isinstance(k, int) and not isinstance(k, bool) and k > 0 for k in ks):
        raise ConfigError(f"{source}: baseline.ks: expected a list of positive integers")
    repeats = head.get("repeats", 1)
    if repeats < 1:
        raise ConfigError(f"{source}: baseline.repeats: expected a number of cycles >= 1")
    return Baseline(
        repeats=repeats,
        probe=head["probe"],
        fixture_hash=head["fixture_hash"],
        model=head.get("model", ""),
        created_at=head.get("created_at", ""),
        benchd_version=head.get("benchd_version", ""),
        queries=_parse_queries(document.get("queries"), source),
        aggregate=_toml_numbers(document.get("aggregate", {}), f"{source}: aggregate"),
        ks=tuple(ks),
        corpus=head.get("corpus", ""),
        source=source,
        key_scheme=head.get("key_scheme", ""),
        canary=_parse_canary(document["canary"], source) if "canary" in document else None,
    )


_CANARY_KEYS = {"texts": list, "vectors": list, "similarity": float, "threshold": float}


def _parse_canary(raw: Any, source: str) -> PinnedCanary:
    where = f"{source}: canary"
    table = _check_table(raw, _CANARY_KEYS, where)
    for key in _CANARY_KEYS:
        if key not in table:
            raise ConfigError(f"{where}.{key}: missing; re-pin with `benchd baseline save`")
    texts = table["texts"]
    if not texts or not all(isinstance(t, str) and t for t in texts):
        raise ConfigError(f"{where}.texts: expected a non-empty list of texts")
    vectors = [_number_list(v, f"{where}.vectors[{i}]") for i, v in enumerate(table["vectors"])]
    if len(vectors) != len(texts) or len({len(v) for v in vectors}) != 1 or not vectors[0]:
        raise ConfigError(f"{where}.vectors: expected one vector per text, all of one width")
    for key in ("similarity", "threshold"):
        if not -1.0 <= table[key] <= 1.0:
            raise ConfigError(f"{where}.{key}: expected a number between -1 and 1")
    return PinnedCanary(tuple(texts), tuple(vectors), table["similarity"], table["threshold"])
