"""The embedders of :mod:`benchd.embed.models`, under the reference store's name for them."""

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
