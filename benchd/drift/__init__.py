"""Drift: the stage that compares each cycle with a baseline, after the cycle.

``tracker`` holds the rolling window and the comparison; ``baseline`` reads
and writes pinned baseline files; ``stats`` is the noise math. The typed
verdict stored in ``CycleResult.drift`` is :mod:`benchd.drift_outcome`, below
the result; ``[probe.drift]`` is :mod:`benchd.config.drift`, a leaf.
"""
