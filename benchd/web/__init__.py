"""benchd's own HTTP endpoints: /, /metrics, /api/status, /healthz, /readyz, reload, run.

``app`` is the ASGI app over the result book, ``auth`` checks credentials,
``server`` serves it with uvicorn under connection and time limits, ``page``
renders the status page.
"""
