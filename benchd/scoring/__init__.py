"""Scoring: pure functions over rankings and judgments (no I/O, no clocks)."""

from benchd.scoring.aggregate import by_category, mean_metrics
from benchd.scoring.ranking import query_metrics, relevant_in_top

__all__ = ["by_category", "mean_metrics", "query_metrics", "relevant_in_top"]
