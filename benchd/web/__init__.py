"""benchd's own HTTP endpoints: /metrics, /api/status, /healthz, /readyz, reload."""
