"""The store protocol, its capabilities and lease record, and the one namespace flow over it.

No module here imports HTTP plumbing (:mod:`benchd.http`) or a kind (:mod:`benchd.kinds`).
"""
