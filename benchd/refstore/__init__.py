"""The reference store: a small Zengram-compatible memory API.

Start one in-process with :func:`running_refstore` (async) or
:class:`RefStoreThread` (sync); ``benchd refstore`` serves one standalone.
"""

from benchd.refstore.config import RefStoreConfig
from benchd.refstore.server import RefStoreThread, RunningRefStore, running_refstore

__all__ = ["RefStoreConfig", "RefStoreThread", "RunningRefStore", "running_refstore"]
