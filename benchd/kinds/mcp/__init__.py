"""The ``mcp`` kind: any memory server that speaks the Model Context Protocol.

``config`` (the tool map; imports nothing of the SDK, so config loads
without ``benchd[mcp]``), ``wire`` (stdio and streamable HTTP, bounded),
``session`` (handshake, ``tools/list``, ``tools/call``, restart),
``connect`` (a session from a config) and ``tools`` (the store's operations
as tool calls). The SDK (``mcp``, the ``benchd[mcp]`` extra) is imported
only by ``session``.
"""
