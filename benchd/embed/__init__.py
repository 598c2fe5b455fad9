"""Client-side embeddings: the embedders, their on-disk vector cache and the embed stage.

Both the reference store (its dense retriever) and the targets (stores that
need vectors from the caller) import from here; neither imports the other.
This package's own namespace stays light (specs and the config table, no
numpy): import :mod:`benchd.embed.stage` or :mod:`benchd.embed.models` for
the parts that compute.
"""

from benchd.embed.config import EmbedConfig
from benchd.embed.spec import EmbedderSpec, EmbedderSpecError, read_spec, spec_problem

__all__ = ["EmbedConfig", "EmbedderSpec", "EmbedderSpecError", "read_spec", "spec_problem"]
