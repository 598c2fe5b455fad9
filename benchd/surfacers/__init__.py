"""Surfacers read CycleResults and export them.

Push surfacers implement :class:`~benchd.surfacers.base.Surfacer` (the log);
pull surfacers read the result book when asked (Prometheus, status JSON).
"""
