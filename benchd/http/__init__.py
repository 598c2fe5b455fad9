"""HTTP plumbing for the kinds and the embedder.

The retrying client, the pool sender, bounded answers, the decode worker.

It knows no namespace: nothing here imports the flow (:mod:`benchd.store.flow`) or a kind.
"""
