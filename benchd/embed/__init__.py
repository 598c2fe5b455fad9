"""Client-side embeddings: the embedders, their on-disk vector cache and the embed stage.

Both the reference store (its dense retriever) and the targets (stores that
need vectors from the caller) import from here; neither imports the other.
"""

from benchd.embed.models import (
    Embedder,
    EmbedderError,
    EmbedderSpec,
    EmbedderSpecError,
    FloatMatrix,
    parse_embedder,
    read_spec,
    spec_problem,
)
from benchd.embed.stage import EmbedConfig, EmbedStage

__all__ = [
    "EmbedConfig",
    "EmbedStage",
    "Embedder",
    "EmbedderError",
    "EmbedderSpec",
    "EmbedderSpecError",
    "FloatMatrix",
    "parse_embedder",
    "read_spec",
    "spec_problem",
]
