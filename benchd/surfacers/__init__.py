"""Surfacers read CycleResults and export them (Prometheus, status JSON, logs)."""
