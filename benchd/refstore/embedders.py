"""The embedders moved to :mod:`benchd.embed.models`; this name stays for code importing it."""

from benchd.embed.models import (
    MODEL_DIMS,
    MODELS_EXTRA,
    E5Embedder,
    Embedder,
    EmbedderError,
    EmbedderSpecError,
    FloatMatrix,
    HashEmbedder,
    MiniLMEmbedder,
    OpenAIEmbedder,
    parse_embedder,
)

__all__ = [
    "MODELS_EXTRA",
    "MODEL_DIMS",
    "E5Embedder",
    "Embedder",
    "EmbedderError",
    "EmbedderSpecError",
    "FloatMatrix",
    "HashEmbedder",
    "MiniLMEmbedder",
    "OpenAIEmbedder",
    "parse_embedder",
]
