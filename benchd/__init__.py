"""benchd: continuous relevance and latency probing of retrieval stores.

Every cycle benchd seeds a reserved labeled corpus into a store, fires
labeled queries at it (serially and under load), scores the rankings and
exports everything as Prometheus metrics.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("benchd")
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
