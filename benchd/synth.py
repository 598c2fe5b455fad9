"""A deterministic synthetic corpus with near-miss distractors, for load runs of any size.

Each query owns a *cluster* of memories about one invented entity:

* the target (grade 2): ``The staging vorluna port is 48213. ...``;
* a paraphrase of it (grade 1), worded differently with other context words;
* ``distractors`` near misses (not relevant) that share almost every term with
  the target but differ in the one that matters — another qualifier
  (``production`` instead of ``staging``) or another attribute (``timeout``
  instead of ``port``) — so a retriever that only matches bags of words ranks
  them level with the answer.

The remaining memories are filler about the same kind of entities, written with
qualifiers no query uses, so they compete for terms without being relevant.
Categories (default: the Zengram types ``fact``, ``event``, ``decision``,
``status``) rotate over clusters; each has its own sentence and question shapes,
and becomes the memory ``type`` and the query ``category``.

Everything is a pure function of ``(seed, index)``: memory *i* is generated
from a ``random.Random`` seeded with a string naming the seed and *i*'s cluster,
and cluster members are scattered over the id space by an affine permutation.
Nothing is held between records, so 10^6 memories stream in constant memory,
and the same arguments give byte-identical files on any machine (string seeds
are hashed with SHA-512 by :class:`random.Random`, independent of
``PYTHONHASHSEED``).
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from benchd.errors import UsageError

__all__ = ["DEFAULT_CATEGORIES", "SynthSpec", "synth_memories", "synth_queries"]

DEFAULT_CATEGORIES = ("fact", "event", "decision", "status")
_CATEGORY_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")

_SYLLABLES = tuple(c + v for c in "bdfgklmnprstvz" for v in "aeiou")  # 70
_CLUSTER_QUALIFIERS = (
    "staging", "production", "primary", "replica", "internal", "public",
    "legacy", "canary", "regional", "backup", "nightly", "edge",
)  # fmt: skip
_FILLER_QUALIFIERS = ("sandbox", "archived", "shadow", "partner", "trial", "mirror")
_ATTRIBUTES = (
    "port", "timeout", "owner", "region", "budget", "version", "quota", "schedule",
    "latency target", "retention", "rate limit", "batch size", "replica count", "cache ttl",
)  # fmt: skip
_CONTEXT = (
    "the quarterly review", "an incident retro", "the capacity plan", "a vendor call",
    "the migration checklist", "the on-call handover", "a design review", "the audit notes",
    "the cost report", "a customer escalation", "the release notes", "the security scan",
    "a load test", "the runbook update", "the roadmap session", "a dependency upgrade",
    "the backlog grooming", "the latency dashboard", "an architecture sync", "the budget forecast",
)  # fmt: skip
_TEMPLATES = {
    "fact": "The {q} {e} {a} is {v}. Noted during {c1} and {c2}.",
    "event": "On {d} the {q} {e} {a} changed to {v} after {c1}; {c2} followed.",
    "decision": "Decided to set the {q} {e} {a} to {v} following {c1} and {c2}.",
    "status": "The {q} {e} {a} stands at {v} as of {d}; tracked in {c1} and {c2}.",
}
_PARAPHRASE = "{e} ({q}): {a} = {v}. Source: {c1}, confirmed in {c2}."
_QUESTIONS = {
    "fact": "what is the {a} of the {q} {e}",
    "event": "when did the {a} of the {q} {e} change and to what",
    "decision": "what did we decide about the {a} for the {q} {e}",
    "status": "where does the {a} of the {q} {e} stand",
}
_EPOCH = date(2025, 1, 1)


def _entity(index: int) -> str:
    """A pronounceable made-up name, distinct for every index below 70**4.

    Three syllables while they last, four after; the index is scrambled by a
    multiplication coprime to the word space so neighbours do not share endings.
    """
    syllables = 3 if index < 70**3 else 4
    space = 70**syllables
    index = (index * 104729 + 4099) % space  # 104729 is prime, coprime to 70**n
    parts = []
    for _ in range(syllables):
        index, digit = divmod(index, len(_SYLLABLES))
        parts.append(_SYLLABLES[digit])
    return "".join(parts)


@dataclass(frozen=True, slots=True)
class SynthSpec:
    """What to generate: sizes, seed, categories, distractors per query."""

    memories: int
    queries: int
    seed: int
    categories: tuple[str, ...] = DEFAULT_CATEGORIES
    distractors: int = 3

    def __post_init__(self) -> None:
        if self.queries < 1 or self.memories < 1:
            raise UsageError("--memories and --queries must be at least 1")
        if self.distractors < 0:
            raise UsageError("--distractors must be 0 or more")
        if self.memories < self.queries * self.cluster_size:
            need = self.queries * self.cluster_size
            raise UsageError(
                f"--memories {self.memories} is too small for --queries {self.queries}: each "
                f"query needs {self.cluster_size} memories (target, paraphrase, "
                f"{self.distractors} distractors); give --memories >= {need} or fewer queries"
            )
        bad = [c for c in self.categories if not _CATEGORY_NAME.match(c)]
        if bad or not self.categories or len(set(self.categories)) != len(self.categories):
            raise UsageError(
                f"--categories {','.join(self.categories)!r}: give distinct lower-case names "
                "(letters, digits, '-', '_'; up to 32 characters), e.g. fact,event"
            )

    @property
    def cluster_size(self) -> int:
        return 2 + self.distractors

    @property
    def id_width(self) -> int:
        return max(6, len(str(self.memories - 1)))


class _Layout:
    """Where each cluster member lives: an affine permutation of the id space."""

    def __init__(self, spec: SynthSpec) -> None:
        n = spec.memories
        rng = random.Random(f"benchd-synth/{spec.seed}/layout")
        step = max(1, int(n * 0.6180339887)) | 1
        while math.gcd(step, n) != 1:
            step += 1
        self._n, self._step, self._offset = n, step, rng.randrange(n)
        self._inverse = pow(step, -1, n) if n > 1 else 0
        self._spec = spec

    def slot(self, position: int) -> int:
        """The generator slot written at ``position`` (slots < queries*cluster are clusters)."""
        return (self._step * position + self._offset) % self._n

    def position(self, slot: int) -> int:
        return (self._inverse * (slot - self._offset)) % self._n

    def memory_id(self, slot: int) -> str:
        return f"syn-{self.position(slot):0{self._spec.id_width}d}"


@dataclass(frozen=True, slots=True)
class _Cluster:
    category: str
    entity: str
    qualifiers: tuple[str, ...]
    attributes: tuple[str, str]
    values: tuple[int, ...]
    context: tuple[str, ...]
    day: int


def _cluster(spec: SynthSpec, index: int) -> _Cluster:
    rng = random.Random(f"benchd-synth/{spec.seed}/cluster/{index}")
    n = spec.cluster_size
    attributes = rng.sample(_ATTRIBUTES, 2)
    return _Cluster(
        category=spec.categories[index % len(spec.categories)],
        entity=_entity(index),
        qualifiers=tuple(rng.sample(_CLUSTER_QUALIFIERS, 3)),
        attributes=(attributes[0], attributes[1]),
        values=tuple(rng.sample(range(1000, 100000), n)),
        context=tuple(rng.sample(_CONTEXT, 4)),
        day=rng.randrange(365),
    )


def _fill(template: str, **parts: Any) -> str:
    return template.format(**parts)


def _member(cluster: _Cluster, member: int) -> str:
    """Text of cluster member 0 (target), 1 (paraphrase) or >= 2 (a near miss)."""
    q, a, e, v = cluster.qualifiers[0], cluster.attributes[0], cluster.entity, cluster.values
    c1, c2, c3, c4 = cluster.context
    d = (_EPOCH + timedelta(days=cluster.day)).isoformat()
    template = _TEMPLATES.get(cluster.category, _TEMPLATES["fact"])
    if member == 0:
        return _fill(template, q=q, e=e, a=a, v=v[0], c1=c1, c2=c2, d=d)
    if member == 1:
        return _fill(_PARAPHRASE, q=q, e=e, a=a, v=v[0], c1=c3, c2=c4)
    variant = (member - 2) % 3  # other qualifier / other attribute / third qualifier
    if variant == 1:
        return _fill(template, q=q, e=e, a=cluster.attributes[1], v=v[member], c1=c1, c2=c2, d=d)
    other = cluster.qualifiers[1 if variant == 0 else 2]
    return _fill(template, q=other, e=e, a=a, v=v[member], c1=c1, c2=c2, d=d)


def _filler(spec: SynthSpec, slot: int) -> tuple[str, str, int]:
    """A memory no query judges: (category, text, day)."""
    rng = random.Random(f"benchd-synth/{spec.seed}/filler/{slot}")
    category = spec.categories[rng.randrange(len(spec.categories))]
    entity = _entity(rng.randrange(2 * spec.queries + 1000))
    c1, c2 = rng.sample(_CONTEXT, 2)
    day = rng.randrange(365)
    text = _fill(
        _TEMPLATES.get(category, _TEMPLATES["fact"]),
        q=rng.choice(_FILLER_QUALIFIERS), e=entity, a=rng.choice(_ATTRIBUTES),
        v=rng.randrange(1000, 100000), c1=c1, c2=c2, d=(_EPOCH + timedelta(days=day)).isoformat(),
    )  # fmt: skip
    return category, text, day


def _created_at(day: int, slot: int) -> str:
    moment = _EPOCH + timedelta(days=day)
    return f"{moment.isoformat()}T{slot % 24:02d}:{slot * 7 % 60:02d}:00Z"


def synth_memories(spec: SynthSpec) -> Iterator[dict[str, Any]]:
    """Every memory, in id order; constant memory whatever ``spec.memories`` is."""
    layout = _Layout(spec)
    clustered = spec.queries * spec.cluster_size
    for position in range(spec.memories):
        slot = layout.slot(position)
        if slot < clustered:
            index, member = divmod(slot, spec.cluster_size)
            cluster = _cluster(spec, index)
            category, text, day = cluster.category, _member(cluster, member), cluster.day
        else:
            category, text, day = _filler(spec, slot)
        yield {
            "id": layout.memory_id(slot),
            "content": text,
            "type": category,
            "created_at": _created_at(day, slot),
        }


def synth_queries(spec: SynthSpec) -> Iterator[dict[str, Any]]:
    """One query per cluster: target grade 2, paraphrase grade 1, distractors unjudged."""
    layout = _Layout(spec)
    width = max(5, len(str(spec.queries - 1)))
    for index in range(spec.queries):
        cluster = _cluster(spec, index)
        base = index * spec.cluster_size
        question = _QUESTIONS.get(cluster.category, _QUESTIONS["fact"])
        yield {
            "id": f"synq-{index:0{width}d}",
            "q": _fill(
                question, q=cluster.qualifiers[0], e=cluster.entity, a=cluster.attributes[0]
            ),
            "relevance": {layout.memory_id(base): 2, layout.memory_id(base + 1): 1},
            "category": cluster.category,
        }
