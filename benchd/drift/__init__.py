"""Drift: the stage that compares each cycle with a baseline, after the cycle.

``tracker`` holds the rolling window and the comparison; ``baseline`` reads
and writes pinned baseline files; ``stats`` is the noise math; ``outcome``
is the typed verdict stored in ``CycleResult.drift``; ``settings`` is
``[probe.drift]``, a leaf the config package decodes.
"""
