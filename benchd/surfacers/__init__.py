"""Surfacers read CycleResults and export them.

Push surfacers implement :class:`~benchd.surfacers.base.Surfacer` (the log);
pull surfacers read the result book (``book``) when asked (Prometheus, status
JSON). ``table``, ``junit`` and ``trec_run`` render one command's results
(the terminal table, JUnit XML, a TREC run file).
"""
