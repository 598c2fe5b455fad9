"""Drift: the tracker that compares each cycle with a baseline, and pinned baselines.

``tracker`` holds the rolling window and the comparison; ``baseline`` reads
and writes pinned baseline files.
"""
