"""Scoring: pure functions over rankings and judgments (no I/O, no clocks)."""
