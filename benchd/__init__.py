"""benchd: continuous relevance and latency probing of retrieval stores.

Every cycle benchd seeds a reserved labeled corpus into a store, fires
labeled queries at it (serially and under load), scores the rankings and
exports everything as Prometheus metrics.
"""

# The one place the version is written: pyproject.toml reads it from here
# ([tool.setuptools.dynamic]). A literal, not importlib.metadata: importing that
# would slow `benchd --version`, which imports nothing else.
__version__ = "0.1.0"

__all__ = ["__version__"]
