"""The templated ``http`` target kind: config, request templating, record shaping, the adapter."""
